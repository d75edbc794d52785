"""Every user-facing error in ngrules is an `NgrulesError`.

Errors that come from text a user wrote carry a `Span`, and render as
``path:line:col: error: message`` followed by the source line and a caret.
"""

from __future__ import annotations

from ngrules.records import frozen


@frozen
class Span:
    """A region of a source file; lines and columns count from 1."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0
    source_line: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def caret(self) -> str:
        """The source line with a caret under the span's start (empty if no source)."""
        if not self.source_line:
            return ""
        line = self.source_line.rstrip("\n")
        if len(line) > 200:  # keep enormous lines readable: show a window around the column
            start = max(0, self.col - 80)
            line, col = line[start : start + 160], self.col - start
        else:
            col = self.col
        prefix = "".join(c if c == "\t" else " " for c in line[: max(col - 1, 0)])
        width = 1
        if self.end_line == self.line and self.end_col > self.col:
            width = min(self.end_col - self.col, max(len(line) - col + 1, 1))
        return f"    {line}\n    {prefix}{'^' * width}"


def printable(text: object) -> str:
    """Text safe to print: every character that is not visible (controls, escapes, format
    characters such as the bidi overrides U+202E or U+2066, separators, unassigned code
    points) as a `\\uXXXX` escape, the rest as it is. For strings from files ngrules reads
    (a model's names, paths), which could otherwise reorder or hide what a terminal shows.
    Escaping twice changes nothing."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class NgrulesError(Exception):
    """Base class of every error ngrules reports to its users."""

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span

    def __str__(self) -> str:
        if self.span is None:
            return self.message
        text = f"{self.span}: error: {self.message}"
        caret = self.span.caret()
        return f"{text}\n{caret}" if caret else text


class AxesError(NgrulesError, ValueError):
    """Axes that do not fit together (a repeated name, two lengths for one name, ...).

    Also a ValueError, as ngraph raised for these cases, so `except ValueError` keeps working.
    """


class OpError(NgrulesError, ValueError):
    """An op used wrongly: unknown name, wrong arity or attributes, bad operand axes."""


class ExecutionError(NgrulesError, ValueError):
    """The executor could not run a graph (a missing feed, a wrong shape or dtype, no memory)."""


class GraphError(NgrulesError):
    """A graph that is not well formed."""


class GraphFileError(NgrulesError):
    """A graph file that cannot be read: bad JSON, a missing arrays file, an invalid node."""


class FileError(NgrulesError):
    """A file that cannot be read or written as asked (not a regular file, too large, a folder
    given as an output, an output that would overwrite an input)."""


class RuleError(NgrulesError):
    """A problem in a rules file, found while parsing or checking it."""


class RuleSyntaxError(RuleError):
    """Text that is not a well-formed rules file."""


class RuleErrors(RuleError):
    """Several rule errors found in one pass, reported together."""

    def __init__(self, errors: list[RuleError]):
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.message, first.span)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)
