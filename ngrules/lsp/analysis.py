"""What an editor asks of one `.rules` document, answered without any LSP machinery.

`Document(text, path)` parses and checks the text as `ngrules check` would (imports resolved
from `path`'s folder, the unsaved text used for the document itself) and answers questions by
position: diagnostics, hover text, definitions, completions, symbols and formatting. Lines and
columns here count from 0, as in the protocol; spans from the checker count from 1.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ngrules.errors import Span
from ngrules.ir.ops import OPS
from ngrules.lang.describe import function_summary, op_summary
from ngrules.lang.expr import NODE_ATTRIBUTES, all_attributes
from ngrules.lang.formatter import format_op, format_param, format_rule
from ngrules.lang.functions import FUNCTIONS
from ngrules.lang.kinds import KINDS
from ngrules.lang.layout import format_rules
from ngrules.lang.lexical import bidi_warnings
from ngrules.lang.parser import KEYWORDS
from ngrules.lang.replacements import known_ops
from ngrules.lang.shipped import library_import, short_location
from ngrules.lang.syntax import (
    Import,
    Let,
    OpDecl,
    PassDecl,
    PipelineDecl,
    PNamed,
    PVar,
    RuleDecl,
    RulesFile,
    Where,
    walk,
)
from ngrules.lsp.recovery import check_recovering, pieces
from ngrules.lsp.verdicts import last_verdict

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Place:
    """A position in a file, 0-based, with the end of the thing found there."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Diagnostic:
    message: str
    place: Place
    warning: bool = False  # shown as a warning, not an error (bidirectional controls)


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str  # "pass", "rule", "pipeline", "op", "import"
    place: Place
    name_place: Place
    children: list = field(default_factory=list, compare=False)


def place_of(span: Span | None, path: str, width: int = 1) -> Place:
    """A checker span (1-based) as a 0-based range; a start-only span covers `width` columns."""
    if span is None:
        return Place(path, 0, 0, 0, 0)
    line, col = span.line - 1, span.col - 1
    if span.end_line and (span.end_line, span.end_col) > (span.line, span.col):
        return Place(span.file, line, col, span.end_line - 1, span.end_col - 1)
    return Place(span.file, line, col, line, col + width)


def _same_file(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


class Document:
    """One open document: its text, the files it imports, and every problem found in them."""

    def __init__(self, text: str, path: str):
        self.text, self.path = text, path
        self.lines = text.split("\n")
        self.files, self.errors = check_recovering(text, path)
        self.file: RulesFile | None = next(
            (f for f in self.files if _same_file(f.path, path)), None
        )

    # -- diagnostics ---------------------------------------------------------------------------
    def diagnostics(self) -> list[Diagnostic]:
        """Problems located in this document, with the messages `ngrules check` prints."""
        out = []
        imports = self._reached()
        for e in self.errors:
            if e.span is None or _same_file(e.span.file, self.path):
                out.append(Diagnostic(e.message, place_of(e.span, self.path, self._width(e.span))))
            elif os.path.abspath(e.span.file) in imports:  # shown on the import line
                where = imports[os.path.abspath(e.span.file)]
                out.append(Diagnostic(f"{e.span}: {e.message}", place_of(where, self.path)))
        out += [Diagnostic(w.message, place_of(w.span, self.path), warning=True)
                for w in bidi_warnings(self.text, self.path)]
        return out

    def _imports(self) -> dict[str, Span]:
        """The files this document imports (absolute paths), each with its import's span."""
        return _imported(self.path, self._decls())

    def _reached(self) -> dict[str, Span]:
        """Every file reached through this document's imports, directly or through other
        files, each with the span of the import here that leads to it (the first such)."""
        edges = {os.path.abspath(f.path): _imported(f.path, f.decls) for f in self.files}
        reached: dict[str, Span] = {}
        for target, span in self._imports().items():
            stack = [target]
            while stack:
                path = stack.pop()
                if path not in reached:
                    reached[path] = span
                    stack.extend(edges.get(path, ()))
        return reached

    def _width(self, span: Span | None) -> int:
        """A start-only span covers the word there (or one column)."""
        if span is None or not 0 < span.line <= len(self.lines):
            return 1
        found = _WORD.match(self.lines[span.line - 1], span.col - 1)
        return len(found.group()) if found else 1

    # -- words under the cursor ----------------------------------------------------------------
    def word_at(self, line: int, col: int) -> tuple[str, int, int] | None:
        """The identifier under (line, col) and its columns, or None."""
        if not 0 <= line < len(self.lines):
            return None
        for m in _WORD.finditer(self.lines[line]):
            if m.start() <= col <= m.end():
                return m.group(), m.start(), m.end()
        return None

    def rule_at(self, line: int) -> RuleDecl | None:
        """The rule declaration whose text covers `line` (0-based)."""
        for d in self._decls():
            if isinstance(d, RuleDecl) and d.span and d.span.line - 1 <= line:
                end = (d.span.end_line or d.span.line) - 1
                if line <= end:
                    return d
        return None

    def _decls(self) -> tuple:
        return self.file.decls if self.file is not None else ()

    # -- hover -----------------------------------------------------------------------------------
    def _lookup(self, line: int, col: int):
        """(word under the cursor, its binding in the enclosing rule or None), or None."""
        found = self.word_at(line, col)
        if found is None:
            return None
        rule = self.rule_at(line)
        return found[0], self._binding(rule, found[0]) if rule is not None else None

    def hover(self, line: int, col: int) -> str | None:
        """Markdown for the op, function, variable or keyword under the cursor."""
        looked = self._lookup(line, col)
        if looked is None:
            return None
        word, binding = looked
        if binding is not None:
            return binding[1]
        if word in KEYWORDS and not self._called(line, col):  # `where x = ...`, not where()
            return _KEYWORD_HELP.get(word, f"keyword `{word}`")
        declared = self._declared_op(word)
        if declared is not None:
            where = f"{declared.span}" if declared.span else ""
            return _code(format_op(declared) + f"\nan op declared in rules, at {where}")
        rule = self._rule_named(word) if not self._called(line, col) else None
        if rule is not None:
            return _rule_hover(rule, last_verdict(self.text, self.path, rule.name))
        if word in OPS:
            return _code(op_summary(OPS[word]))
        if word in FUNCTIONS:
            return _code(function_summary(FUNCTIONS[word]))
        if word in KINDS:
            return f"kind `{word}`: {KINDS[word].__doc__ or ''}".strip()
        return _KEYWORD_HELP.get(word)

    def _called(self, line: int, col: int) -> bool:
        """Whether the word under the cursor is followed by `(` (a call, not a keyword)."""
        found = self.word_at(line, col)
        return found is not None and self.lines[line][found[2]:].lstrip().startswith("(")

    def _declared_op(self, name: str) -> OpDecl | None:
        """The `op` declaration of `name` in this document or a file it imports."""
        return next((d for d in self._declared(OpDecl) if d.name == name), None)

    def _rule_named(self, name: str) -> RuleDecl | None:
        """The rule called `name` in this document or a file it imports."""
        return next((d for d in self._declared(RuleDecl) if d.name == name), None)

    def _declared(self, kind: type) -> list:
        """The declarations of one kind in this document and the files it imports."""
        return [d for f in self.files for d in f.decls if isinstance(d, kind)]

    def _binding(self, rule: RuleDecl, name: str) -> tuple[Span | None, str] | None:
        """Where `name` is bound in `rule` and what it is, or None if it is not bound there."""
        for c in rule.clauses:
            if isinstance(c, Where) and c.name == name:
                return c.span, f"`{name}`: a named sub-pattern (`where`), line {c.span.line}"
        for p in walk(rule.roots + tuple(c.pattern for c in rule.clauses if isinstance(c, Where))):
            if isinstance(p, PVar) and p.name == name:
                kind = f"a node of kind `{p.kind}`" if p.kind else "any node"
                return p.span, f"`{name}`: a pattern variable, {kind}, bound at line {_line(p)}"
            if isinstance(p, PNamed) and p.name == name:
                return p.span, f"`{name}`: the node matched by `{name} @ ...`, line {_line(p)}"
        for c in rule.clauses:
            if isinstance(c, Let) and c.name == name:
                return c.span, f"`{name}`: a value computed by `let`, line {_line(c)}"
        return None

    # -- definitions -----------------------------------------------------------------------------
    def definition(self, line: int, col: int) -> Place | None:
        """Where the name under the cursor is defined: a binding, import, pass or pipeline."""
        imported = self._import_at(line)
        if imported is not None:
            return imported
        looked = self._lookup(line, col)
        if looked is None:
            return None
        word, binding = looked
        if binding is not None and binding[0] is not None:
            return self._name_place(binding[0], word)
        declared = self._declared_op(word)
        if declared is not None and declared.span is not None:
            span = declared.name_span or declared.span
            return self._name_place(span, word)
        for f in self.files:
            for d in f.decls:
                if isinstance(d, (PassDecl, PipelineDecl)) and d.name == word and d.span:
                    return self._name_place(d.span, word)
        return None

    def _name_place(self, span: Span, name: str) -> Place:
        """The range of `name` at or after the start of span (a declaration's own name)."""
        line = span.source_line or ""
        found = re.compile(rf"\b{re.escape(name)}\b").search(line, span.col - 1)
        col = found.start() if found else span.col - 1
        return Place(span.file, span.line - 1, col, span.line - 1, col + len(name))

    def _import_at(self, line: int) -> Place | None:
        for target, span in self._imports().items():
            if span.line - 1 == line and os.path.isfile(target):
                return Place(target, 0, 0, 0, 0)
        return None

    # -- completion ------------------------------------------------------------------------------
    def completions(self, line: int, col: int) -> list[tuple[str, str, str]]:
        """(label, kind, detail) candidates: attributes after a dot, else names and keywords."""
        text = self.lines[line][:col] if 0 <= line < len(self.lines) else ""
        prefix = re.search(r"[A-Za-z0-9_]*$", text).group()
        before = text[: len(text) - len(prefix)]
        if before.endswith("."):
            names = self._attributes_of(line, re.search(r"([A-Za-z_][A-Za-z0-9_]*)?$", before[:-1]))
            return [(a, "attribute", "") for a in sorted(names) if a.startswith(prefix)]
        called = self._parameters_of(before)
        if called:  # inside `Op(...)` of an op with attributes: its parameters by name
            return [c for c in called if c[0].startswith(prefix)]
        declared = {d.name: d for d in self._declared(OpDecl)}  # not in the table: unsaved
        out = [(n, "op", _signature(d)) for n, d in sorted(declared.items())]
        out += [(n, "op", op_summary(o).split("\n")[0]) for n, o in sorted(OPS.items())
                if n not in declared]
        out += [(n, "function", f.doc) for n, f in sorted(FUNCTIONS.items())]
        out += [(k, "keyword", "") for k in sorted(KEYWORDS)]
        out += [(k, "kind", "") for k in sorted(KINDS)]
        return [c for c in out if c[0].startswith(prefix)]

    def _parameters_of(self, before: str) -> list[tuple[str, str, str]]:
        """`slope=` and the other attributes of the op whose call is open before the cursor
        (a declared op's parameters, or a table op's attributes), else []."""
        depth, i = 0, len(before)
        while i > 0:
            i -= 1
            depth += {")": 1, "(": -1}.get(before[i], 0)
            if depth < 0:
                break
        found = re.search(r"([A-Z][A-Za-z0-9_]*)\s*$", before[:i]) if depth < 0 else None
        if found is None:
            return []
        declared = self._declared_op(found.group(1))
        if declared is not None:
            return [(f"{p.name}=", "attribute", format_param(p)) for p in declared.params
                    if p.is_attribute]
        op = OPS.get(found.group(1))
        return [(f"{a.name}=", "attribute", a.kind) for a in op.attrs] if op else []

    def _attributes_of(self, line: int, var) -> set[str]:
        """The attributes `var.` can have: its op's when the rule binds it to one (`d @ Dot(..)`,
        `x: Flatten`), else every attribute of any value. The rule being typed rarely parses, so
        the binding is read from its text."""
        name = var.group(1) if var else None
        op = self._bound_op(line, name) if name else None
        if op is None or op not in OPS:
            return all_attributes()
        return {*NODE_ATTRIBUTES, *(a.name for a in OPS[op].attrs), *OPS[op].derived}

    def _bound_op(self, line: int, name: str) -> str | None:
        rule = self.rule_at(line)
        if rule is not None:
            patterns = rule.roots + tuple(c.pattern for c in rule.clauses if isinstance(c, Where))
            return known_ops(patterns).get(name)
        start = max((s for s, e in pieces(self.lines) if s <= line), default=0)
        text = "\n".join(self.lines[start : line + 1])
        found = re.search(rf"\b{re.escape(name)}\s*(?:@|:)\s*([A-Z][A-Za-z0-9_]*)\b(?!\?)", text)
        return found.group(1) if found else None

    # -- symbols and formatting ----------------------------------------------------------------
    def symbols(self) -> list[Symbol]:
        """Passes, rules, pipelines and declared ops of this document, in order."""
        out = []
        for d in self._decls():
            name = getattr(d, "name", None)
            if name is None or d.span is None:
                continue
            kind = _SYMBOL_KINDS.get(type(d), "op")
            name_span = getattr(d, "name_span", None)
            name_place = (
                place_of(name_span, self.path, len(name))
                if name_span is not None
                else self._name_place(d.span, name)
            )
            out.append(Symbol(name, kind, place_of(d.span, self.path), name_place))
        return out

    def symbol_tree(self) -> list[Symbol]:
        """The symbols nested as the document is: each pass with its rules as children."""
        out: list[Symbol] = []
        current: Symbol | None = None
        for s in self.symbols():
            if s.kind == "rule" and current is not None:
                current.children.append(s)
                continue
            out.append(s)
            current = s if s.kind == "pass" else current
        return out

    def formatted(self) -> str | None:
        """The canonical text of the document, or None while it does not parse."""
        if self.file is None:
            return None
        return format_rules(self.file)


_SYMBOL_KINDS = {PassDecl: "pass", RuleDecl: "rule", PipelineDecl: "pipeline"}


#: The keywords, explained on hover (a word also a function, `where(...)`, is that when called).
_KEYWORD_HELP = {
    "rule": "`rule NAME [priority N]: PATTERN [clauses] => REPLACEMENT`: a rewrite rule.",
    "pass": "`pass NAME`: the rules after it, until the next pass, run together to a fixpoint.",
    "pipeline": "`pipeline NAME: pass, pass, ...`: passes run in this order.",
    "import": '`import "file.rules"` (or `"ngrules:NAME.rules"`, the shipped library): read '
    "that file first.",
    "priority": "`priority N`: within a pass, higher priorities are tried first (default 0).",
    "if": "`if EXPR`: a guard; the rule fires only where it is true.",
    "let": "`let NAME = EXPR`: a value computed from the match, for guards and the replacement.",
    "where": "`where NAME = PATTERN`: a named sub-pattern; every use of NAME is one node.",
    "and": "boolean and (short-circuit)",
    "or": "boolean or (short-circuit)",
    "not": "boolean negation",
    "in": "`a in b`: membership (an axis in axes, a value in a tuple)",
    "true": "the boolean true",
    "false": "the boolean false",
    "assume": "`assume x <= 30`: the author promises every element of x lies in the range. "
    "Not checked when rules rewrite (the engine cannot see values); verification draws x "
    "within it and says `assuming ...` in its verdict.",
    "onnx": "`op Leaky(x, slope: float = 0.01) = ... onnx LeakyRelu(alpha=slope)`: the ONNX "
    "op that computes the declared op, written on export (its attributes from the op's). "
    "`ngrules verify` checks it against the body under onnxruntime. Without it (or when the "
    "exporter's opset lacks the op) the op exports as an ONNX function of its body.",
    "canonical_layout": "built-in pass `canonical_layout`: moves layout views (ReorderAxes, "
    "Broadcast) out of the elementwise ops they feed, so `x * Sigmoid(x)` matches an imported "
    "`ReorderAxes(d) * ReorderAxes(Sigmoid(d))`. Any pipeline may name it; no file may declare it.",
    "fold_constants": "built-in pass `fold_constants`: evaluates every node whose arguments are "
    "all constants (bounded in size: `--fold-limit`), so arithmetic on weights leaves as one "
    "constant. Any pipeline may name it; no file may declare it.",
    "decompose": "built-in pass `decompose`: lowers every composite op (an ONNX op the importer "
    "kept whole, `LRN`, `LayerNormalization`, ...) into the primitives of its body; "
    "`decompose_<Op>` lowers only that op. A body no rule changed is written back as the op.",
}


def _imported(path: str, decls) -> dict[str, Span]:
    """The files `decls` (of the file at `path`) import, as absolute paths, with their spans
    (`import "ngrules:cpu.rules"` is the shipped library's file)."""
    return {
        os.path.abspath(library_import(d.path) or os.path.join(os.path.dirname(path), d.path)):
            d.span
        for d in decls
        if isinstance(d, Import) and d.span is not None
    }


def _signature(d: OpDecl) -> str:
    """`op Leaky(x, slope: float = 0.01)`: a declared op's name and parameters."""
    return f"op {d.name}({', '.join(format_param(p) for p in d.params)})"


def _rule_hover(rule: RuleDecl, verdict: str | None) -> str:
    """The rule as `fmt` writes it, where it is, and its last verdict."""
    where = short_location(f"{rule.span.file}:{rule.span.line}") if rule.span else "?"
    verdict = verdict or "not verified yet"
    return f"```ngrules\n{format_rule(rule)}\n```\nrule at {where}\n\nlast verdict: {verdict}"


def _line(item) -> int | str:
    return item.span.line if item.span else "?"


def _code(text: str) -> str:
    head, _, rest = text.partition("\n")
    return f"```ngrules\n{head}\n```\n{rest}".rstrip()
