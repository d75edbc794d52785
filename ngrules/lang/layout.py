"""The layout of a formatted rules file: comments kept, blank lines kept, tables aligned.

The parser drops comments, so they are read back from the file's text and placed again: a
comment on its own line goes before the declaration that follows it, a comment at the end of
a line stays at the end of the corresponding line of its declaration. Consecutive one-line
rules form a table whose columns (name, pattern, replacement, comment) are aligned, as the
rule library writes them. A blank line in the source between two declarations is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ngrules.lang.formatter import WIDTH, format_decl, format_rule
from ngrules.lang.syntax import PassDecl, RuleDecl, RulesFile

COMMENT_GAP = "  "


def comments_of(text: str) -> list[tuple[int, str]]:
    """(line, comment text) for every `#` comment, skipping `#` inside string literals."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        in_string, escaped = False, False
        for col, ch in enumerate(line):
            if escaped:
                escaped = False
            elif ch == "\\" and in_string:
                escaped = True
            elif ch == '"':
                in_string = not in_string
            elif ch == "#" and not in_string:
                found.append((number, line[col:].rstrip()))
                break
    return found


@dataclass
class _Block:
    """One declaration with the comments and spacing that go with it."""

    decl: object
    leading: list[str] = field(default_factory=list)
    trailing: dict[int, str] = field(default_factory=dict)  # code line offset -> comment
    inner: list[tuple[int, str]] = field(default_factory=list)  # (before code line, comment)
    blank_before: bool = False
    blank_after_leading: bool = False


def _blocks(f: RulesFile) -> tuple[list[_Block], list[str]]:
    """Each declaration's comments and blank line; the comments after the last one."""
    lines = f.text.split("\n")
    blocks = [_Block(d) for d in f.decls]
    trailer: list[str] = []
    pending = iter(comments_of(f.text))
    comment = next(pending, None)
    previous_end = 0
    for block in blocks:
        span = block.decl.span
        start, end = (span.line, span.end_line or span.line) if span else (0, 0)
        own = []
        while comment is not None and comment[0] <= end:
            line, text = comment
            if line < start:
                own.append(line)
                block.leading.append(text)
            else:  # placed by code lines: comment-only and blank lines are not in the output
                offset = sum(1 for k in range(start, line) if _is_code(lines[k - 1]))
                if _is_code(lines[line - 1]):
                    block.trailing[offset] = text
                else:
                    block.inner.append((offset, text))
            comment = next(pending, None)
        first = min(own, default=start)
        block.blank_before = _blank_between(lines, previous_end, first)
        block.blank_after_leading = bool(own) and _blank_between(lines, max(own), start)
        previous_end = end
    while comment is not None:
        trailer.append(comment[1])
        comment = next(pending, None)
    return blocks, trailer


def _is_code(line: str) -> bool:
    """Whether a source line holds rule text (not only a comment or nothing)."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _blank_between(lines: list[str], after: int, before: int) -> bool:
    """Is there an empty line strictly between line numbers `after` and `before`?"""
    return any(not lines[i - 1].strip() for i in range(after + 1, before))


def _table_row(block: _Block) -> tuple[str, str, str] | None:
    """(head, pattern, replacement) of a rule that fits on one line with its comment (and has
    no comment line inside: joined, the comment would fall after it)."""

    decl = block.decl
    if not isinstance(decl, RuleDecl):
        return None
    format_decl(decl)  # the depth check
    if block.inner:
        return None
    comment = block.trailing.get(0, "")
    text = format_rule(decl, WIDTH - (len(comment) + len(COMMENT_GAP) if comment else 0))
    if "\n" in text:
        return None
    head, rest = text.split(": ", 1)
    pattern, body = rest.rsplit(" => ", 1) if " => " in rest else (rest, "")
    return f"{head}:", pattern, f"=> {body}"


def _aligned(rows: list[tuple[str, str, str]]) -> list[str]:
    head = max(len(r[0]) for r in rows)
    pattern = max(len(r[1]) for r in rows)
    return [f"{h:<{head}} {p:<{pattern}} {b}".rstrip() for h, p, b in rows]


def _with_comments(text_lines: list[str], block: _Block, width: int) -> list[str]:
    """The declaration's lines with its end-of-line comments, and its comment-only lines
    before the line of code they stood before (indented like it)."""
    out = list(text_lines)
    for offset, comment in block.trailing.items():
        at = min(offset, len(out) - 1)
        out[at] = f"{out[at]:<{width}}{COMMENT_GAP}{comment}"
    for offset, comment in reversed(block.inner):
        at = min(offset, len(out))
        near = out[min(at, len(out) - 1)]
        indent = near[: len(near) - len(near.lstrip())] or "    "
        out.insert(at, f"{indent}{comment}")
    return out


def format_rules(f: RulesFile) -> str:
    """The canonical text of a whole file, comments and blank lines included."""

    blocks, trailer = _blocks(f)
    out: list[str] = []
    i = 0
    while i < len(blocks):
        run = _table_run(blocks, i)
        texts = _aligned([_table_row(b) for b in run]) if run else None
        group = run or [blocks[i]]
        width = max(len(t) for t in texts) if texts else 0
        for k, block in enumerate(group):
            lines = [texts[k]] if texts else _decl_lines(block)
            if out and (block.blank_before or _needs_space(block, lines, out)):
                out.append("")
            out.extend(block.leading + [""] * block.blank_after_leading)
            out.extend(_with_comments(lines, block, width or len(lines[0])))
        i += len(group)
    if trailer:
        out.extend([""] * bool(out) + trailer)
    return "\n".join(out) + "\n" if out else ""


def _decl_lines(block: _Block) -> list[str]:
    """A declaration's lines; a rule too long for one line with its comment is split."""

    if isinstance(block.decl, RuleDecl) and _table_row(block) is None:
        return format_rule(block.decl, one_line_limit=0).split("\n")
    return format_decl(block.decl).split("\n")


def _table_run(blocks: list[_Block], start: int) -> list[_Block]:
    """The one-line rules from `start` that sit together (no blank line or comment between)."""
    run = []
    for k in range(start, len(blocks)):
        block = blocks[k]
        if _table_row(block) is None or (run and (block.blank_before or block.leading)):
            break
        run.append(block)
    return run


def _needs_space(block: _Block, lines: list[str], out: list[str]) -> bool:
    """A blank line before each pass and around rules of several lines."""
    if out[-1] == "":
        return False
    return isinstance(block.decl, PassDecl) or len(lines) > 1 or out[-1].startswith("    ")
