"""Folding into spent bytes (`engine.spending`): with `rewrite(..., spend=buffer)` a folded
weight is written over the weight it is made from, and only where nothing else reads it;
without `spend`, nothing a caller holds changes."""

import io

import numpy as np
import pytest

import ngrules as ng
from ngrules.engine.folding import fold_constants
from ngrules.ir.filebytes import FileBytes, read_into
from ngrules.ir.graph import toposort

C, K = ng.make_axis(3, "C"), ng.make_axis(4, "K")
S = np.array([0.5, 2.0, -1.0, 4.0], np.float32)


@pytest.fixture
def W(request):
    """A weight of its own per test: hash-consing would give a test another test's equal
    weight node, over that test's bytes."""
    seed = sum(map(ord, request.node.name))
    return np.random.default_rng(seed).integers(-64, 64, (3, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules("ngrules:simplify.rules")


def in_bytes(*arrays):
    """A FileBytes holding the arrays one after another, and a read-only view of each (as a
    model file's weights are)."""
    buf = FileBytes(-1, sum(a.nbytes for a in arrays))
    views, at = [], 0
    for a in arrays:
        flat = np.frombuffer(buf, a.dtype, a.size, at)
        flat[:] = a.reshape(-1)
        flat.flags.writeable = False
        views.append(flat.reshape(a.shape))
        at += a.nbytes
    return buf, views


def folded(outputs, rules, spend=None):
    result = ng.rewrite(outputs, rules, passes=["fold_constants"], spend=spend)
    return result.outputs, [n for n in toposort(result.outputs) if n.op == "Constant"]


def scaled(w):
    """`x . (w * s)`: the weight scaled per column, then read by a product."""
    x = ng.placeholder([C])
    return x, ng.dot(x, w * ng.broadcast(ng.constant(S, [K]), [C, K]))


def test_a_fold_over_a_spent_weight_is_written_in_its_bytes(rules, W):
    buf, (w,) = in_bytes(W)
    x, y = scaled(ng.constant(w, [C, K]))
    feed = {x: np.array([1.0, -2.0, 3.0], np.float32)}
    expected = ng.execute([y], feed)[0]
    outputs, (constant,) = folded([y], rules, spend=buf)
    value = constant.attrs["value"]
    np.testing.assert_array_equal(value, W * S)  # numpy's product, bit for bit
    assert np.shares_memory(value, np.frombuffer(buf, np.uint8))  # no new memory
    assert not value.flags.writeable
    np.testing.assert_array_equal(ng.execute(outputs, feed)[0], expected)


def test_a_transposed_weight_is_written_in_its_own_order(rules, W):
    """A convolution's weight reaches the fold reordered (ONNX's order is not the IR's)."""
    buf, (w,) = in_bytes(np.ascontiguousarray(W.T))
    _, y = scaled(ng.axes_with_order(ng.constant(w, [K, C]), [C, K]))
    _, (constant,) = folded([y], rules, spend=buf)
    np.testing.assert_array_equal(constant.attrs["value"], W * S)
    assert np.shares_memory(constant.attrs["value"], np.frombuffer(buf, np.uint8))


@pytest.mark.parametrize("api", ["rewrite", "fold_constants"])
def test_without_spend_the_callers_graph_keeps_its_values(rules, api, W):
    buf, (w,) = in_bytes(W)
    x, y = scaled(ng.constant(w, [C, K]))
    feed = {x: np.array([1.0, -2.0, 3.0], np.float32)}
    before = ng.execute([y], feed)[0]
    outputs = (folded([y], rules)[0] if api == "rewrite" else fold_constants([y]))
    (constant,) = [n for n in toposort(outputs) if n.op == "Constant"]
    assert not np.shares_memory(constant.attrs["value"], np.frombuffer(buf, np.uint8))
    np.testing.assert_array_equal(w, W)  # the caller's weight, and its graph, as they were
    np.testing.assert_array_equal(ng.execute([y], feed)[0], before)
    np.testing.assert_array_equal(ng.execute(outputs, feed)[0], before)


def _unchanged(buf, outputs, expected):
    """Nothing was written over: the bytes hold the weights, the outputs their values."""
    for node, want in zip(outputs, expected):
        np.testing.assert_array_equal(ng.execute([node], {})[0], want)
    return buf


def test_a_weight_read_twice_is_not_written(rules, W):
    buf, (w,) = in_bytes(W)
    weight = ng.constant(w, [C, K])
    product = weight * ng.broadcast(ng.constant(S, [K]), [C, K])
    outputs, _ = folded([product, weight], rules, spend=buf)
    _unchanged(buf, outputs, [W * S, W])
    np.testing.assert_array_equal(w, W)


def test_a_weight_another_constant_overlaps_is_not_written(rules, W):
    buf, (w,) = in_bytes(W)
    row = ng.constant(w[1], [K])  # a view of part of the same bytes, read by the graph
    product = ng.constant(w, [C, K]) * ng.broadcast(ng.constant(S, [K]), [C, K])
    outputs, _ = folded([product, row + ng.constant(S, [K])], rules, spend=buf)
    _unchanged(buf, outputs, [W * S, W[1] + S])
    np.testing.assert_array_equal(w, W)


def test_a_weight_a_broadcast_repeats_is_not_written(rules, W):
    row = W[0] + 0.5  # a value of this test's own
    buf, (v,) = in_bytes(row)
    w = ng.constant(W, [C, K])  # new memory: the product has more elements than v
    outputs, _ = folded([w * ng.broadcast(ng.constant(v, [K]), [C, K])], rules, spend=buf)
    _unchanged(buf, outputs, [W * row])
    np.testing.assert_array_equal(v, row)


def test_a_view_read_twice_is_not_written(rules, W):
    buf, (w,) = in_bytes(np.ascontiguousarray(W.T))
    view = ng.axes_with_order(ng.constant(w, [K, C]), [C, K])  # read by the product, and out
    product = view * ng.broadcast(ng.constant(S, [K]), [C, K])
    outputs, _ = folded([product, view], rules, spend=buf)
    _unchanged(buf, outputs, [W * S, W])


def test_a_weight_in_other_bytes_is_not_written(rules, W):
    buf, (w,) = in_bytes(W)
    _, y = scaled(ng.constant(w, [C, K]))
    folded([y], rules, spend=FileBytes(-1, W.nbytes))
    np.testing.assert_array_equal(w, W)


def test_a_weight_a_fold_turns_out_equal_to_is_not_written(rules, W):
    """Hash-consing makes a folded value equal to a weight that weight's node: it has another
    reader then, and a later fold over it must not write it."""
    buf, (half, w) = in_bytes(W / 2, W)  # half * 2 == W exactly
    doubled = ng.constant(half, [C, K]) * ng.constant(np.float32(2.0), [C, K])
    product = ng.constant(w, [C, K]) * ng.broadcast(ng.constant(S, [K]), [C, K])
    outputs, _ = folded([doubled, product], rules, spend=buf)
    _unchanged(buf, outputs, [W, W * S])


def test_a_weight_cast_to_another_dtype_is_not_written(rules, W):
    buf, (w,) = in_bytes(W)
    wide = ng.cast(ng.constant(w, [C, K]), np.float64) * ng.constant(np.float64(3.0), [C, K])
    outputs, _ = folded([wide], rules, spend=buf)
    _unchanged(buf, outputs, [W.astype(np.float64) * 3.0])
    np.testing.assert_array_equal(w, W)


def test_a_file_is_read_whole_and_growth_shows():
    data = read_into(io.BytesIO(b"abcd"), 4)
    assert isinstance(data, FileBytes) and data[:] == b"abcd" and len(data) == 4
    assert read_into(io.BytesIO(b"abcdef"), 4)[:] == b"abcde"  # grew since its size was taken
    assert read_into(io.BytesIO(b"ab"), 4)[:] == b"ab"  # shrank: what there is
    assert read_into(io.BytesIO(b""), 0) == b"" and read_into(io.BytesIO(b""), 4) == b""


# -- a model file: its weights folded over, through the API and `ngrules apply` ----------------
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ngrules.cli.main import main  # noqa: E402
from ngrules.engine import driver  # noqa: E402
from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.ir import composite  # noqa: E402
from ngrules.ir.filebytes import root  # noqa: E402
from ngrules.ir.graph import creation_order  # noqa: E402
from ngrules.ir.values import constant_source  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402


def conv_batchnorm(path, seed):
    """Conv then BatchNormalization, the weight of 4,608 elements (in the file's bytes)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    scale, bias, mean = rng.standard_normal((3, 32)).astype(np.float32)
    var = rng.uniform(0.5, 2.0, 32).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w, "w"), (scale, "s"), (bias, "b"), (mean, "m"), (var, "v")]]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 6, 6])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return rng.standard_normal((1, 16, 6, 6)).astype(np.float32)


def ort_run(model, x):
    data = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_a_models_folded_weight_is_written_over_its_weight(tmp_path):
    path = str(tmp_path / "m.onnx")
    x = conv_batchnorm(path, 1)
    imported = import_model(path)
    buffer = imported.spendable
    weights = [n for n in creation_order(imported.outputs)
               if n.op == "Constant" and root(n.attrs["value"]) is buffer]
    assert [n.attrs["value"].size for n in weights] == [32 * 16 * 9]
    result = driver.rewrite(imported.outputs, load_library(), pipeline="inference",
                            spend=buffer)
    written = [n for n in creation_order(result.outputs) if n.op == "Constant"
               and n.attrs["value"].size == 32 * 16 * 9]
    assert len(written) == 1 and root(written[0].attrs["value"]) is buffer  # no new memory
    np.testing.assert_allclose(ort_run(to_onnx(result.outputs), x), ort_run(path, x),
                               rtol=1e-4, atol=1e-4)
    # no pass can bring back a composite over the weight written over (the Conv read)
    for whole in composite._RECORDED.values():
        assert not any(constant_source(a) in weights for a in whole.args)


@pytest.mark.parametrize("trace", [False, True])
def test_apply_spends_the_files_bytes_unless_it_shows_the_trace(tmp_path, monkeypatch, trace):
    path = str(tmp_path / "m.onnx")
    x = conv_batchnorm(path, 2 + trace)
    given, rewrite = [], driver.rewrite

    def spy(*args, **kwargs):
        given.append(kwargs.get("spend"))
        return rewrite(*args, **kwargs)

    monkeypatch.setattr(driver, "rewrite", spy)
    out = str(tmp_path / "out.onnx")
    assert main(["apply", path, "--pipeline", "inference", "-o", out, "-q",
                 *(["--trace"] if trace else [])]) == 0
    assert given == [None] if trace else isinstance(given[0], FileBytes)
    np.testing.assert_allclose(ort_run(out, x), ort_run(path, x), rtol=1e-4, atol=1e-4)


def test_forgetting_spent_weights_passes_over_composites_of_ops_since_unregistered(monkeypatch):
    """A composite recorded by an earlier import whose op is no longer in the op table (it
    failed once in CI: `KeyError: 'MaxPool'` when a later apply spent a weight)."""
    from ngrules.ir.ops import OPS

    w = ng.constant(np.ones(3, np.float32), [ng.make_axis(3, "Q")])
    stale = ng.tanh(ng.placeholder([ng.make_axis(3, "Q")]))
    reads_w = ng.negative(w)
    kept = [ng.placeholder([ng.make_axis(3, "Q")]) for _ in range(2)]  # the records' keys
    composite.record(kept[0], stale)
    composite.record(kept[1], reads_w)
    monkeypatch.delitem(OPS, "Tanh")
    assert constant_source(stale) is None
    composite.forget([w])  # the stale record is passed over, the one over `w` dropped
    assert all(whole is not reads_w for whole in composite._RECORDED.values())
    assert any(whole is stale for whole in composite._RECORDED.values())
