"""Columns as the client counts them <-> columns as Python counts them (code points).

LSP counts a column in UTF-16 code units unless client and server agree on another encoding
at `initialize` (`positionEncoding`: "utf-8" bytes or "utf-32" code points). `analysis`
works in code points, so every position is converted on the way in and out: after an emoji
or a CJK character the two counts differ.
"""

from __future__ import annotations

_CODECS = {"utf-16": ("utf-16-le", 2), "utf-8": ("utf-8", 1)}


class Columns:
    """Conversions for one negotiated encoding ("utf-16", "utf-8" or "utf-32")."""

    def __init__(self, encoding="utf-16"):
        name = getattr(encoding, "value", encoding)  # lsprotocol's enum, or its string
        self.codec = _CODECS.get(str(name))  # None: code points already

    def to_points(self, line: str, col: int) -> int:
        """The code-point column of client column `col` on `line`, clamped to the line (the
        specification's rule for a column past its end)."""
        if self.codec is None or line.isascii():
            return max(0, min(col, len(line)))
        codec, width = self.codec
        units = 0
        for i, ch in enumerate(line):
            if units >= col:
                return i
            units += len(ch.encode(codec, "surrogatepass")) // width
        return len(line)

    def to_client(self, line: str, col: int) -> int:
        """The client column of code-point column `col` on `line`."""
        if self.codec is None or line.isascii():
            return col
        codec, width = self.codec
        return len(line[:col].encode(codec, "surrogatepass")) // width
