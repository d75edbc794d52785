"""The graph IR: hash-consing, immutability, Graph edits, validate, the printer, deep graphs."""

import re
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.errors import OpError
from ngrules.ir.axes import make_axis
from ngrules.ir.graph import creation_order, make_node, make_with_floats, users_of


def _xy(dtype=np.float32):
    axes = ng.make_axes({"C": 2, "N": 3})
    return ng.placeholder(axes, dtype, name="x"), ng.placeholder(axes, dtype, name="y")


def test_same_op_args_attrs_is_one_node():
    x, y = _xy()
    assert ng.make_node("Add", (x, y)) is ng.make_node("Add", (x, y))
    assert x + y is x + y
    assert ng.sum(x, reduction_axes=x.axes[:1]) is ng.sum(x, reduction_axes=x.axes[:1])
    assert ng.placeholder(x.axes, name="x") is x
    assert ng.make_node("Add", (x, y)) is not ng.make_node("Add", (y, x))


def test_one_sweep_frees_a_whole_dead_graph():
    """A dead entry's key holds its node's arguments: the sweep frees them too, to the leaves."""
    import gc
    import weakref
    from unittest import mock

    from ngrules.ir import graph

    with mock.patch.object(graph, "_INTERN", {}):
        x = ng.placeholder(ng.make_axes({"N": 3}), name="swept")
        y = x
        for _ in range(50):
            y = ng.exp(y) + x
        kept = ng.negative(x)  # alive: its entry and x's stay
        leaf, top = weakref.ref(x), weakref.ref(y)
        del x, y
        gc.collect()
        assert top() is None and leaf() is not None  # held by the dead keys
        graph._sweep(graph._INTERN)
        assert leaf() is kept.args[0] and len(graph._INTERN) == 2
        del kept
        gc.collect()
        graph._sweep(graph._INTERN)
        assert leaf() is None and not graph._INTERN


@pytest.mark.parametrize(
    "first, second",
    [
        (lambda: ng.placeholder({"A": 2}, name="p"), lambda: ng.placeholder({"A": 3}, name="p")),
        (lambda: ng.placeholder({"A": 2}, name="p"), lambda: ng.placeholder({"B": 2}, name="p")),
        (
            lambda: ng.placeholder({"A": 2}, name="p"),
            lambda: ng.placeholder({"A": 2}, np.float64, name="p"),
        ),
        (lambda: ng.constant(1.0), lambda: ng.constant(2.0)),
        (lambda: ng.constant(0.0), lambda: ng.constant(-0.0)),
        (lambda: ng.constant(1.0), lambda: ng.constant(1.0, dtype=np.float64)),
        (lambda: ng.constant([1.0, 2.0], {"A": 2}), lambda: ng.constant([1.0, 3.0], {"A": 2})),
        (
            lambda: ng.batchnorm_fprop(*_bn_args(), eps=1e-3)[0],
            lambda: ng.batchnorm_fprop(*_bn_args(), eps=1e-2)[0],
        ),
    ],
    ids=[
        "lengths",
        "names",
        "dtype",
        "constant",
        "signed-zero",
        "constant-dtype",
        "constant-array",
        "float-attr",
    ],
)
def test_different_lengths_or_values_are_different_nodes(first, second):
    a, b = first(), second()
    assert a is not b
    assert first() is a


def _bn_args():
    x = ng.placeholder({"C": 2, "N": 4}, name="bx")
    c = ng.make_axes({"C": 2})
    return x, ng.placeholder(c, name="bg"), ng.placeholder(c, name="bb")


@given(st.integers(1, 4), st.integers(1, 4))
def test_hash_consing_keys_on_axis_lengths(n, m):
    a = ng.placeholder([ng.Axis("A", n)], name="h")
    b = ng.placeholder([ng.Axis("A", m)], name="h")
    assert (a is b) == (n == m)
    assert (ng.tanh(a) is ng.tanh(b)) == (n == m)


@pytest.mark.parametrize("field", ["op", "args", "axes", "dtype", "attrs", "outputs"])
def test_nodes_are_immutable(field):
    x, y = _xy()
    node = x + y
    with pytest.raises(AttributeError, match="immutable"):
        setattr(node, field, None)
    with pytest.raises(TypeError):
        node.attrs["name"] = "z"  # attrs are a read-only mapping
    assert node.op == "Add" and node.args == (x, y)


def test_graph_users_replace_and_remove_dead():
    x, y = _xy()
    s = x + y
    a, b = ng.tanh(s), ng.exp(s)
    out = a * b
    g = ng.Graph([out])
    assert set(g.users(s)) == {a, b}
    assert g.users(out) == []
    g.replace(s, x - y)
    new = g.outputs[0]
    assert new is ng.tanh(x - y) * ng.exp(x - y)
    assert set(g.users(x - y)) == {ng.tanh(x - y), ng.exp(x - y)}
    assert g.remove_dead() == 4  # the old s, a, b and out
    assert s not in g and out not in g and new in g
    assert g.users(s) == []
    assert g.remove_dead() == 0
    g.validate()


def test_replace_an_output_and_reject_a_mistyped_replacement():
    x, y = _xy()
    g = ng.Graph([x + y, ng.tanh(x + y)])
    g.replace(x + y, x * y)
    assert g.outputs == [x * y, ng.tanh(x * y)]
    with pytest.raises(ng.GraphError, match="axes or dtype differ"):
        g.replace(x * y, ng.sum(x, out_axes=()))
    with pytest.raises(ng.GraphError, match="axes or dtype differ"):
        g.replace(x, ng.placeholder(x.axes, np.float64, name="x64"))


def test_users_of_counts_each_use():
    x, _ = _xy()
    sq = x * x
    users = users_of([sq])
    assert users[x] == [sq, sq]
    assert users[sq] == []


def _corrupt(node, **fields):
    for key, value in fields.items():
        object.__setattr__(node, key, value)
    return node


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"axes": ng.make_axes({"C": 2})}, "stored type differs"),
        ({"axes": ng.make_axes({"C": 5, "N": 3})}, "stored type differs"),
        ({"dtype": np.dtype(np.float64)}, "stored type differs"),
        ({"op": "Dot"}, "stored type differs"),
        ({"op": "Tanh"}, "takes 1"),
        ({"op": "Concat", "attrs": {"axis": ng.Axis("Z", 6), "position": 5}}, "ill-formed"),
    ],
    ids=["axes", "lengths", "dtype", "op-dot", "arity", "bad-attrs"],
)
def test_validate_catches_a_corrupted_node(fields, message):
    x, y = _xy()
    ok = ng.tanh(x + y)
    ng.validate([ok])
    bad = ng.make_node("Add", (ng.placeholder(x.axes, name="cx"), y))
    top = ng.tanh(_corrupt(bad, **fields))
    with pytest.raises(ng.GraphError, match=message):
        ng.validate([top])
    with pytest.raises(ng.GraphError):
        ng.Graph([top]).validate()


def test_validate_catches_a_corrupted_multi_output_node():
    node = ng.make_node("BatchnormFprop", _bn_args(), eps=0.5)
    outputs = node.outputs
    _corrupt(node, outputs=(outputs[0], (ng.make_axes({"C": 7}), outputs[1][1]), outputs[2]))
    with pytest.raises(ng.GraphError, match="stored type differs"):
        ng.validate([node])


def test_canonical_printer():
    c, n = ng.make_axis(2, "C"), ng.make_axis(3, "N")
    x = ng.placeholder([c, n], name="x")
    w = ng.constant(np.array([1.0, 2.0]), [c])
    out = ng.tanh(ng.dot(w, x)) * 2.0
    assert ng.format_graph([out, x]) == "\n".join(
        [
            "%0 = Constant(value=[1.,2.], axes=[C:2]) : [C:2] float32",
            "%1 = Placeholder(name='x', axes=[C:2, N:3], dtype=float32) : [C:2, N:3] float32",
            "%2 = Dot(%0, %1) : [N:3] float32",
            "%3 = Tanh(%2) : [N:3] float32",
            "%4 = Constant(value=2.0, axes=[]) : [] float32",
            "%5 = Broadcast(%4, axes=[N:3]) : [N:3] float32",
            "%6 = Multiply(%3, %5) : [N:3] float32",
            "return %6, %1",
        ]
    )
    assert str(ng.Graph([out, x])) == ng.format_graph([out, x])


def test_printer_shows_multi_output_types_and_flattened_axes():
    x, g, b = _bn_args()
    y = ng.batchnorm_fprop(ng.unflatten(ng.flatten(x)), g, b, eps=0.5)[2]
    assert ng.format_graph([y]).splitlines()[1:] == [
        "%1 = Flatten(%0, axes=[(C*N):8]) : [(C*N):8] float32",
        "%2 = Unflatten(%1, axes=[C:2, N:4]) : [C:2, N:4] float32",
        "%3 = Placeholder(name='bg', axes=[C:2], dtype=float32) : [C:2] float32",
        "%4 = Placeholder(name='bb', axes=[C:2], dtype=float32) : [C:2] float32",
        "%5 = BatchnormFprop(%2, %3, %4, eps=0.5) : "
        "([C:2, N:4] float32, [C:2] float32, [C:2] float32)",
        "%6 = Output(%5, index=2) : [C:2] float32",
        "return %6",
    ]


DEPTH = 100_000


def test_a_100000_node_chain_builds_differentiates_executes_and_prints():
    start = time.perf_counter()
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    y = x
    for i in range(DEPTH):
        y = ng.negative(y) if i % 2 else ng.exp(y)
    grad = ng.deriv(ng.sum(y, out_axes=()), x)
    xv = np.array([-0.5, 0.1, 0.7])
    got_y, got_grad = ng.execute([y, grad], {x: xv})
    want_y, want_grad = _chain_reference(xv)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-9)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-9, atol=1e-300)
    text = ng.format_graph([grad])
    assert text.count("\n") > 2 * DEPTH
    assert len(ng.Graph([y])) == DEPTH + 1
    assert time.perf_counter() - start < 120  # a loose guard against quadratic blow-ups


def _chain_reference(v):
    """The chain's value and derivative by a forward-mode numpy loop."""
    d = np.ones_like(v)
    for i in range(DEPTH):
        if i % 2:
            v, d = -v, -d
        else:
            v = np.exp(v)
            d = d * v
    return v, d


@given(st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99), st.booleans()), max_size=30),
       st.integers(1, 3))
def test_creation_order_is_a_topological_order_of_the_same_nodes(steps, outputs_count):
    pool = list(_xy())  # each step joins two earlier nodes (some built long before)
    for i, j, add in steps:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        pool.append(ng.add(a, b) if add else ng.multiply(b, a))
    outputs = pool[-outputs_count:]
    order = creation_order(outputs)
    assert set(order) == set(ng.toposort(outputs)) and len(order) == len(set(order))
    position = {node: i for i, node in enumerate(order)}
    assert all(position[a] < position[node] for node in order for a in node.args)


def test_creation_order_follows_creation_not_argument_order():
    axes = ng.make_axes({"C": 2})
    early = ng.placeholder(axes, name="created_first")  # names no other test uses: new nodes
    late = ng.placeholder(axes, name="created_second")
    late_first = ng.add(late, early)  # the depth-first search visits `late` first
    assert ng.toposort([late_first])[:2] == [late, early]
    assert creation_order([late_first])[:2] == [early, late]


def test_float_attributes_given_any_way_build_one_node():
    """A float attribute given as a Python float (the shortcut past `normalize_attrs`) keys the
    node as the same value given as an int or a numpy float does, in the op's own order."""
    x = ng.placeholder([make_axis(3, "N")], name="x_float_attrs")
    leaky = make_node("Relu", (x,), slope=0.25)
    assert make_node("Relu", (x,), slope=np.float64(0.25)) is leaky
    assert make_node("Relu", (x,), slope=0.5) is not leaky
    assert make_node("Relu", (x,), slope=0) is make_node("Relu", (x,), slope=0.0)
    assert make_node("Relu", (x,)) is make_node("Relu", (x,), slope=0.0)
    assert dict(leaky.attrs) == {"slope": 0.25} and type(leaky.attrs["slope"]) is float
    with pytest.raises(OpError):
        make_node("Relu", (x,), slope=0.25, other=1.0)


def test_make_with_floats_builds_what_make_node_builds():
    """The generated clauses' builder: the same node as `make_node` with those keywords, the
    key formed in line or (any other attributes or arguments) through `make_node` itself."""
    n = make_axis(3, "N")
    x = ng.placeholder([n], name="x_make_floats")
    make_node("Relu", (x,), slope=0.5)  # the op's float attributes are known from here on
    for values in [(0.125,), (1,), (np.float32(2),)]:
        built = make_with_floats("Relu", (x,), ("slope",), values)
        assert built is make_node("Relu", (x,), slope=values[0])
    fresh = make_with_floats("Relu", (x,), ("slope",), (0.0625,))  # a new node, in line
    assert dict(fresh.attrs) == {"slope": 0.0625}
    assert fresh is make_node("Relu", (x,), slope=0.0625)
    for args, names in [((x, x), ("slope",)), ((x,), ("other",)), (("x",), ("slope",))]:
        with pytest.raises(OpError) as expected:
            make_node("Relu", args, **dict.fromkeys(names, 0.5))
        with pytest.raises(OpError, match=re.escape(str(expected.value))):
            make_with_floats("Relu", args, names, (0.5,))
