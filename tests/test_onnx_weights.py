"""Big weights through import, rewrite and export without copies (issue 21, item 6): an
imported weight is a view of the model's bytes, hash-consing keeps one node per value without
copying the value into its key, the exporter writes each weight from its array, and the
results are the same model."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_bench_smoke import _load as load_bench  # noqa: E402

from ngrules.cli.graphio import save  # noqa: E402
from ngrules.engine.driver import rewrite  # noqa: E402
from ngrules.interop.onnx import OnnxError, weights  # noqa: E402
from ngrules.interop.onnx.exporter import export_parts, to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.ir import builders as F  # noqa: E402
from ngrules.ir.axes import Axis  # noqa: E402
from ngrules.ir.filebytes import FileBytes  # noqa: E402
from ngrules.ir.filebytes import root as bytes_of  # noqa: E402
from ngrules.ir.graph import creation_order  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402

BIG = weights.STEERING_SIZE + 1


@pytest.fixture(scope="module")
def bench():
    return load_bench("big_models")


def dense(rows=BIG // 8 + 1, cols=8, seed=0):
    """x[2, rows] -> Gemm with a weight of rows*cols (> STEERING_SIZE) and a small bias."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((cols, rows)).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, cols])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, w


def constants(outputs):
    return [n for n in creation_order(outputs) if n.op == "Constant"]


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString() if not isinstance(model, str)
                                   else model, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


# -- import -------------------------------------------------------------------------------------
@pytest.mark.parametrize("from_file", [True, False])
def test_an_imported_weight_views_the_models_bytes(tmp_path, from_file):
    model, w = dense()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    before = model.SerializeToString()
    imported = import_model(str(path) if from_file else model)
    big = [c for c in constants(imported.outputs) if c.attrs["value"].size >= BIG]
    assert len(big) == 1
    value = big[0].attrs["value"]
    # no copy was made (an equal weight of an earlier import, hash-consed, views its bytes)
    assert isinstance(bytes_of(value), (bytes, FileBytes)) and not value.flags.writeable
    # a file's bytes are the importer's, to give to a rewrite (`spend`); a caller's are not
    assert isinstance(imported.spendable, FileBytes) if from_file else imported.spendable is None
    np.testing.assert_array_equal(value, w)
    assert model.SerializeToString() == before  # the caller's model is left as it was


def test_a_weight_whose_raw_data_is_short_is_refused(tmp_path):
    model, _ = dense()
    tensor = model.graph.initializer[0]
    tensor.raw_data = tensor.raw_data[:-4]
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(OnnxError, match="does not match its dims"):
        import_model(str(path))


def test_two_weights_of_one_name_are_refused(tmp_path):
    model, _ = dense()
    model.graph.initializer.append(model.graph.initializer[0])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(OnnxError, match="w initializer name is not unique"):
        import_model(str(path))


# -- hash-consing -------------------------------------------------------------------------------
def test_equal_big_constants_are_one_node_and_unequal_ones_two():
    a = np.arange(3 * BIG, dtype=np.float32)
    b = a.copy()
    b[1] = -1.0  # outside the hash's sample: only the full comparison tells them apart
    axes = [Axis("K", 3 * BIG)]
    assert F.constant(a, axes) is F.constant(a.copy(), axes)
    assert F.constant(a, axes) is not F.constant(b, axes)
    zero, minus = np.zeros(BIG, np.float32), -np.zeros(BIG, np.float32)
    small = [Axis("K", BIG)]
    assert F.constant(zero, small) is not F.constant(minus, small)  # the bytes decide


def test_a_constant_does_not_change_when_its_source_array_does():
    a = np.ones(BIG, np.float32)
    node = F.constant(a, [Axis("K", BIG)])
    a[0] = 5.0
    assert node.attrs["value"][0] == 1.0


# -- export -------------------------------------------------------------------------------------
def test_the_exporter_keeps_weights_as_the_graphs_own_arrays_and_writes_them_once(tmp_path):
    model, _ = dense()
    imported = import_model(model)
    held = [c.attrs["value"] for c in constants(imported.outputs) if c.attrs["value"].size >= BIG]
    light, arrays = export_parts(imported.outputs, output_names=imported.output_names)
    assert len(arrays) == 1 and np.shares_memory(next(iter(arrays.values())), held[0])
    assert not any(t.name in arrays for t in light.graph.initializer)
    path = tmp_path / "out.onnx"
    save(str(path), imported.outputs, imported.output_names)
    written = onnx.load(str(path))
    onnx.checker.check_model(written, full_check=True)
    whole = to_onnx(imported.outputs, output_names=imported.output_names)
    assert written.SerializeToString() == whole.SerializeToString() or {
        t.name: numpy_helper.to_array(t).tobytes() for t in written.graph.initializer
    } == {t.name: numpy_helper.to_array(t).tobytes() for t in whole.graph.initializer}
    x = np.random.default_rng(1).standard_normal((2, model.graph.input[0].type.tensor_type
                                                  .shape.dim[1].dim_value)).astype(np.float32)
    for out in (written, whole):
        np.testing.assert_allclose(run(out, {"x": x})[0], run(model, {"x": x})[0],
                                   rtol=1e-4, atol=1e-4)


# -- the benchmark, small -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["resnet50", "vgg19"])
def test_the_big_models_bench_runs_small_and_its_outputs_equal_the_input(bench, tmp_path, name):
    path = bench.model_file(name, tmp_path, width=4, size=32)
    rules = load_library()
    imported = import_model(str(path))
    outputs = rewrite(imported.outputs, rules, pipeline="inference").outputs
    out = tmp_path / "out.onnx"
    save(str(out), outputs, imported.output_names)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = run(str(path), {"x": x})[0]
    np.testing.assert_allclose(run(str(out), {"x": x})[0], want, rtol=1e-3, atol=1e-4)
    row = bench.run_once(path, "cpu", tmp_path / "again.onnx")
    assert set(row["seconds"]) == set(bench.STAGES) and row["nodes"] > 0
    np.testing.assert_allclose(run(str(tmp_path / "again.onnx"), {"x": x})[0], want,
                               rtol=1e-3, atol=1e-4)


def test_a_transposed_weight_is_written_in_blocks_as_its_c_order(tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "BLOCK_BYTES", 64)
    array = np.arange(40 * 30, dtype=np.float32).reshape(40, 30).T  # a view, not C-ordered
    light = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [30, 40])]),
        opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "w.onnx"
    with open(path, "wb") as f:
        weights.write(f, light, {"w": array})
    (tensor,) = onnx.load(str(path)).graph.initializer
    np.testing.assert_array_equal(numpy_helper.to_array(tensor), array)
    assert len(list(weights._blocks(array))) > 1


@pytest.mark.parametrize("order", ["C", "transposed"])
def test_no_write_call_is_given_more_than_write_bytes(tmp_path, monkeypatch, order):
    """Each weight goes to the file in calls of at most WRITE_BYTES (a large call can stall
    in the kernel), and the file read back holds the weight."""
    monkeypatch.setattr(weights, "WRITE_BYTES", 1000)
    array = np.arange(40 * 300, dtype=np.float32).reshape(40, 300)
    array = array if order == "C" else array.T
    light = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(array.shape))]),
        opset_imports=[helper.make_opsetid("", 17)])
    sizes = []

    class Recording:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            sizes.append(len(memoryview(data).cast("B")))
            return self.f.write(data)

    path = tmp_path / "w.onnx"
    with open(path, "wb") as f:
        weights.write(Recording(f), light, {"w": array})
    (tensor,) = onnx.load(str(path)).graph.initializer
    np.testing.assert_array_equal(numpy_helper.to_array(tensor), array)
    assert sum(sizes) > array.nbytes and max(sizes) <= 1000


def test_constants_bind_inputs_only_not_the_weights_left_out_of_the_model():
    model, _ = dense()
    with pytest.raises(OnnxError, match="has no input 'w'"):
        import_model(model, constants={"w": np.zeros((8, BIG // 8 + 1), np.float32)})


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_square_weight_goes_out_in_the_orientation_it_is_stored_in(trans_b):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((6, 6)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["y"], transB=trans_b)], "square",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 6])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(run(out, {"x": x})[0], run(model, {"x": x})[0], rtol=1e-5,
                               atol=1e-5)
