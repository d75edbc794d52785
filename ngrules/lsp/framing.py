"""LSP's base protocol (`Content-Length: N` headers, then N bytes of JSON) read defensively.

An editor, or anything else writing to the server's stdin, may send a length too large to
allocate, a 26-digit length, a header with no length, a length that does not match its
body, or plain garbage. Each ends in a `BadFrame` saying what was skipped, and reading goes
on at the next header: the stream resynchronises.

A wrong length is noticed without waiting: a JSON body cannot contain a raw line
`Content-Length: <digits>` (JSON strings escape their line breaks), so such a line inside the
bytes a length claims is the next message's header, and the message before it was short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO

#: The largest message body accepted (a document of this size is far beyond any rules file).
MAX_BODY = 16 * 2**20
#: The longest header block accepted.
MAX_HEADER = 4096
_CHUNK = 65536

_START = re.compile(rb"content-length:", re.IGNORECASE)
_FIELD = re.compile(rb"[A-Za-z0-9-]+:[^\r\n]*")
_NEXT = re.compile(rb"content-length:[ \t]*[0-9]+[ \t]*\r?\n", re.IGNORECASE)
_PREFIX = b"content-length:"
_PARTIAL = re.compile(rb"content-length:[ \t]*[0-9]*\r?")
_LENGTH = re.compile(rb"[ \t]*([0-9]+)[ \t]*")


@dataclass(frozen=True)
class BadFrame:
    """Bytes that were not a well-framed message, skipped; `reason` says how they failed."""

    reason: str


class Framer:
    """Message bodies from a byte stream: a raw file (whose `read` returns what is available)
    or anything with `read1`."""

    def __init__(self, stream: BinaryIO, max_body: int = MAX_BODY):
        self.stream, self.max_body = stream, max_body
        self.buf = bytearray()
        self.eof = False

    def _fill(self) -> bool:
        """Read what is available (blocking only when nothing is); False at the end."""
        if self.eof:
            return False
        read = getattr(self.stream, "read1", None) or self.stream.read  # raw files: read
        chunk = read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def next(self) -> bytes | BadFrame | None:
        """The next message body, a BadFrame, or None when the stream has ended."""
        skipped = self._to_header()
        if skipped:
            return BadFrame(f"skipped {skipped} bytes that are not a message header")
        if not self.buf:
            return None
        header = self._header()
        if isinstance(header, BadFrame):
            return header
        fields, body_start = header
        length = _content_length(fields, self.max_body)
        if isinstance(length, BadFrame):
            return self._drop_header(length.reason)
        return self._body(body_start, length)

    def _header(self) -> tuple[bytes, int] | BadFrame:
        """The header block's lines and where its body starts, read line by line: a line
        that is not `Name: value` ends it as a BadFrame (the next header may start there)."""
        pos = 0
        while True:
            newline = self.buf.find(b"\n", pos)
            if newline < 0:
                if len(self.buf) > MAX_HEADER:
                    return self._drop_header(f"a header block longer than {MAX_HEADER} bytes")
                if not self._fill():
                    return self._drop_header("a header block with no end")
                continue
            line = bytes(self.buf[pos:newline]).rstrip(b"\r")
            if not line:
                return bytes(self.buf[:pos]), newline + 1
            if newline > MAX_HEADER:
                return self._drop_header(f"a header block longer than {MAX_HEADER} bytes")
            if not _FIELD.fullmatch(line):
                return self._drop_header(f"a header line that is not `Name: value`: {_shown(line)}")
            pos = newline + 1

    def _to_header(self) -> int:
        """Drop everything before the next `Content-Length:`; how many non-blank bytes went."""
        dropped = 0
        while True:
            found = _START.search(self.buf)
            if found is not None:
                dropped += len(bytes(self.buf[: found.start()]).strip())
                del self.buf[: found.start()]
                return dropped
            keep = len(_START.pattern) - 1  # a header split across two reads
            cut = max(0, len(self.buf) - keep)
            dropped += len(bytes(self.buf[:cut]).strip())
            del self.buf[:cut]
            if not self._fill():
                dropped += len(bytes(self.buf).strip())
                self.buf.clear()
                return dropped

    def _drop_header(self, reason: str) -> BadFrame:
        """Skip this header's `Content-Length:`: the search for the next one resumes after it
        (what follows, if not a header, is skipped as such)."""
        del self.buf[: len(_START.pattern)]
        return BadFrame(reason)

    def _body(self, start: int, length: int) -> bytes | BadFrame:
        """`length` bytes from `start`, unless the next header starts inside them."""
        end, scanned = start + length, start
        while True:
            found = _NEXT.search(self.buf, max(start, scanned - MAX_HEADER), end + MAX_HEADER)
            if found is not None and found.start() < end:
                del self.buf[: found.start()]
                return BadFrame(f"a message shorter than its Content-Length {length}")
            if len(self.buf) >= end and (self.eof or not self._undecided(end)):
                body = bytes(self.buf[start:end])
                del self.buf[:end]
                return body
            scanned = len(self.buf)
            if not self._fill() and len(self.buf) < end:
                self.buf.clear()
                return BadFrame(f"the stream ended inside a message of {length} bytes")

    def _undecided(self, end: int) -> bool:
        """Whether the claimed body ends inside what may be the first line of the next
        header (`...}Content-Le`), with the rest of that line not read yet."""
        if self.buf.find(b"\n", end) >= 0 or len(self.buf) - end > MAX_HEADER:
            return False  # were it a header, `_NEXT` would have found it
        tail = bytes(self.buf[max(0, end - 40) : end]).lower()
        return any(_PREFIX.startswith(tail[i:]) or _PARTIAL.fullmatch(tail[i:])
                   for i in range(len(tail)))


def _content_length(header: bytes, limit: int) -> int | BadFrame:
    """The header block's Content-Length, if it is a whole number within the limit."""
    value = None
    for line in header.splitlines():
        name, colon, rest = line.partition(b":")
        if colon and name.strip().lower() == b"content-length":
            value = rest
    if value is None:
        return BadFrame("a header block without Content-Length")
    digits = _LENGTH.fullmatch(value)
    if digits is None:
        return BadFrame(f"Content-Length {_shown(value)} is not a whole number of bytes")
    length = int(digits.group(1))
    if length > limit:
        return BadFrame(f"Content-Length {length} is more than the limit of {limit} bytes")
    return length


def _shown(value: bytes) -> str:
    text = value.strip().decode("ascii", "replace")
    return repr(text if len(text) <= 40 else text[:40] + "...")
