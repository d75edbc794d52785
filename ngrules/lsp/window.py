"""A small stand-in for a large document while its full analysis waits for the editor to pause.

A position query (hover, definition, completion) needs the declaration under the cursor, the
ops the file declares and the files it imports, not the other declarations. The window keeps
those lines and blanks every other one, so line numbers and columns stay those of the whole
document and parsing it costs milliseconds instead of seconds.
"""

from __future__ import annotations

import re

#: A declaration that starts a line (layout is free, but files are written this way).
_DECL = re.compile(r"(rule|pass|pipeline|import|op)\b")
#: Declarations every window keeps: what other declarations may name.
_KEPT = ("op", "import", "pass")


def window_text(text: str, line: int) -> str:
    """`text` with only the lines before the first declaration, the declaration covering
    `line` and every op, import and pass declaration left; the other lines are empty."""
    lines = text.split("\n")
    starts = [(i, m.group(1)) for i, ln in enumerate(lines) if (m := _DECL.match(ln))]
    keep = [False] * len(lines)
    for k, (start, keyword) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        if keyword in _KEPT or start <= line < end:
            keep[start:end] = [True] * (end - start)
    first = starts[0][0] if starts else len(lines)  # a header of comments, if anything
    keep[:first] = [True] * first
    return "\n".join(ln if k else "" for ln, k in zip(lines, keep))
