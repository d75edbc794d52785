"""Syntax highlighting of `.rules` text: a Pygments lexer, and coloured error snippets.

`NgrulesLexer` is registered with Pygments through the `pygments.lexers` entry point, so
```` ```ngrules ```` blocks in documentation and `pygmentize -l ngrules` highlight rules.
Pygments (`pip install 'ngrules[highlight]'`; pytest brings it too) is optional: without it
`highlight_line` returns the text unchanged and the command line prints plain snippets.
"""

from __future__ import annotations

from ngrules.lang.parser import KEYWORDS

_RED, _BOLD, _RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"

try:
    from pygments.lexer import RegexLexer, bygroups, words
    from pygments.token import (
        Comment,
        Keyword,
        Name,
        Number,
        Operator,
        Punctuation,
        String,
        Text,
    )
except ImportError:  # pragma: no cover - pygments comes with pytest, a core dependency
    RegexLexer = None


if RegexLexer is not None:

    class NgrulesLexer(RegexLexer):
        """`.rules` files: keywords, op names (capitalised calls), functions, attributes."""

        name = "ngrules"
        aliases = ["ngrules", "rules"]
        filenames = ["*.rules"]
        mimetypes = ["text/x-ngrules"]

        tokens = {
            "root": [
                (r"\s+", Text),
                (r"#.*$", Comment.Single),
                (r'"(\\.|[^"\\\n])*"', String.Double),
                # a declaration's name, and the colon that ends a rule's or pipeline's head
                (r"(rule|pass|pipeline|op)(\s+)([A-Za-z_]\w*)((?:\s+priority\s+-?[0-9]+)?)"
                 r"(\s*:)?",
                 bygroups(Keyword.Declaration, Text, Name.Function, Keyword, Punctuation)),
                (words(sorted(KEYWORDS), suffix=r"\b"), Keyword),
                (r"=>", Operator.Word),
                (r"\.\.\.", Punctuation),  # an elision in documentation examples
                (r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", Number),
                (r"(\.)([A-Za-z_]\w*)", bygroups(Punctuation, Name.Attribute)),
                (r"[A-Z]\w*(?=\??\()", Name.Class),  # an op: Dot(...), Broadcast?(...)
                (r"[a-z_]\w*(?=\()", Name.Builtin),  # a library function
                (r"(:)(\s*)([A-Za-z_]\w*)", bygroups(Punctuation, Text, Name.Class)),
                (r"[A-Za-z_]\w*", Name.Variable),
                (r"==|!=|<=|>=|[<>@+\-*/|&?=]", Operator),
                (r"[(),\[\]:]", Punctuation),
            ]
        }

else:  # pragma: no cover
    NgrulesLexer = None


def colour_wanted(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set or TERM is dumb."""
    import os

    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def highlight_line(text: str) -> str:
    """One line of rules text with terminal colours (unchanged without Pygments)."""
    if NgrulesLexer is None:  # pragma: no cover
        return text
    from pygments import highlight
    from pygments.formatters import TerminalFormatter

    return highlight(text, NgrulesLexer(), TerminalFormatter()).rstrip("\n")


def coloured_error(error) -> str:
    """An error as `str(error)` shows it, with the source highlighted and the caret in red."""
    span = getattr(error, "span", None)
    if span is None or not span.caret():
        return f"{_RED}{_BOLD}error:{_RESET} {error.message}" if span is None else str(error)
    source, caret = span.caret().split("\n")
    indent = len(source) - len(source.lstrip(" "))
    marks = caret.rstrip()
    return (
        f"{_BOLD}{span}:{_RESET} {_RED}{_BOLD}error:{_RESET} {error.message}\n"
        f"{source[:indent]}{highlight_line(source[indent:])}\n"
        f"{marks.rstrip('^')}{_RED}{_BOLD}{marks[len(marks.rstrip('^')):]}{_RESET}"
    )
