"""Text -> `RulesFile`: the lark grammar, the callbacks that build the AST, friendly syntax errors.

The parser is LALR with the AST built during the parse (lark's inline transformer), so no parse
tree is kept and nothing recurses on nesting depth. Lark's tree and exceptions never leave
this module: every problem becomes a `RuleSyntaxError` located at `path:line:col`.
"""

from __future__ import annotations

import functools
import threading

from lark import Lark, Token, Transformer, v_args
from lark import __version__ as lark_version
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ngrules.errors import RuleSyntaxError, Span
from ngrules.lang.bounds import MAX_INT_BITS
from ngrules.lang.grammar import grammar_text
from ngrules.lang.lexical import prescan, quotable, redacted, unquote
from ngrules.lang.opsyntax import OpDeclarations
from ngrules.lang.parser_cache import cache_file, seal
from ngrules.lang.syntax import (
    MAX_DEPTH,
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
    EUnary,
    EVar,
    Guard,
    Import,
    Let,
    PassDecl,
    PipelineDecl,
    PLit,
    PNamed,
    POp,
    PVar,
    RuleDecl,
    RulesFile,
    Where,
    nesting_problem,
)

KEYWORDS = frozenset(
    [
        "import",
        "pass",
        "pipeline",
        "rule",
        "priority",
        "if",
        "let",
        "where",
        "assume",
        "and",
        "or",
        "not",
        "in",
        "true",
        "false",
        "onnx",
    ]
)


class _Source:
    """The file being parsed: what the callbacks need to build spans."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.lines = [line.rstrip("\r") for line in text.split("\n")]

    def span(self, line: int, col: int, end_line: int = 0, end_col: int = 0) -> Span:
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Span(self.path, line, col, end_line, end_col, source_line)

    def between(self, first, last=None) -> Span:
        """The span from the start of `first` to the end of `last` (tokens or AST nodes)."""
        last = first if last is None else last
        if isinstance(first, Token):
            line, col = first.line, first.column
        else:
            line, col = first.span.line, first.span.col
        if isinstance(last, Token):
            end_line, end_col = last.end_line, last.end_column
        else:
            end_line, end_col = last.span.end_line, last.span.end_col
        return self.span(line, col, end_line, end_col)


_PRECEDENCE = {"or": 0, "and": 1, "not": 2, "|": 4, "&": 5, "+": 6, "-": 6, "*": 7, "/": 7}
_PRECEDENCE.update(dict.fromkeys(["==", "!=", "<", "<=", ">", ">=", "in"], 3))
_NOT, _COMPARISON = 2, 3


def _level(op: Token) -> int:
    return _PRECEDENCE[op.value]


class _Keyword:
    """`name=expr` inside a call, until the call collects it."""

    def __init__(self, name: Token, value):
        self.name, self.value = name, value


def _infix_pattern(op: str):
    def build(self, left, right):
        return POp(op, (left, right), span=self.src.between(left, right))

    return build


@v_args(inline=True)
class ToAst(OpDeclarations, Transformer):
    """One method per grammar alias, each building one AST node with its span."""

    src: _Source

    def _error(self, message: str, token: Token):
        raise RuleSyntaxError(message, self.src.between(token))

    def _number(self, token: Token) -> int | float:
        text = token.value
        try:
            value = float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            self._error(f"the number {text[:20]}... is too long", token)
        if value in (float("inf"), float("-inf")):
            self._error(f"the number {text} is too large", token)
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            self._error(f"the number {text[:20]}... is too large (integers have at most "
                        f"{MAX_INT_BITS} bits)", token)
        return value

    # -- file structure ------------------------------------------------------------------------
    def start(self, *decls):
        return decls

    def import_decl(self, keyword, path):
        return Import(unquote(path, self.src.span), span=self.src.between(keyword, path))

    def pass_decl(self, keyword, name):
        return PassDecl(name.value, span=self.src.between(keyword, name))

    def pipeline_decl(self, keyword, name, *passes):
        spans = tuple(self.src.between(p) for p in passes)
        return PipelineDecl(
            name.value,
            tuple(p.value for p in passes),
            span=self.src.between(keyword, passes[-1]),
            pass_spans=spans,
        )

    def rule_decl(self, keyword, name, *rest):
        priority = rest[0] if isinstance(rest[0], int) else None
        roots = rest[1] if priority is not None else rest[0]
        clauses, replacement = rest[2 if priority is not None else 1 : -1], rest[-1]
        items = replacement.items if isinstance(replacement, ETuple) else (replacement,)
        return RuleDecl(
            name.value,
            roots,
            tuple(clauses),
            items,
            priority,
            span=self.src.between(keyword, replacement),
            name_span=self.src.between(name),
        )

    def priority(self, *tokens):
        value = self._number(tokens[-1])
        if not isinstance(value, int):
            self._error("a priority must be a whole number", tokens[-1])
        return -value if len(tokens) == 2 else value

    def roots(self, *patterns):
        return patterns

    def guard(self, keyword, expr):
        return Guard(expr, span=self.src.between(keyword, expr))

    def let(self, keyword, name, expr):
        return Let(name.value, expr, span=self.src.between(keyword, expr))

    def where(self, keyword, name, pattern):
        return Where(name.value, pattern, span=self.src.between(keyword, pattern))

    def assume(self, keyword, expr):
        return Assume(expr, span=self.src.between(keyword, expr))

    # -- patterns ------------------------------------------------------------------------------
    def named_pattern(self, name, pattern):
        return PNamed(name.value, pattern, span=self.src.between(name, pattern))

    add_pattern = _infix_pattern("Add")
    subtract_pattern = _infix_pattern("Subtract")
    multiply_pattern = _infix_pattern("Multiply")
    divide_pattern = _infix_pattern("Divide")

    def literal_pattern(self, number):
        return PLit(float(self._number(number)), span=self.src.between(number))

    def negative_literal_pattern(self, minus, number):
        return PLit(-float(self._number(number)), span=self.src.between(minus, number))

    def negative_pattern(self, minus, pattern):
        return POp("Negative", (pattern,), span=self.src.between(minus, pattern))

    def variable_pattern(self, name):
        return PVar(name.value, span=self.src.between(name))

    def typed_pattern(self, name, kind):
        return PVar(name.value, kind.value, span=self.src.between(name, kind))

    def op_pattern(self, name, *args):
        *args, rpar = args
        return POp(name.value, tuple(args), span=self.src.between(name, rpar))

    def optional_pattern(self, name, *args):
        *args, rpar = args
        return POp(name.value, tuple(args), optional=True, span=self.src.between(name, rpar))

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, *items):
        """A flat `operand op operand ...` sequence, grouped by precedence (shunting-yard)."""
        if len(items) == 1:
            return items[0]
        operands, pending = [], []  # pending: operator tokens not yet applied
        for i, item in enumerate(items):
            if not isinstance(item, Token):
                operands.append(item)
            elif item.type == "NOT":
                before = items[i - 1] if i else None
                if isinstance(before, Token) and _PRECEDENCE[before.value] > _NOT:
                    self._error(f"'not' cannot follow {before.value!r}; add parentheses", item)
                pending.append(item)
            else:
                self._push_operator(item, operands, pending)
        while pending:
            self._apply(pending.pop(), operands)
        return operands[0]

    def _push_operator(self, op: Token, operands: list, pending: list) -> None:
        level = _PRECEDENCE[op.value]
        while pending and _level(pending[-1]) >= level:
            top = pending.pop()
            if level == _COMPARISON and _level(top) == _COMPARISON:
                self._error("comparisons do not chain; add parentheses", op)
            self._apply(top, operands)
        pending.append(op)

    def _apply(self, op: Token, operands: list) -> None:
        right = operands.pop()
        if op.type == "NOT":
            operands.append(EUnary("not", right, span=self.src.between(op, right)))
        else:
            left = operands.pop()
            operands.append(EBinary(op.value, left, right, span=self.src.between(left, right)))

    def negate(self, op, operand):
        return EUnary("-", operand, span=self.src.between(op, operand))

    def number(self, token):
        return ENum(self._number(token), span=self.src.between(token))

    def negative_number(self, minus, token):
        return ENum(-self._number(token), span=self.src.between(minus, token))

    def attribute(self, obj, name):
        return EAttr(obj, name.value, span=self.src.between(obj, name))

    def index(self, obj, index):
        return EIndex(obj, index, span=self.src.between(obj, index))

    def slice(self, obj, *parts):
        colon = next(i for i, p in enumerate(parts) if isinstance(p, Token))
        start = parts[0] if colon == 1 else None
        stop = parts[colon + 1] if colon + 1 < len(parts) else None
        return ESlice(obj, start, stop, span=self.src.between(obj, parts[-1]))

    def string(self, token):
        return EStr(unquote(token, self.src.span), span=self.src.between(token))

    def true(self, token):
        return EBool(True, span=self.src.between(token))

    def false(self, token):
        return EBool(False, span=self.src.between(token))

    def variable(self, name):
        return EVar(name.value, span=self.src.between(name))

    def keyword(self, name, value):
        return _Keyword(name, value)

    def call(self, name, *arguments):
        *arguments, rpar = arguments
        args, kwargs, spans = [], [], []
        for a in arguments:
            if isinstance(a, _Keyword):
                kwargs.append((a.name.value, a.value))
                spans.append(self.src.between(a.name))
            elif kwargs:
                raise RuleSyntaxError("a positional argument follows a keyword argument", a.span)
            else:
                args.append(a)
        span = self.src.between(name, rpar)
        return ECall(name.value, tuple(args), tuple(kwargs), span=span, kwarg_spans=tuple(spans))

    def tuple(self, lpar, *items):
        *items, rpar = items
        return ETuple(tuple(items), span=self.src.between(lpar, rpar))


_LOCK = threading.Lock()


@functools.cache
def _parser() -> tuple[Lark, ToAst]:
    """The LALR parser, built once; its callbacks build the AST while parsing."""
    to_ast = ToAst()
    grammar = grammar_text()
    # never lark's `cache=True`: a pickle in the shared temp folder, under a predictable name
    cache = cache_file(grammar, lark_version)
    lark = Lark(grammar, parser="lalr", lexer="basic", transformer=to_ast, cache=cache or False)
    seal(cache)
    return lark, to_ast


def parse(text: str, path: str = "<string>") -> RulesFile:
    """Parse the text of one rules file; raise `RuleSyntaxError` if it is not well formed
    (quoting none of the text if `path` names a file that is not a `.rules` file)."""
    try:
        return _parse(text, path)
    except RuleSyntaxError as e:
        if quotable(path):
            raise
        raise redacted(e) from None


def _parse(text: str, path: str) -> RulesFile:
    lark, to_ast = _parser()
    src = _Source(path, text)
    prescan(text, src.span)  # refuse what is too large before building it
    with _LOCK:
        to_ast.src = src
        try:
            decls = lark.parse(text)
        except UnexpectedInput as e:
            raise _syntax_error(e, src, text, lark) from None
        except LarkError as e:  # pragma: no cover - lark's other errors, kept located anyway
            raise RuleSyntaxError(f"cannot parse: {e}", src.span(1, 1)) from None
    for decl in decls:
        deep = nesting_problem(decl, MAX_DEPTH)
        if deep is not None:
            raise RuleSyntaxError(deep[1], deep[0].span)
    return RulesFile(path, tuple(decls), text)


# -- syntax errors in words ---------------------------------------------------------------------
_START = {"NAME", "NUMBER", "MINUS", "LPAR"}
_EXPR_ONLY = {"STRING", "TRUE", "FALSE", "NOT"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "BAR", "AMP", "COMPARE", "IN", "AND", "OR"}
_OPERATORS |= {"AT", "DOT", "LSQB"}
_DECLS = {"RULE", "PASS", "PIPELINE", "IMPORT"}
_WORDS = {"NAME": "a name", "NUMBER": "a number", "STRING": "a string in quotes"}
_ORDER = ["ARROW", "IF", "LET", "WHERE", "ASSUME", "COLON", "COMMA", "EQUAL", "RPAR", "RSQB",
          "LPAR"]


def _describe_expected(expected: set[str], lark: Lark) -> str:
    """The set of acceptable terminals, in words: 'a pattern, '=>' or 'if''."""
    expected, words = set(expected), []
    if expected >= _START:
        words.append("an expression" if expected & _EXPR_ONLY else "a pattern")
        expected -= _START | _EXPR_ONLY
    elif "NAME" in expected and "NUMBER" not in expected:
        words.append("a name")
        expected.discard("NAME")
    ordered = [t for t in _ORDER if t in expected]
    ordered += sorted(expected - set(_ORDER) - _OPERATORS - _DECLS - {"$END"})
    words += [_WORDS.get(t) or repr(lark.get_terminal(t).pattern.value) for t in ordered]
    if len(expected & _OPERATORS) >= 3:
        words.append("an operator")
    else:
        words += [repr(lark.get_terminal(t).pattern.value) for t in sorted(expected & _OPERATORS)]
    if expected & _DECLS:
        words.append("a new 'rule', 'op', 'pass', 'pipeline' or 'import'")
    if "$END" in expected:
        words.append("the end of the file")
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _describe_token(token: Token) -> str:
    if token.type == "NAME":
        return f"name {token.value!r}"
    if token.type == "NUMBER":
        return f"number {token.value[:20]}"
    if token.type == "STRING":
        return "string"
    if token.value.isalpha():
        return f"keyword {token.value!r}"
    return repr(token.value)


def _end_of_text(src: _Source) -> tuple[int, int]:
    return len(src.lines), len(src.lines[-1]) + 1


def _syntax_error(e: UnexpectedInput, src: _Source, text: str, lark: Lark) -> RuleSyntaxError:
    """A lark error, rewritten as what was found and what was expected, in words."""
    if isinstance(e, UnexpectedCharacters):
        char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        return RuleSyntaxError(f"unexpected character {char!r}", src.span(e.line, e.column))
    if isinstance(e, UnexpectedToken):
        try:
            expected = e.interactive_parser.accepts()
        except Exception:  # noqa: BLE001 - fall back to lark's (less precise) expected set
            expected = e.expected
        hint = _describe_expected(expected, lark)
        hint = f"; expected {hint}" if hint else ""
        if e.token.type == "$END":
            line, col = _end_of_text(src)
            return RuleSyntaxError(f"unexpected end of file{hint}", src.span(line, col))
        found = _describe_token(e.token)
        span = src.span(e.token.line, e.token.column, e.token.end_line, e.token.end_column)
        return RuleSyntaxError(f"unexpected {found}{hint}", span)
    line, col = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
    return RuleSyntaxError("cannot parse this", src.span(line, col))
