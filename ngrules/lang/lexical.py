"""Checks on the characters of a rules text: string escapes, and, before a text is parsed,
no declaration too long and no brackets nested too deep.

The parser builds tokens and AST nodes for a whole text before the depth of what it built can
be measured: an 8 MB one-expression file once took a minute and 2 GB to be refused. These
checks scan the text with a few regular expressions (strings and comments blanked out first)
and refuse it, located, before anything is built.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable

from ngrules.errors import RuleError, RuleSyntaxError, Span
from ngrules.lang.syntax import MAX_DEPTH, TOO_DEEP

#: One declaration (`rule`, `op`, `pass`, `pipeline`, `import`) may be this many characters long.
MAX_DECL_CHARS = 100_000

_SKIP = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*')  # strings and comments
_DECL = re.compile(
    r"(?<![A-Za-z0-9_])(?:rule|pass|pipeline|import)(?![A-Za-z0-9_])"
    # `op Name(`: `op` is no keyword (`x.op` and a variable `op` stay valid), but a name
    # followed by another name and a bracket only starts an op declaration
    r"|(?<![A-Za-z0-9_.])op\s+[A-Za-z_][A-Za-z0-9_]*\s*\("
)
_NOT_BRACKET = re.compile(r"[^()\[\]]+")
_BRACKET = re.compile(r"[()\[\]]")
_STEP = {"(": 1, "[": 1, ")": -1, "]": -1}


#: Characters that reorder how text displays (Unicode's bidirectional controls): in a comment
#: or a string they can make code read differently from how it runs ("Trojan Source").
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def bidi_warnings(text: str, path: str) -> list[RuleError]:
    """A located warning for the first bidirectional control character of each line."""
    out, seen = [], set()
    for m in _BIDI.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if line in seen:
            continue
        seen.add(line)
        col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        name = unicodedata.name(m.group(), f"U+{ord(m.group()):04X}")
        out.append(RuleError(
            f"a bidirectional control character (U+{ord(m.group()):04X} {name}): the text may "
            "display in another order than it is read; remove it",
            Span(path, line, col, line, col + 1),
        ))
    return out


def _at(text: str, pos: int, span: Callable[..., Span]) -> Span:
    """The span of the one character at offset pos."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return span(line, col, line, col + 1)


def prescan(text: str, span: Callable[..., Span]) -> None:
    """Raise a located `RuleSyntaxError` if a declaration is longer than `MAX_DECL_CHARS` or
    brackets nest deeper than `MAX_DEPTH`; `span(line, col, end_line, end_col)` locates it."""
    blank = _SKIP.sub(lambda m: " " * len(m.group()), text)
    starts = [m.start() for m in _DECL.finditer(blank)] + [len(blank)]
    for start, end in zip([0, *starts], starts):
        if end - start > MAX_DECL_CHARS:
            raise RuleSyntaxError(
                f"this declaration is too long ({end - start} characters; at most "
                f"{MAX_DECL_CHARS} are allowed)",
                _at(text, start, span),
            )
    only = _NOT_BRACKET.sub("", blank)
    depths = itertools.accumulate(_STEP[c] for c in only)
    deep = next((i for i, d in enumerate(depths) if d > MAX_DEPTH), None)
    if deep is not None:
        pos = next(itertools.islice(_BRACKET.finditer(blank), deep, None)).start()
        while pos and (blank[pos - 1].isalnum() or blank[pos - 1] in "_?"):
            pos -= 1  # at the op or function the bracket opens, if any
        raise RuleSyntaxError(TOO_DEEP, _at(text, pos, span))


#: The escapes of string literals: the character after the backslash -> the one it stands for.
ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def unquote(token, span: Callable[..., Span]) -> str:
    """The text of a string literal; its only escapes are `\\"` `\\\\` `\\n` `\\t`."""
    body, out, i = token.value[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 1
            if body[i] not in ESCAPES:
                col = token.column + i  # the backslash: the quote is at token.column
                raise RuleSyntaxError(
                    f"unknown escape '\\{body[i]}' in a string; the escapes are "
                    '\\" \\\\ \\n \\t',
                    span(token.line, col, token.line, col + 2),
                )
            c = ESCAPES[body[i]]
        out.append(c)
        i += 1
    return "".join(out)


def quotable(path: str) -> bool:
    """May a syntax error quote this source? Not a file that is not named `.rules`: a mistaken
    `ngrules check ~/.ssh/id_rsa` must not print the key."""
    return path.startswith("<") or path.endswith(".rules")


def redacted(e: RuleSyntaxError) -> RuleSyntaxError:
    """The error's location without any of the text (message, source line) it quoted."""
    span = e.span and Span(e.span.file, e.span.line, e.span.col)
    return RuleSyntaxError(
        "not valid rules text (this is not a .rules file, so its text is not shown)", span
    )
