"""The numpy executor: random graphs against plain numpy, feeds, errors, memory, views."""

import tracemalloc
from unittest import mock

import numpy as np
import pytest
from helpers import FLOAT_DTYPES, Leaves, axes_st, numpy_eval, random_feeds, tolerance
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng

# -- random graphs: each builder makes a node of the requested axes from smaller graphs -------


def _bounded(node):
    """A positive, bounded stand-in for a value (for ops that need positive inputs)."""
    return ng.exp(ng.tanh(node))


def _unary(draw, sub, axes):
    op = draw(st.sampled_from(["Negative", "Tanh", "Square", "Sqrt", "Log", "Reciprocal", "Exp"]))
    arg = sub(axes)
    if op in ("Sqrt", "Log", "Reciprocal", "Exp"):
        arg = _bounded(arg) if op != "Exp" else ng.tanh(arg)
    return ng.make_node(op, (arg,))


def _binary(draw, sub, axes):
    op = draw(
        st.sampled_from(
            ["Add", "Subtract", "Multiply", "Maximum", "Minimum", "Greater", "Less", "Divide"]
        )
    )
    left, right = sub(axes), sub(axes)
    if op in ("Greater", "Less"):  # a bool mask, cast back to the graph's dtype
        return ng.cast(ng.make_node(op, (left, right)), left.dtype)
    return ng.make_node(op, (left, _bounded(right) if op == "Divide" else right))


def _mixed(draw, sub, axes):
    """A frontend binary op whose left operand has a reordered subset of the axes."""
    part = ng.make_axes(draw(st.permutations(list(axes)))[: draw(st.integers(0, len(axes)))])
    fn = draw(st.sampled_from([ng.add, ng.subtract, ng.multiply, ng.maximum]))
    return fn(sub(part), sub(axes))


def _reduce(draw, sub, axes):
    extra = ng.make_axis(draw(st.integers(1, 3)))
    pos = draw(st.integers(0, len(axes)))
    fn = draw(st.sampled_from([ng.sum, ng.max, ng.min, ng.mean]))
    return fn(sub(axes[:pos] + extra + axes[pos:]), reduction_axes=extra)


def _dot(draw, sub, axes):
    count = draw(st.integers(1, 2))
    red = ng.make_axes([ng.make_axis(draw(st.integers(1, 3))) for _ in range(count)])
    k = draw(st.integers(0, len(axes)))
    return ng.dot(sub(axes[:k] + red), sub(red + axes[k:]))


def _views(draw, sub, axes):
    kind = draw(st.sampled_from(["reorder", "flatten", "transpose", "broadcast"]))
    if kind == "reorder":
        return ng.axes_with_order(sub(ng.make_axes(draw(st.permutations(list(axes))))), axes)
    if kind == "flatten":
        return ng.unflatten(ng.flatten(sub(axes)), axes)
    if kind == "transpose":
        return ng.transpose(sub(axes[::-1]))
    keep = [a for a in axes if draw(st.booleans())]
    return ng.broadcast(sub(ng.make_axes(keep)), axes)


def _concat_slice(draw, sub, axes):
    if not len(axes):
        return sub(axes)
    pos = draw(st.integers(0, len(axes) - 1))
    target = axes[pos]
    if draw(st.booleans()):
        cut = draw(st.integers(0, target.length - 1))
        lengths = [n for n in (cut, target.length - cut) if n]
        parts = [sub(axes[:pos] + ng.make_axis(n) + axes[pos + 1 :]) for n in lengths]
        return ng.make_node("Concat", parts, axis=target, position=pos)
    start = draw(st.integers(0, 2))
    wide_axis = ng.make_axis(target.length + start + draw(st.integers(0, 2)))
    wide = axes[:pos] + wide_axis + axes[pos + 1 :]
    if draw(st.booleans()):  # the front end's tensor_slice, whose axis keeps its name
        picked = ng.tensor_slice(
            sub(wide),
            [
                slice(start, start + target.length) if i == pos else slice(None)
                for i in range(len(wide))
            ],
        )
        return ng.cast_axes(picked, axes)
    return ng.make_node(
        "Slice", (sub(wide),), position=pos, start=start, stop=start + target.length, axis=target
    )


def _batchnorm(draw, sub, axes):
    if len(axes) < 2:
        return sub(axes)
    channel = axes[:1]
    return ng.batchnorm_fprop(sub(axes), sub(channel), sub(channel), eps=0.1)[0]


BUILDERS = [_unary, _binary, _mixed, _reduce, _dot, _views, _concat_slice, _batchnorm]


def grow(draw, leaf, axes, depth):
    """A random graph of the given axes, up to `depth` ops deep above its placeholders."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        return leaf(axes)
    build = draw(st.sampled_from(BUILDERS))
    return build(draw, lambda ax: grow(draw, leaf, ax, depth - 1), axes)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=["f32", "f64"])
@given(data=st.data())
def test_random_graph_equals_numpy(dtype, data):
    leaf = Leaves(dtype)
    outputs = [grow(data.draw, leaf, data.draw(axes_st(max_size=3)), depth=3) for _ in range(2)]
    ng.validate(outputs)
    feeds = random_feeds(outputs, data.draw(st.integers(0, 2**32 - 1)))
    arrays = ng.execute(outputs, feeds)
    for node, got, want in zip(outputs, arrays, numpy_eval(outputs, feeds)):
        assert got.shape == node.axes.lengths and got.dtype == node.dtype
        scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
        tol = tolerance(dtype)
        np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=tol["atol"] * scale)


# -- feeds and errors ------------------------------------------------------------------------
def _graph(dtype=np.float32):
    c, n = ng.make_axis(2, "C"), ng.make_axis(3, "N")
    x = ng.placeholder([c, n], dtype, name="x")
    w = ng.placeholder([c], dtype, name="w")
    return x, w, ng.dot(w, x) * 2.0


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=["f32", "f64"])
def test_feeds_by_node_and_by_name_agree(dtype):
    x, w, y = _graph(dtype)
    xv, wv = np.arange(6, dtype=dtype).reshape(2, 3), np.array([1.0, -1.0], dtype)
    (by_node,) = ng.execute([y], {x: xv, w: wv})
    (by_name,) = ng.execute([y], {"x": xv, "w": wv})
    (mixed,) = ng.execute([y], {x: xv, "w": wv})
    want = 2.0 * (wv @ xv)
    assert by_node.dtype == dtype
    for got in (by_node, by_name, mixed):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "feeds, pieces",
    [
        ({"w": np.ones(2, np.float32)}, ["missing feed", "'x'", "[C:2, N:3]"]),
        (
            {"x": np.ones((3, 2), np.float32), "w": np.ones(2, np.float32)},
            ["'x'", "shape (3, 2)", "[C:2, N:3]"],
        ),
        (
            {"x": np.ones((2, 3), np.float64), "w": np.ones(2, np.float32)},
            ["'x'", "dtype float64", "float32", "[C:2, N:3]"],
        ),
        (
            {"x": np.ones((2, 3), np.float32), "w": np.ones(2, np.float32), "z": 1.0},
            ["keyed by the name 'z', which is not an input of this graph", "w, x"],
        ),
    ],
    ids=["missing", "shape", "dtype", "unknown-name"],
)
def test_bad_feeds_name_the_placeholder_and_its_axes(feeds, pieces):
    _, _, y = _graph()
    with pytest.raises(ng.ExecutionError) as info:
        ng.execute([y], feeds)
    assert isinstance(info.value, ng.NgrulesError)
    for piece in pieces:
        assert piece in str(info.value)


def test_multi_output_node_is_not_an_executable_output():
    x = ng.placeholder({"C": 2, "N": 3}, name="x")
    c = ng.make_axes({"C": 2})
    node = ng.make_node(
        "BatchnormFprop", (x, ng.placeholder(c, name="g"), ng.placeholder(c, name="b"))
    )
    with pytest.raises(ng.NgrulesError, match="single-output"):
        ng.execute([node], {})


def test_compiled_programs_are_reused():
    _, _, y = _graph()
    assert ng.compile_graph([y]) is ng.compile_graph([y])


# -- memory ----------------------------------------------------------------------------------
def _chain(length, axes):
    x = ng.placeholder(axes, np.float64, name="x")
    y = x
    for i in range(length):
        y = ng.tanh(y) if i % 2 else ng.negative(y)
    return x, y


def test_every_intermediate_is_freed_once_after_its_last_use():
    x, y = _chain(6, {"A": 4})
    z = ng.sum(y * ng.exp(y), out_axes=()) + ng.sum(ng.tanh(x) * y, out_axes=())
    program = ng.compile_graph([z, y])
    steps = program.steps
    freed = [f for _, _, _, frees, _ in steps for f in frees]
    assert len(freed) == len(set(freed))
    outputs = set(program.result_slots)
    produced = {out for _, _, out, _, _ in steps} | set(program.placeholders.values())
    assert set(freed) == produced - outputs
    for i, (_, _, _, frees, reuse) in enumerate(steps):
        later = {a for _, args, _, _, _ in steps[i + 1 :] for a in args}
        assert not set(frees) & later
        assert set(frees) <= set(steps[i][1]) | {reuse}  # a reused buffer changes slot


def test_peak_memory_stays_a_few_intermediates():
    size = 2**17  # 1 MiB of float64 per intermediate
    x, y = _chain(40, {"A": size})
    xv = np.linspace(-1, 1, size)
    program = ng.compile_graph([y])
    tracemalloc.start()
    try:
        (out,) = program.run({x: xv})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * xv.nbytes, peak
    want = xv
    for i in range(40):
        want = np.tanh(want) if i % 2 else -want
    np.testing.assert_allclose(out, want, rtol=1e-12)


# -- views -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "build",
    [
        lambda x: ng.axes_with_order(x, x.axes[::-1]),
        lambda x: ng.transpose(x),
        lambda x: ng.broadcast(x, ng.make_axes({"Z": 4}) + x.axes),
        lambda x: x[:, 1:3],
        lambda x: ng.flatten(x),
        lambda x: ng.unflatten(ng.flatten(x)),
    ],
    ids=["reorder", "transpose", "broadcast", "slice", "flatten", "unflatten"],
)
def test_views_stay_views(build):
    x = ng.placeholder({"C": 2, "N": 3}, np.float64, name="x")
    xv = np.arange(6.0).reshape(2, 3)
    node = build(x)
    (got,) = ng.execute([node], {x: xv})
    assert np.shares_memory(got, xv)
    np.testing.assert_array_equal(got, numpy_eval([node], {x: xv})[0])


def test_multi_output_values_come_from_one_kernel_call():
    x = ng.placeholder({"C": 2, "N": 5}, np.float64, name="x")
    c = ng.make_axes({"C": 2})
    g, b = ng.placeholder(c, np.float64, name="g"), ng.placeholder(c, np.float64, name="b")
    y, mean, var = ng.batchnorm_fprop(x, g, b)
    program = ng.compile_graph([y, mean, var])
    assert sum(1 for _, args, *_ in program.steps if len(args) == 3) == 1
    rng = np.random.default_rng(0)
    feeds = {x: rng.normal(size=(2, 5)), g: np.ones(2), b: np.zeros(2)}
    got_mean, got_var = program.run(feeds)[1:]
    np.testing.assert_allclose(got_mean, feeds[x].mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(got_var, feeds[x].var(axis=1), rtol=1e-12)


@given(axes_st(max_size=3), st.sampled_from(FLOAT_DTYPES))
def test_leaf_outputs_come_back_unchanged(axes, dtype):
    leaf = Leaves(dtype)
    x = leaf(axes)
    xv = np.full(axes.lengths, 0.25, dtype)
    (got,) = ng.execute([x], {x: xv})
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, xv)


# -- buffer reuse and generated code -----------------------------------------------------------
@given(data=st.data())
def test_reusing_every_dead_buffer_and_running_the_loop_give_numpys_values(data):
    """With every buffer reusable (however small), and with the interpreter loop instead of
    generated code, random graphs still compute numpy's values and leave the feeds alone (a
    program's first runs are the loop, run GENERATED_AT generated code unless GENERATED_STEPS
    is 0)."""
    from ngrules.ir import executor

    leaf = Leaves(np.float64)
    outputs = [grow(data.draw, leaf, data.draw(axes_st(max_size=3)), depth=3) for _ in range(2)]
    feeds = random_feeds(outputs, data.draw(st.integers(0, 2**32 - 1)))
    before = {k: np.array(v, copy=True) for k, v in feeds.items()}
    want = numpy_eval(outputs, feeds)
    with (
        mock.patch.object(executor, "REUSE_BYTES", 0),
        mock.patch.object(executor, "GENERATED_STEPS", data.draw(st.sampled_from([0, 10**6]))),
    ):
        program = executor.Program(outputs)
        runs = [program.run(feeds) for _ in range(executor.GENERATED_AT)]
    for got in runs:
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9 * max(1.0, np.max(np.abs(w))))
    for k, v in feeds.items():
        np.testing.assert_array_equal(v, before[k])


def test_large_intermediates_are_written_in_place_but_not_under_a_view():
    x = ng.placeholder({"A": 2**17}, np.float64, name="x")  # 1 MiB per intermediate
    y = ng.tanh(ng.negative(ng.tanh(x)))
    view = ng.broadcast(y, ng.make_axes({"B": 2}) + y.axes)  # reads y's buffer later on
    z = ng.tanh(ng.negative(view)) + ng.exp(y)
    program = ng.compile_graph([z])
    slot = {n: i for i, n in enumerate(ng.toposort([z]))}
    reused = {r for *_, r in program.steps if r is not None}
    assert reused and slot[y] not in reused
    assert slot[ng.negative(ng.tanh(x))] in reused  # dies into the tanh that makes y
    xv = np.linspace(-1, 1, 2**17)
    np.testing.assert_allclose(program.run({x: xv})[0], numpy_eval([z], {x: xv})[0], rtol=1e-12)


def test_views_and_small_values_of_constants_are_computed_once_at_compile_time():
    x = ng.placeholder({"C": 3, "N": 2}, np.float64, name="x")
    two, half = (ng.constant(v, dtype=np.float64) for v in (2.0, 0.5))
    y = x * (two + 1.0) - ng.exp(half)  # broadcasts of constants
    program = ng.compile_graph([y])
    assert [type(k) for k, *_ in program.steps] == [np.ufunc, np.ufunc]  # multiply, subtract
    xv = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(program.run({x: xv})[0], xv * 3.0 - np.exp(0.5), rtol=1e-12)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_a_broadcast_is_a_read_only_view_whatever_its_operands_layout(layout):
    """A C-contiguous operand is viewed through strides built by the kernel; any other layout
    through np.broadcast_to: the same values either way, never writable (it aliases its
    operand)."""
    a, b, c = ng.make_axis(3, "a"), ng.make_axis(4, "b"), ng.make_axis(2, "c")
    x = ng.placeholder([b, a], np.float32, name="x")
    y = ng.broadcast(x, [a, c, b])
    value = np.arange(24, dtype=np.float32).reshape(8, 3)
    fed = {"C": value[:4], "F": np.asfortranarray(value[:4]), "strided": value[::2]}[layout]
    (got,) = ng.execute([y], {x: fed})
    assert np.array_equal(got, np.broadcast_to(fed.T[:, None, :], (3, 2, 4)))
    assert not got.flags.writeable and np.shares_memory(got, fed)


def test_code_is_generated_at_a_programs_eighth_run_with_the_same_values():
    """Most graphs verification builds run once or twice: compiling code for them cost more
    than the loop saves, so the first runs are the loop and run GENERATED_AT generates code."""
    from ngrules.ir import executor

    x = ng.placeholder({"A": 3}, np.float64, name="x")
    program = ng.compile_graph([ng.tanh(x) * 2.0 + x])
    xv = np.array([-1.0, 0.0, 2.0])
    looped = [program.run({x: xv})[0] for _ in range(executor.GENERATED_AT - 1)]
    assert program._generated is None
    generated = program.run({x: xv})[0]
    assert program._generated is not None
    for value in looped:
        np.testing.assert_array_equal(value, generated)
    np.testing.assert_allclose(generated, np.tanh(xv) * 2.0 + xv, rtol=1e-15)
