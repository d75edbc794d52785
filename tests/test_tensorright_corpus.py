"""TensorRight's XLA rewrites stated in ngrules (tests/corpus/tensorright): every rule loads and
checks, and a sample is proved for every shape (the full run: bench/prove_tensorright.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ngrules as ng

CORPUS = Path(__file__).parent / "corpus" / "tensorright"


def test_every_rule_loads_and_the_table_counts_them():
    rules = ng.load_rules(CORPUS / "xla.rules").rules
    assert len(rules) == 109 and all(r.name.startswith("tr_") for r in rules)
    assert "| **total** | **121** | **107** |" in (CORPUS / "README.md").read_text()


@pytest.mark.parametrize(("name", "status"), [("tr_not_02", "proved"),  # IEEE, pointwise
                                              ("tr_reduce_05", "proved-reals")])  # groups
def test_a_sample_is_proved_for_every_shape(name, status):
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    v = prove_rule(ng.load_rules(CORPUS / "xla.rules").rule(name))
    assert v.status == status and v.bound is None, str(v)
    assert "every shape" in v.reason


def _tr(name: str) -> ng.RuleSet:
    return ng.parse_rules(_rule_text(name), "xla.rules")


def _rule_text(name: str) -> str:
    """The `pass`/`rule` block of one rule of the corpus, to rewrite with it alone."""
    text = (CORPUS / "xla.rules").read_text()
    start = text.index(f"pass p_{name}\n")
    end = text.find("\npass ", start + 1)
    return text[start:end if end >= 0 else None]


def test_reverse_is_numpy_flip_along_its_axes_and_its_own_adjoint():
    a, b = ng.make_axis(3, "a"), ng.make_axis(4, "b")
    x = ng.placeholder([a, b], np.float64, name="x")
    r = ng.make_node("Reverse", (x,), reverse_axes=ng.make_axes([b]))
    v = np.arange(12.0).reshape(3, 4)
    [out] = ng.execute([r], {x: v})
    np.testing.assert_array_equal(out, v[:, ::-1])
    with pytest.raises(ng.OpError, match="reverse_axes"):
        ng.make_node("Reverse", (x,), reverse_axes=ng.make_axes([ng.make_axis(3, "c")]))


@pytest.mark.parametrize("start, stop", [(0, 2), (1, 4), (3, 5)])
def test_a_slice_of_a_reversed_axis_becomes_the_mirrored_slice_reversed(start, stop):
    a, b = ng.make_axis(3, "a"), ng.make_axis(5, "b")
    x = ng.placeholder([a, b], np.float64, name="x")
    r = ng.make_node("Reverse", (x,), reverse_axes=ng.make_axes([a, b]))
    s = ng.make_node("Slice", (r,), position=1, start=start, stop=stop,
                     axis=ng.make_axis(stop - start, "s"))
    res = ng.rewrite([s], _tr("tr_slice_13"))
    assert res.fired() == {"tr_slice_13": 1}
    v = np.arange(15.0).reshape(3, 5)
    [got] = ng.execute(res.outputs, {x: v})
    np.testing.assert_array_equal(got, v[::-1, ::-1][:, start:stop])


def test_index_of_gives_an_axis_position_in_another_tensor_and_refuses_a_missing_axis():
    from ngrules.lang.functions import FUNCTIONS

    a, b, c = (ng.make_axis(n, name) for n, name in ((2, "a"), (3, "b"), (4, "c")))
    index_of = FUNCTIONS["index_of"].fn
    assert index_of(ng.make_axes([c, b, a]), b) == 1 and index_of((a, c), c) == 1
    with pytest.raises(ng.NgrulesError, match="not one of"):
        index_of(ng.make_axes([a]), c)
    with pytest.raises(ng.RuleErrors, match="argument 2 of index_of must be an Axis"):
        ng.parse_rules("rule r: l @ Slice(b @ Broadcast(a)) => Slice(a, position="
                       "index_of(a.axes, a), start=0, stop=1, axis=l.axis)", "t.rules")


def test_a_slice_of_a_broadcast_operand_axis_slices_the_operand():
    a, b, n = ng.make_axis(3, "a"), ng.make_axis(4, "b"), ng.make_axis(2, "n")
    x = ng.placeholder([b, a], np.float64, name="x")
    bc = ng.broadcast(x, ng.make_axes([a, n, b]))
    s = ng.make_node("Slice", (bc,), position=2, start=1, stop=3, axis=ng.make_axis(2, "s"))
    res = ng.rewrite([s], _tr("tr_slice_03"))
    assert res.fired() == {"tr_slice_03": 1}
    v = np.arange(12.0).reshape(4, 3)
    [got], [want] = ng.execute(res.outputs, {x: v}), ng.execute([s], {x: v})
    np.testing.assert_array_equal(got, want)


def _dynamic_graph():
    a, b = ng.make_axis(3, "a"), ng.make_axis(6, "b")
    x = ng.placeholder([a, b], np.float64, name="x")
    return a, b, x, np.arange(18.0).reshape(3, 6)


@pytest.mark.parametrize("start, at", [(2, 2), (-3, 0), (9, 2)])  # XLA clamps the start
def test_dynamic_slice_reads_the_window_from_the_clamped_start(start, at):
    a, b, x, v = _dynamic_graph()
    s = ng.make_node("Constant", value=np.array(start, np.int64), axes=ng.make_axes([]))
    d = ng.make_node("DynamicSlice", (x, s), position=1, axis=ng.make_axis(4, "w"))
    u = ng.placeholder([a, ng.make_axis(4, "w")], np.float64, name="u")
    up = ng.make_node("DynamicUpdateSlice", (x, u, s), position=1)
    [got, written] = ng.execute([d, up], {x: v, u: -np.ones((3, 4))})
    np.testing.assert_array_equal(got, v[:, at:at + 4])
    want = v.copy()
    want[:, at:at + 4] = -1
    np.testing.assert_array_equal(written, want)
    with pytest.raises(ng.OpError, match="scalar integer"):
        ng.make_node("DynamicSlice", (x, x), position=1, axis=ng.make_axis(4, "w"))


@pytest.mark.parametrize("s0, s1", [(1, 1), (-5, 3), (4, 0), (2, 7)])
def test_writing_back_a_window_with_an_update_in_it_writes_the_update(s0, s1):
    """tr_dyupslice_04, which the instance builder cannot build: checked on a graph here."""
    a, b, x, v = _dynamic_graph()
    start = [ng.make_node("Constant", value=np.array(k, np.int64), axes=ng.make_axes([]))
             for k in (s0, s1)]
    w = ng.make_node("DynamicSlice", (x, start[0]), position=1, axis=ng.make_axis(4, "w"))
    u = ng.placeholder([a, ng.make_axis(2, "m")], np.float64, name="u")
    inner = ng.make_node("DynamicUpdateSlice", (w, u, start[1]), position=1)
    outer = ng.make_node("DynamicUpdateSlice", (x, inner, start[0]), position=1)
    res = ng.rewrite([outer], _tr("tr_dyupslice_04"))
    assert res.fired() == {"tr_dyupslice_04": 1}
    feeds = {x: v, u: -np.arange(6.0).reshape(3, 2) - 1}
    [got], [want] = ng.execute(res.outputs, feeds), ng.execute([outer], feeds)
    np.testing.assert_array_equal(got, want)


def test_a_constant_where_an_op_takes_integers_is_built_an_integer():
    """`DynamicSlice(x, s: Constant)`: the builder once made s a float (0 of 459 attempts)."""
    from ngrules.verification.verify import verify

    rule = ng.parse_rules(_rule_text("tr_dyslice_01"), "xla.rules")
    [v] = verify(rule, 5, cache=False)
    assert v.status == "verified", str(v)


@pytest.mark.parametrize("lengths, fires", [((1, 1), True), ((1, 2), False), ((2, 2), False)])
def test_summing_the_sums_of_a_concatenation_sums_the_concatenation(lengths, fires):
    """tr_reduce_02, which the instance builder seldom builds (about 1 attempt in 80):
    checked on a graph here. Each sum broadcast to length 1 (TensorRight's singleton): it
    fires; a sum broadcast to length 2 counts twice in the sum of the concatenation, which
    the replacement does not do (the transcription fired there once: wrong)."""
    a, k, m = (ng.make_axis(n, name) for n, name in ((2, "a"), (3, "k"), (4, "m")))
    x = ng.placeholder([k, a], np.float64, name="x")
    y = ng.placeholder([m, a], np.float64, name="y")
    pieces = [ng.broadcast(ng.sum(t, reduction_axes=ng.make_axes([r])),
                           ng.make_axes([ng.make_axis(n, f"u{i}"), a]))
              for i, (t, r, n) in enumerate(((x, k, lengths[0]), (y, m, lengths[1])))]
    joined = ng.make_axis(sum(lengths), "j")
    c = ng.make_node("Concat", tuple(pieces), axis=joined, position=0)
    s = ng.sum(c, reduction_axes=ng.make_axes([joined]))
    res = ng.rewrite([s], _tr("tr_reduce_02"))
    assert res.fired() == ({"tr_reduce_02": 1} if fires else {})
    feeds = {x: np.arange(6.0).reshape(3, 2), y: np.arange(8.0).reshape(4, 2) ** 2}
    [got], [want] = ng.execute(res.outputs, feeds), ng.execute([s], feeds)
    np.testing.assert_allclose(got, want)


def test_a_slice_inside_the_unpadded_part_is_a_slice_of_the_operand_whatever_its_names():
    """tr_slice_06 where Pad names its axes apart from its operand's and the slice's axis is
    one of the operand's names (its replacement once could not be built there)."""
    a, b = ng.make_axis(3, "a"), ng.make_axis(3, "b")
    x = ng.placeholder([b, a], np.float64, name="x")
    p = ng.make_node("Pad", (x,), paddings=np.zeros((2, 2), np.int64), axes=ng.make_axes([a, b]))
    cut = ng.make_axis(2, "a")
    sl = ng.make_node("Slice", (p,), position=0, start=1, stop=3, axis=cut)
    res = ng.rewrite([sl], _tr("tr_slice_06"))
    assert res.fired() == {"tr_slice_06": 1}
    feeds = {x: np.arange(9.0).reshape(3, 3)}
    [got], [want] = ng.execute(res.outputs, feeds), ng.execute([sl], feeds)
    np.testing.assert_array_equal(got, want)
    assert res.outputs[0].axes == sl.axes


@pytest.mark.parametrize("x, n, fires", [(7, 3, True), (-7, 3, True), (-2, 5, False)])
def test_the_integer_remainder_of_x_plus_n_is_x_s_when_the_sign_is_kept(x, n, fires):
    a = ng.make_axis(2, "a")
    xc, nc = (ng.make_node("Constant", value=np.array(v, np.int64), axes=ng.make_axes([]))
              for v in (x, n))
    k = ng.broadcast(nc, ng.make_axes([a]))
    o = ng.make_node("Mod", (ng.broadcast(xc, ng.make_axes([a])) + k, k), fmod=1)
    res = ng.rewrite([o], _tr("tr_divmod_08"))
    assert res.fired() == ({"tr_divmod_08": 1} if fires else {})
    [got], [want] = ng.execute(res.outputs, {}), ng.execute([o], {})
    np.testing.assert_array_equal(got, want)


def test_a_reverse_of_a_broadcast_scalar_is_proved_for_every_shape_in_floats():
    """Reverse in the every-shape fragment: an index n - 1 - i at the generic element."""
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    v = prove_rule(ng.load_rules(CORPUS / "xla.rules").rule("tr_broadcast_04"))
    assert v.status == "proved" and v.bound is None and "every shape" in v.reason, str(v)


@pytest.mark.parametrize("text", [
    "rule r: o @ Reverse(i @ Reverse(a))"
    " => Reverse(a, reverse_axes=o.reverse_axes | i.reverse_axes)",
    "rule r: r @ Reverse(a) => a",
])
def test_a_wrong_reverse_rule_is_never_proved(text):
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    [rule] = ng.parse_rules(text, "t.rules").rules
    assert prove_rule(rule).status == "wrong"


def test_a_reversed_reduction_has_no_generic_element():
    """A sum's stored body keeps its indices: substituting under it would be unsound."""
    pytest.importorskip("z3")
    from ngrules.verification.prove.symbolic import Generic, Unsupported, element

    a, b = ng.make_axis(2, "a"), ng.make_axis(2, "b")
    x = ng.placeholder([a, b], np.float64, name="x")
    r = ng.make_node("Reverse", (ng.sum(x, reduction_axes=ng.make_axes([b])),),
                     reverse_axes=ng.make_axes([a]))
    with pytest.raises(Unsupported, match="reduction under a Reverse"):
        element([r], Generic({}))


@pytest.mark.parametrize("name", ["tr_logical_01", "tr_not_01", "tr_select_04"])
def test_logic_on_bools_is_proved_in_floats(name):
    """A bool input is 0 or 1 (z3's If of a Bool); And, Or, Xor, Not on bools are encoded."""
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    v = prove_rule(ng.load_rules(CORPUS / "xla.rules").rule(name))
    assert v.status == "proved" and v.bound is None, str(v)


@pytest.mark.parametrize("text, status", [
    ('rule r: Or(a, 1) if a.dtype == "bool" => a', "wrong"),
    ('rule r: And(a, b) if a.dtype == "bool" => Or(a, b)', "wrong"),
    ('rule r: Xor(a, a) if a.dtype == "bool" => 1', "wrong"),
    ('rule r: Not(Not(a)) if a.dtype == "int64" => -a', "unverified"),  # bitwise: no encoding
])
def test_wrong_logic_rules_are_never_proved(text, status):
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    [rule] = ng.parse_rules(text, "t.rules").rules
    assert prove_rule(rule).status == status


@pytest.mark.parametrize("length, c, name, fires", [
    (4, 4, "tr_divmod_06", True), (4, 3, "tr_divmod_06", False),
    (5, 3, "tr_divmod_07", True), (5, -3, "tr_divmod_07", False),
])
def test_the_remainders_of_an_iota_rewrite_as_integers_do(length, c, name, fires):
    """tr_divmod_06-07 over AxisIndex, which the instance builder cannot build: on a graph."""
    a, b = ng.make_axis(length, "a"), ng.make_axis(2, "b")
    x = ng.placeholder([a], np.float64, name="x")
    iota = ng.broadcast(ng.make_node("AxisIndex", (x,), axis=a), ng.make_axes([a, b]))
    k = ng.broadcast(ng.make_node("Constant", value=np.array(c, np.int64),
                                  axes=ng.make_axes([])), ng.make_axes([a, b]))
    o = ng.make_node("Mod", (iota if name == "tr_divmod_06" else iota + k, k))
    res = ng.rewrite([o], _tr(name))
    assert res.fired() == ({name: 1} if fires else {})
    feeds = {x: np.zeros(length)}
    [got], [want] = ng.execute(res.outputs, feeds), ng.execute([o], feeds)
    np.testing.assert_array_equal(got, want)
