"""The rule AST: frozen dataclasses, each keeping its source span.

The parser builds these from the lark tree; the formatter prints them back; the checker turns
a file's declarations into `Rule`s. Spans never take part in equality, so a formatted and
re-parsed file compares equal to the original.
"""

from __future__ import annotations

from dataclasses import field

from ngrules.errors import Span
from ngrules.records import frozen


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False)


# -- patterns (left-hand sides) ---------------------------------------------------------------
@frozen
class PVar:
    """A variable: binds any node (of `kind`, an op name or trait, if given); `_` binds nothing."""

    name: str
    kind: str | None = None
    span: Span | None = _span()


@frozen
class PLit:
    """A number: matches a node whose value is known to be this constant everywhere."""

    value: float
    span: Span | None = _span()


@frozen
class POp:
    """`Op(p, ...)`; with `optional`, `Op?(p)` matches p with or without the Op around it."""

    op: str
    args: tuple[Pattern, ...]
    optional: bool = False
    span: Span | None = _span()
    #: A commutative op whose swapped order can only repeat a match with names exchanged
    #: (the checker decides: `lang/symmetry.py`): matched in the written order only.
    one_order: bool = field(default=False, compare=False)


@frozen
class PNamed:
    """`name @ pattern`: the node matched by pattern, bound to name (one node wherever used)."""

    name: str
    pattern: Pattern
    span: Span | None = _span()


Pattern = PVar | PLit | POp | PNamed


# -- expressions (guards, lets, replacements) -----------------------------------------------------
@frozen
class ENum:
    """A number literal."""

    value: int | float
    span: Span | None = _span()


@frozen
class EStr:
    """A string literal."""

    value: str
    span: Span | None = _span()


@frozen
class EBool:
    """`true` or `false`."""

    value: bool
    span: Span | None = _span()


@frozen
class EVar:
    """A name: a pattern variable, a let, or a library constant."""

    name: str
    span: Span | None = _span()


@frozen
class EAttr:
    """`obj.name`: a node's axes, dtype, attribute or derived property; an axis's length..."""

    obj: Expr
    name: str
    span: Span | None = _span()


@frozen
class EIndex:
    """`obj[index]`: an item of a tuple or of a node's axes."""

    obj: Expr
    index: Expr
    span: Span | None = _span()


@frozen
class ESlice:
    """`obj[start:stop]`: part of a tuple or of a node's axes."""

    obj: Expr
    start: Expr | None
    stop: Expr | None
    span: Span | None = _span()


@frozen
class ECall:
    """`f(args, key=value)`: an op (capitalised name, builds a node) or a library function."""

    func: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Expr], ...] = ()
    span: Span | None = _span()
    kwarg_spans: tuple[Span, ...] = field(default=(), compare=False, repr=False)


@frozen
class EBinary:
    """`left op right` for op in + - * / | & == != < <= > >= and or in."""

    op: str
    left: Expr
    right: Expr
    span: Span | None = _span()


@frozen
class EUnary:
    """`-x` or `not x`."""

    op: str
    operand: Expr
    span: Span | None = _span()


@frozen
class ETuple:
    """`(a, b, ...)`."""

    items: tuple[Expr, ...]
    span: Span | None = _span()


Expr = ENum | EStr | EBool | EVar | EAttr | EIndex | ESlice | ECall | EBinary | EUnary | ETuple


# -- rule clauses -----------------------------------------------------------------------------
@frozen
class Guard:
    """`if expr`: the match stands only when expr is true."""

    expr: Expr
    span: Span | None = _span()


@frozen
class Let:
    """`let name = expr`: a value computed once per match, usable below and in the replacement."""

    name: str
    expr: Expr
    span: Span | None = _span()


@frozen
class Where:
    """`where name = pattern`: a named sub-pattern; every use of name is one node."""

    name: str
    pattern: Pattern
    span: Span | None = _span()


@frozen
class Assume:
    """`assume x <= 30`: the author promises every element of x lies in the range; the engine
    never checks it (it cannot see values), verification checks the rule under it."""

    expr: Expr
    span: Span | None = _span()


Clause = Guard | Let | Where | Assume


# -- declarations -----------------------------------------------------------------------------
@frozen
class RuleDecl:
    """`rule name [priority N]: roots clauses => replacement` as written."""

    name: str
    roots: tuple[Pattern, ...]
    clauses: tuple[Clause, ...]
    replacement: tuple[Expr, ...]
    priority: int | None = None
    span: Span | None = _span()
    name_span: Span | None = _span()


@frozen
class PassDecl:
    """`pass name`: the rules that follow belong to this pass."""

    name: str
    span: Span | None = _span()


@frozen
class PipelineDecl:
    """`pipeline name: pass, pass, ...`: passes run in this order."""

    name: str
    passes: tuple[str, ...]
    span: Span | None = _span()
    pass_spans: tuple[Span, ...] = field(default=(), compare=False, repr=False)


@frozen
class Import:
    """`import "path.rules"`, relative to the importing file."""

    path: str
    span: Span | None = _span()


@frozen
class OpParam:
    """A parameter of `op Name(...)`: a tensor argument, or (with a kind or a default) an
    attribute such as `slope: float = 0.01`."""

    name: str
    kind: str | None = None
    default: Expr | None = None
    span: Span | None = _span()

    @property
    def is_attribute(self) -> bool:
        return self.kind is not None or self.default is not None


@frozen
class OnnxTarget:
    """`onnx [DOMAIN.]OP(attr=expr, ...)` after an op's body: the ONNX op that computes it.
    `domain` is "" for the standard ops; each attribute is an expression over the declared
    op's attribute parameters."""

    op: str
    domain: str = ""
    attrs: tuple[tuple[str, Expr], ...] = ()
    span: Span | None = _span()

    @property
    def qualified(self) -> str:
        return f"{self.domain}.{self.op}" if self.domain else self.op


@frozen
class OpDecl:
    """`op Name(params) = body`: an op whose inference, kernel and gradient come from its body
    (one expression per output); `onnx` names the ONNX op that computes it, if any."""

    name: str
    params: tuple[OpParam, ...]
    body: tuple[Expr, ...]
    span: Span | None = _span()
    name_span: Span | None = _span()
    onnx: OnnxTarget | None = None


Decl = RuleDecl | PassDecl | PipelineDecl | Import | OpDecl


@frozen
class RulesFile:
    """A parsed `.rules` file: its declarations in order; `text` is its source."""

    path: str
    decls: tuple[Decl, ...]
    text: str = field(default="", compare=False, repr=False)


#: How deep a pattern or expression may nest: the parser, checker and formatter refuse deeper
#: (an error, never a RecursionError).
MAX_DEPTH = 100
TOO_DEEP = f"nesting too deep (more than {MAX_DEPTH} levels)"
#: How deep the tree may be, chains of one operator counted term by term: the generated Python
#: of a guard nests one bracket per term, and Python refuses more than 200.
MAX_TREE_DEPTH = 180
CHAIN_TOO_LONG = (
    f"expression too deep: chains of operators nest more than {MAX_TREE_DEPTH} terms deep "
    "(name parts of a long chain with let)"
)


# -- spans and walking ------------------------------------------------------------------------
def name_span(span: Span | None, name: str, at_end: bool = False) -> Span | None:
    """The part of span that spells `name` (its start, or its end with at_end)."""
    if span is None:
        return None
    if at_end and span.end_line:
        col = max(span.end_col - len(name), 1)
        return Span(span.file, span.end_line, col, span.end_line, span.end_col, span.source_line)
    return Span(span.file, span.line, span.col, span.line, span.col + len(name), span.source_line)


def _call_children(e: ECall) -> tuple:
    return e.args + tuple(v for _, v in e.kwargs) if e.kwargs else e.args


_CHILDREN = {
    POp: lambda n: n.args,
    PNamed: lambda n: (n.pattern,),
    EAttr: lambda n: (n.obj,),
    EIndex: lambda n: (n.obj, n.index),
    ESlice: lambda n: tuple(c for c in (n.obj, n.start, n.stop) if c is not None),
    ECall: _call_children,
    EBinary: lambda n: (n.left, n.right),
    EUnary: lambda n: (n.operand,),
    ETuple: lambda n: n.items,
    Guard: lambda n: (n.expr,),
    Let: lambda n: (n.expr,),
    Where: lambda n: (n.pattern,),
    Assume: lambda n: (n.expr,),
    RuleDecl: lambda n: n.roots + n.clauses + n.replacement,
    OpDecl: lambda n: tuple(p.default for p in n.params if p.default is not None) + n.body
    + ((n.onnx,) if n.onnx is not None else ()),
    OnnxTarget: lambda n: tuple(v for _, v in n.attrs),
}
_LEAF = lambda n: ()  # noqa: E731


def children(node) -> tuple:
    """The sub-patterns, sub-expressions and clauses directly under node."""
    return _CHILDREN.get(type(node), _LEAF)(node)


def walk(nodes):
    """Every node under (and including) each of nodes, in source order, without recursion."""
    stack, under = list(nodes)[::-1], _CHILDREN.get  # (the checker walks every rule often)
    while stack:
        node = stack.pop()
        yield node
        found = under(type(node))
        if found is not None:
            stack.extend(reversed(found(node)))


_LEVEL = {"+": 1, "-": 1, "*": 2, "/": 2, "Add": 1, "Subtract": 1, "Multiply": 2, "Divide": 2}


def _level(op: str) -> object:
    return _LEVEL.get(op, op)


def _chains(item, child) -> bool:
    """Is child the left operand of item at the same precedence (`a + b - c` is one chain)?"""
    if isinstance(item, EBinary) and isinstance(child, EBinary):
        return child is item.left and _level(child.op) == _level(item.op)
    if isinstance(item, POp) and isinstance(child, POp) and item.op in _LEVEL:  # infix
        return child is item.args[0] and _level(child.op) == _level(item.op) and not child.optional
    return False


def too_deep(node, limit: int):
    """The first node nested more than `limit` levels below node, or None (no recursion).
    A chain of one operator (`a + b + ... + z`) is one level of nesting, not one per term;
    the tree under node may still be at most `MAX_TREE_DEPTH` nodes deep (`chain_too_long`)."""
    found = nesting_problem(node, limit)
    return found and found[0]


def nesting_problem(node, limit: int = MAX_DEPTH):
    """(the node too deep, the message saying why), or None: nesting deeper than limit, or an
    operator chain that makes the tree deeper than `MAX_TREE_DEPTH`."""
    stack = [(node, 0, 0)]
    while stack:
        item, depth, tree = stack.pop()
        if depth > limit:
            return item, TOO_DEEP
        if tree > MAX_TREE_DEPTH:
            return item, CHAIN_TOO_LONG
        stack.extend((c, depth + (not _chains(item, c)), tree + 1) for c in children(item))
    return None
