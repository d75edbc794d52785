"""A document being typed is nearly always unfinished somewhere: its syntax errors are found
declaration by declaration, so one unfinished rule hides nothing else.

The text is cut where a line starts a declaration (`rule`, `pass`, `pipeline`, `import`, `op`
at the start of the line); each piece is parsed on its own, at its own lines. A piece that does
not parse gives its syntax error and is blanked (its lines kept, so every other position stays
where it is); the rest is checked as a whole, as `ngrules check` would check it.
"""

from __future__ import annotations

import re

from ngrules.errors import RuleError, RuleSyntaxError
from ngrules.lang.loader import check_text
from ngrules.lang.parser import parse
from ngrules.lang.syntax import RulesFile

_STARTS = re.compile(r"(rule|pass|pipeline|import|op)\b")


def pieces(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, end line) of each declaration's lines, 0-based, end exclusive."""
    starts = [i for i, line in enumerate(lines) if _STARTS.match(line)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return list(zip(starts, [*starts[1:], len(lines)]))


def check_recovering(text: str, path: str) -> tuple[list[RulesFile], list[RuleError]]:
    """`check_text`, but after a syntax error every other declaration is still checked and
    every piece's syntax error reported."""
    files, errors = check_text(text, path)
    if not any(isinstance(e, RuleSyntaxError) for e in errors):
        return files, errors
    lines = text.split("\n")
    broken: list[RuleError] = []
    kept = list(lines)
    for start, end in pieces(lines):
        piece = "\n" * start + "\n".join(lines[start:end])
        try:
            parse(piece, path)
        except RuleSyntaxError as e:
            broken.append(e)
            kept[start:end] = [""] * (end - start)
        except RuleError:  # not a syntax error: the whole-text check reports it
            continue
    files, others = check_text("\n".join(kept), path)
    return files, broken + [e for e in others if not isinstance(e, RuleSyntaxError)]
