"""Checks of guards, lets and replacements that need no graph: kinds of values, required
attributes, what a replacement builds, and its axes where the pattern decides them.

Each expression is given a static kind (a node, Axes, an Axis, a number, a bool, a string, a
tuple, a dtype, or unknown) from the variables bound by the pattern, the op table and the
function table. A comparison of Axes with a number, an argument of the wrong kind, an op built
without a required attribute, a guard that cannot be true or false, or a replacement that is
not a node are errors at check time, with the caret on the offending part: these used to
surface only when `apply` or `verify` met a match. Unknown kinds are never errors.

A bare number as a replacement (`x - x => 0`) is allowed: the engine broadcasts it to the
matched node's axes and dtype.
"""

from __future__ import annotations

from collections.abc import Callable

from ngrules.errors import Span
from ngrules.ir.ops import OPS
from ngrules.lang.functions import FUNCTIONS
from ngrules.lang.syntax import (
    Assume,
    EAttr,
    EBinary,
    EBool,
    ECall,
    EIndex,
    ENum,
    ESlice,
    EStr,
    ETuple,
    EVar,
    Expr,
    Guard,
    Let,
    PNamed,
    POp,
    PVar,
    RuleDecl,
    children,
    name_span,
    walk,
)

Report = Callable[[str, Span | None], None]

NODE, AXES, AXIS, NUMBER, BOOL, STR, TUPLE, DTYPE = (
    "a node", "Axes", "an Axis", "a number", "a bool", "a string", "a tuple", "a dtype"
)  # fmt: skip
_ATTR_KINDS = {"axes": AXES, "axis": AXIS, "int": NUMBER, "float": NUMBER, "str": STR,
               "dtype": DTYPE}  # fmt: skip
_NODE_ATTRS = {"axes": AXES, "dtype": DTYPE, "rank": NUMBER, "op": STR, "args": TUPLE,
               "shape": TUPLE}  # fmt: skip
_AXIS_ATTRS = {"length": NUMBER, "name": STR, "axes": AXES, "is_flattened": BOOL}
_AXES_ATTRS = {"names": TUPLE, "lengths": TUPLE, "size": NUMBER}
_AXES_LIKE = {AXES, AXIS, TUPLE}

#: Pure functions: the kinds each positional argument accepts, and the kind returned.
_FUNCTION_KINDS: dict[str, tuple[tuple[set[str], ...], str | None]] = {
    "len": (({AXES, TUPLE, STR},), NUMBER),
    "size": (({NODE} | _AXES_LIKE,), NUMBER),
    "abs": (({NUMBER},), NUMBER),
    "pow": (({NUMBER}, {NUMBER}), NUMBER),
    "is_scalar": (({NODE},), BOOL),
    "is_constant": (({NODE},), BOOL),
    "value": (({NODE},), NUMBER),
    "new_axis": (({NUMBER}, {STR}), AXIS),
    "make_axes": ((_AXES_LIKE,), AXES),
    "flatten_axes": (({AXES, TUPLE},), AXIS),
    "index_of": ((_AXES_LIKE, {AXIS}), NUMBER),
    "broadcast": (({NODE}, _AXES_LIKE), NODE),
    "axes_with_order": (({NODE}, _AXES_LIKE), NODE),
    "flatten_at": (({NODE}, {NUMBER}), NODE),
}
_ORDERED = {"<", "<=", ">", ">="}
_ARITHMETIC = {"+", "-", "*", "/"}


class KindChecker:
    """Infers the static kind of each expression of one rule, reporting impossible ones."""

    def __init__(self, decl: RuleDecl, roots, report: Report):
        self.decl, self.report = decl, report
        self.kinds = dict.fromkeys(bound_names(roots), NODE)
        self.ops_of = known_ops(roots)

    def run(self) -> None:
        for c in self.decl.clauses:
            if isinstance(c, Guard):
                kind = self.kind(c.expr)
                if kind not in (None, BOOL):
                    self.report(f"a guard must be true or false; this is {kind}", c.expr.span)
            elif isinstance(c, Let):
                self.kinds[c.name] = self.kind(c.expr)
                if isinstance(c.expr, ECall) and c.expr.func in OPS:
                    self.ops_of[c.name] = c.expr.func
        for e in self.decl.replacement:
            kind = self.kind(e)
            if kind not in (None, NODE, NUMBER):
                self.report(
                    f"a replacement must build a node (or be a number, broadcast to the "
                    f"matched node); this is {kind}",
                    e.span,
                )

    # -- kinds -------------------------------------------------------------------------------
    def kind(self, e: Expr) -> str | None:
        simple = {ENum: NUMBER, EStr: STR, EBool: BOOL, ETuple: TUPLE}.get(type(e))
        if simple is not None:
            for item in children(e):
                self.kind(item)
            return simple
        if isinstance(e, EVar):
            return self.kinds.get(e.name)
        if isinstance(e, EAttr):
            return self._attribute(e)
        if isinstance(e, EIndex):
            obj, _ = self.kind(e.obj), self.kind(e.index)
            return {AXES: AXIS, NODE: NODE}.get(obj)
        if isinstance(e, ESlice):
            obj = self.kind(e.obj)
            for part in (e.start, e.stop):
                if part is not None:
                    self.kind(part)
            return obj if obj in (AXES, TUPLE, STR) else None
        if isinstance(e, ECall):
            return self._call(e)
        if isinstance(e, EBinary):
            return self._binary(e)
        operand = self.kind(e.operand)
        if e.op == "not":
            return BOOL
        return operand if operand in (NUMBER, NODE) else None

    def _attribute(self, e: EAttr) -> str | None:
        obj = self.kind(e.obj)
        if obj in (NUMBER, BOOL, STR, TUPLE, DTYPE):
            self.report(f"{obj} has no attribute {e.name!r}", e.span)
            return None
        if obj == AXIS:
            return _AXIS_ATTRS.get(e.name)
        if obj == AXES:
            return _AXES_ATTRS.get(e.name)
        if e.name in _NODE_ATTRS:
            return _NODE_ATTRS[e.name]
        op = OPS.get(static_op(e.obj, self.ops_of) or "")
        spec = op.attr(e.name) if op is not None else None
        if spec is not None:
            return _ATTR_KINDS.get(spec.kind)
        return AXES if e.name.endswith("axes") else None

    def _call(self, e: ECall) -> str | None:
        args = [self.kind(a) for a in e.args]
        for _, value in e.kwargs:
            self.kind(value)
        if e.func in OPS:
            self._op_call(e, args)
            return NODE
        wanted, result = _FUNCTION_KINDS.get(e.func, ((), None))
        for i, (arg, kinds) in enumerate(zip(args, wanted)):
            if arg is not None and arg not in kinds:
                self.report(
                    f"argument {i + 1} of {e.func} must be {_either(kinds)}, not {arg}",
                    e.args[i].span,
                )
        fdef = FUNCTIONS.get(e.func)
        if result is None and fdef is not None and fdef.kind == "builder":
            return NODE
        return result

    def _op_call(self, e: ECall, args: list[str | None]) -> None:
        opdef = OPS[e.func]
        given = {k for k, _ in e.kwargs}
        missing = [a.name for a in opdef.attrs if a.required and a.name not in given]
        if missing:
            names = ", ".join(f"{m}=..." for m in missing)
            self.report(f"{e.func} needs the attribute(s) {names}", name_span(e.span, e.func))
        allowed = {NODE, NUMBER} if opdef.has("elementwise") else {NODE}
        for i, arg in enumerate(args):
            if arg is not None and arg not in allowed:
                self.report(
                    f"argument {i + 1} of {e.func} must be {_either(allowed)}, not {arg}",
                    e.args[i].span,
                )

    def _binary(self, e: EBinary) -> str | None:
        left, right = self.kind(e.left), self.kind(e.right)
        if e.op in ("and", "or"):
            return BOOL
        if None in (left, right):
            return NODE if NODE in (left, right) and e.op in _ARITHMETIC else None
        if e.op in ("==", "!="):
            if _never_equal(left, right):
                self.report(f"compares {left} with {right}: never equal", e.span)
            return BOOL
        if e.op in _ORDERED:
            if not _orderable(left, right):
                self.report(f"cannot order {left} and {right} with {e.op!r}", e.span)
            return BOOL
        if e.op == "in":
            if right in (NUMBER, BOOL, DTYPE, AXIS):
                self.report(f"'in' needs Axes, a tuple or a string on its right, not {right}",
                            e.right.span)
            elif right == STR and left != STR:
                self.report(f"'in' a string needs a string on its left, not {left}", e.span)
            return BOOL
        return self._arithmetic(e, left, right)

    def _arithmetic(self, e: EBinary, left: str, right: str) -> str | None:
        if {left, right} <= {NUMBER, BOOL} and e.op in _ARITHMETIC:  # Python: True == 1
            return NUMBER
        if {left, right} <= {NODE, NUMBER} and e.op in _ARITHMETIC:
            return NODE
        if left == right and left in (TUPLE, STR) and e.op == "+":
            return left
        if left == AXES and right in _AXES_LIKE and e.op in ("+", "-", "|", "&"):
            return AXES
        if {left, right} <= _AXES_LIKE and e.op == "+":  # an Axis or a tuple on the left
            return AXES
        self.report(f"{left} {e.op} {right} is not defined", e.span)
        return None


def _never_equal(a: str, b: str) -> bool:
    """Kinds whose values never compare equal (Axes and tuples may: `axes == ()`)."""
    if a == b:
        return False
    comparable = (_AXES_LIKE, {DTYPE, STR}, {NUMBER, BOOL}, {DTYPE, NODE})  # numpy: a node
    return not any({a, b} <= ok for ok in comparable)  # with a .dtype equals that dtype


def _orderable(a: str, b: str) -> bool:
    """Python orders numbers, strings and tuples; numpy orders dtypes by safe casting (and
    reads a string or a node's `.dtype` as a dtype)."""
    if (a == b and a in (STR, TUPLE, DTYPE)) or {a, b} <= {NUMBER, BOOL}:
        return True
    return DTYPE in (a, b) and {a, b} <= {DTYPE, STR, NODE}


def _either(kinds: set[str]) -> str:
    return " or ".join(sorted(kinds))


def bound_names(roots) -> set[str]:
    """The variables the pattern binds (`x`, `h @ ...`; never the wildcard `_`)."""
    return {p.name for p in walk(roots) if isinstance(p, (PVar, PNamed)) and p.name != "_"}


def known_ops(roots) -> dict[str, str]:
    """variable -> the op its node is known to be (`x: Exp`, `h @ Exp(...)`)."""
    out: dict[str, str] = {}
    for p in walk(roots):
        if isinstance(p, PNamed) and isinstance(p.pattern, POp) and not p.pattern.optional:
            out[p.name] = p.pattern.op
        elif isinstance(p, PVar) and p.kind in OPS:
            out[p.name] = p.kind
    return out


def static_op(e: Expr, ops_of: dict[str, str]) -> str | None:
    """The op the node of e is known to be before matching, if any."""
    if isinstance(e, EVar):
        return ops_of.get(e.name)
    return e.func if isinstance(e, ECall) and e.func in OPS else None


# -- axes of the replacement against the root -----------------------------------------------------
def check_replacement_axes(decl: RuleDecl, roots, report: Report) -> None:
    """A guard-free rule that replaces a reduction or a broadcast by the very variable it
    reduces or broadcasts: the operand keeps the reduced axes (lacks the added ones), so the
    replacement has other axes whenever the op changes any. (Elementwise patterns cannot
    differ: an elementwise op's operands carry exactly its axes in the IR, so every variable
    below one has the root's axes.)"""
    if len(roots) != 1 or len(decl.replacement) != 1:
        return
    if any(not isinstance(c, Assume) for c in decl.clauses):
        return
    root, built = roots[0], decl.replacement[0]
    while isinstance(root, PNamed):
        root = root.pattern
    if not (isinstance(root, POp) and not root.optional and root.args):
        return
    op = OPS.get(root.op)
    operand = root.args[0]
    if op is None or not isinstance(operand, PVar):
        return
    if op.has("reduction"):
        change = f"reduces any axis: {operand.name} keeps the reduced axes"
    elif root.op == "Broadcast":
        change = f"adds any axis: {operand.name} lacks the added axes"
    else:
        return
    if isinstance(built, EVar) and built.name == operand.name:
        report(
            f"the replacement's axes differ from the matched node's whenever the {root.op} "
            f"{change} (add a guard such as `if {operand.name}.axes == ...`)",
            built.span,
        )


def check_rule_statics(decl: RuleDecl, roots, report: Report) -> None:
    """Every check of this module on one rule whose names and ops are already known good."""
    KindChecker(decl, roots, report).run()
    check_replacement_axes(decl, roots, report)
