"""Rule AST -> canonical `.rules` text, with the fewest parentheses precedence allows.

`parse(format_rules(f)) == f` for every file the parser can produce (spans aside), so the
formatter is also a normaliser: two files that format alike mean the same.
"""

from __future__ import annotations

from ngrules.errors import NgrulesError
from ngrules.lang.lexical import ESCAPES
from ngrules.lang.syntax import (
    MAX_DEPTH,
    Assume,
    Clause,
    EAttr,
    EBinary,
    EBool,
    ECall,
    EIndex,
    ENum,
    ESlice,
    EStr,
    ETuple,
    EUnary,
    EVar,
    Expr,
    Guard,
    Import,
    Let,
    OnnxTarget,
    OpDecl,
    OpParam,
    PassDecl,
    Pattern,
    PipelineDecl,
    PLit,
    PNamed,
    PVar,
    RuleDecl,
    nesting_problem,
)

INDENT = "    "
WIDTH = 100

# -- patterns: @ (0) < + - (1) < * / (2) < unary minus, numbers (3) < atoms (4) ----------------
_INFIX_PATTERNS = {"Add": ("+", 1), "Subtract": ("-", 1), "Multiply": ("*", 2), "Divide": ("/", 2)}


def _number(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        value = int(value)
    return str(value) if isinstance(value, int) else repr(value)


def _wrap(text: str, level: int, needed: int) -> str:
    return f"({text})" if level < needed else text


def _pattern(p: Pattern) -> tuple[str, int]:
    """The text of p and its precedence level."""
    if isinstance(p, PVar):
        return (p.name if p.kind is None else f"{p.name}: {p.kind}"), 4
    if isinstance(p, PLit):
        return _number(p.value), 3
    if isinstance(p, PNamed):
        return f"{p.name} @ {format_pattern(p.pattern)}", 0
    if not p.optional and p.op in _INFIX_PATTERNS and len(p.args) == 2:
        symbol, level = _INFIX_PATTERNS[p.op]
        left, right = (pattern_at(a, need) for a, need in zip(p.args, (level, level + 1)))
        return f"{left} {symbol} {right}", level
    if not p.optional and p.op == "Negative" and len(p.args) == 1:
        return f"-{pattern_at(p.args[0], 4)}", 3
    mark = "?" if p.optional else ""
    return f"{p.op}{mark}({', '.join(format_pattern(a) for a in p.args)})", 4


def pattern_at(p: Pattern, needed: int) -> str:
    text, level = _pattern(p)
    return _wrap(text, level, needed)


def format_pattern(p: Pattern) -> str:
    return _pattern(p)[0]


# -- expressions: or < and < not < comparisons < | < & < + - < * / < unary < postfix < atoms -----
_LEVELS = {"or": 0, "and": 1, "|": 4, "&": 5, "+": 6, "-": 6, "*": 7, "/": 7}
_COMPARE = {"==", "!=", "<", "<=", ">", ">=", "in"}
_ESCAPES = {char: "\\" + letter for letter, char in ESCAPES.items()}


def _quote(text: str) -> str:
    return '"' + "".join(_ESCAPES.get(c, c) for c in text) + '"'


def _tuple(items) -> str:
    if len(items) == 1:
        return f"({format_expr(items[0])},)"
    return f"({', '.join(format_expr(i) for i in items)})"


def _call(e: ECall) -> str:
    args = [format_expr(a) for a in e.args] + [f"{k}={format_expr(v)}" for k, v in e.kwargs]
    return f"{e.func}({', '.join(args)})"


def _binary(e: EBinary) -> tuple[str, int]:
    if e.op in _COMPARE:
        level, left_need = 3, 4
    else:
        level = _LEVELS[e.op]
        left_need = level
    return f"{expr_at(e.left, left_need)} {e.op} {expr_at(e.right, level + 1)}", level


def _expr(e: Expr) -> tuple[str, int]:
    """The text of e and its precedence level."""
    if isinstance(e, ENum):
        return _number(e.value), 8
    if isinstance(e, EStr):
        return _quote(e.value), 10
    if isinstance(e, EBool):
        return ("true" if e.value else "false"), 10
    if isinstance(e, EVar):
        return e.name, 10
    if isinstance(e, ETuple):
        return _tuple(e.items), 10
    if isinstance(e, ECall):
        return _call(e), 10
    if isinstance(e, EAttr):
        return f"{expr_at(e.obj, 9)}.{e.name}", 9
    if isinstance(e, EIndex):
        return f"{expr_at(e.obj, 9)}[{format_expr(e.index)}]", 9
    if isinstance(e, ESlice):
        start = "" if e.start is None else format_expr(e.start)
        stop = "" if e.stop is None else format_expr(e.stop)
        return f"{expr_at(e.obj, 9)}[{start}:{stop}]", 9
    if isinstance(e, EUnary):
        if e.op == "not":
            return f"not {expr_at(e.operand, 2)}", 2
        return f"-{expr_at(e.operand, 9)}", 8
    return _binary(e)


def expr_at(e: Expr, needed: int) -> str:
    text, level = _expr(e)
    return _wrap(text, level, needed)


def format_expr(e: Expr) -> str:
    return _expr(e)[0]


# -- declarations ----------------------------------------------------------------------------
def _clause(c: Clause) -> str:
    if isinstance(c, Guard):
        return f"if {format_expr(c.expr)}"
    if isinstance(c, Assume):
        return f"assume {format_expr(c.expr)}"
    if isinstance(c, Let):
        return f"let {c.name} = {format_expr(c.expr)}"
    return f"where {c.name} = {format_pattern(c.pattern)}"


def _replacement(items: tuple[Expr, ...]) -> str:
    if len(items) == 1 and not isinstance(items[0], ETuple):
        return format_expr(items[0])
    return _tuple(items) if items else "()"


def format_rule(r: RuleDecl, one_line_limit: int = WIDTH) -> str:
    """One line when it fits and the rule has one root and no clauses; otherwise a head line,
    then one indented line per root, clause and the replacement (long ones wrapped)."""
    priority = "" if r.priority is None else f" priority {r.priority}"
    head = f"rule {r.name}{priority}:"
    body = f"=> {_replacement(r.replacement)}"
    if not r.clauses and len(r.roots) == 1:
        line = f"{head} {format_pattern(r.roots[0])} {body}"
        if len(line) <= one_line_limit:
            return line
    roots = [format_pattern(p) + ("," if i < len(r.roots) - 1 else "") for i, p in
             enumerate(r.roots)]
    parts = [*roots, *(_clause(c) for c in r.clauses), body]
    return "\n".join([head, *(wrap(INDENT + part) for part in parts)])


def wrap(line: str, width: int = WIDTH) -> str:
    """Break a long line before top-level infix operators, continuing 4 columns deeper."""
    if len(line) <= width:
        return line
    indent = line[: len(line) - len(line.lstrip())] + INDENT
    pieces, current = [], ""
    for chunk in _split_top_level(line):
        if current.strip() and len(current) + len(chunk) > width:
            pieces.append(current.rstrip())
            current = indent + chunk.lstrip()
        else:
            current += chunk
    return "\n".join(pieces + [current.rstrip()])


def _split_top_level(line: str) -> list[str]:
    """line cut before each ` + `, ` - `, ` * `, ` / `, ` and `, ` or ` outside brackets."""
    chunks, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        elif not quoted and depth == 0 and ch == " " and _operator_at(line, i + 1):
            chunks.append(line[start:i])
            start = i
    return chunks + [line[start:]]


def _operator_at(line: str, i: int) -> bool:
    return any(line.startswith(op, i) for op in ("+ ", "- ", "* ", "/ ", "and ", "or "))


def format_param(p: OpParam) -> str:
    """`slope: float = 0.01`: one parameter of an op declaration."""
    text = p.name if p.kind is None else f"{p.name}: {p.kind}"
    return text if p.default is None else f"{text} = {format_expr(p.default)}"


def format_onnx(t: OnnxTarget) -> str:
    """`onnx LeakyRelu(alpha=slope)`: the ONNX op a declared op exports as."""
    attrs = ", ".join(f"{k}={format_expr(v)}" for k, v in t.attrs)
    return f"onnx {t.qualified}" + (f"({attrs})" if attrs else "")


def format_op(d: OpDecl) -> str:
    """`op Name(x, slope: float = 0.01) = body`, then `onnx Op(...)` when it names one."""
    head = f"op {d.name}({', '.join(format_param(p) for p in d.params)}) ="
    tail = f" {format_onnx(d.onnx)}" if d.onnx is not None else ""
    line = f"{head} {_replacement(d.body)}{tail}"
    if len(line) <= WIDTH:
        return line
    body = wrap(INDENT + _replacement(d.body))
    return f"{head}\n{body}" + (f"\n{INDENT}{tail.strip()}" if tail else "")


def format_decl(d) -> str:
    deep = nesting_problem(d, MAX_DEPTH)
    if deep is not None:
        raise NgrulesError(f"cannot format: {deep[1]}")
    if isinstance(d, Import):
        return f"import {_quote(d.path)}"
    if isinstance(d, PassDecl):
        return f"pass {d.name}"
    if isinstance(d, PipelineDecl):
        return f"pipeline {d.name}: {', '.join(d.passes)}"
    if isinstance(d, OpDecl):
        return format_op(d)
    return format_rule(d)
