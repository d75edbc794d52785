"""`ngrules lsp`: the language server, speaking LSP over stdio through pygls.

A thin adapter: every answer comes from `analysis.Document`, so the editor shows exactly what
`ngrules check` reports. What it adds, against a hostile or merely busy editor:

- **Debounced analysis, off the main loop.** A change only records the new text; the
  document is checked once the edits pause (`DEBOUNCE` seconds), only its latest version, in
  a child process (`background`) that a newer version kills: a burst of 200 edits costs one
  check, not 200, and requests are answered while it runs. Diagnostics carry their version.
- **Answers that never wait for stale work.** A position query on a large document uses a
  `window` of it around the cursor (milliseconds); a small one is checked on the spot.
- **Disk read only when asked, and bounded.** A document the editor has not opened is read only
  if it is a regular `file:` of at most `MAX_DOCUMENT_BYTES`; otherwise the request gets an
  InvalidParams error. A larger open document is not analysed (one diagnostic says why).
- **Columns in the negotiated encoding** (`positions`), and positions out of range answered
  (nothing there), not a traceback.

The main loop, framing and lifecycle are `session`'s. pygls is an optional dependency
(`pip install 'ngrules[lsp]'`), imported only when the server starts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote

from ngrules.errors import NgrulesError
from ngrules.lsp.analysis import Document, Place
from ngrules.lsp.background import Background
from ngrules.lsp.edits import protocol_class
from ngrules.lsp.positions import Columns
from ngrules.lsp.window import window_text
from ngrules.version import __version__

_SOURCE = "ngrules"
log = logging.getLogger("ngrules.lsp")
#: Seconds without edits before a changed document is analysed.
DEBOUNCE = 0.2
#: The largest document analysed, and read from disk when it is not open (bytes).
MAX_DOCUMENT_BYTES = 2 * 2**20
#: Documents this long are analysed on the spot when asked; longer ones get a window.
SMALL = 8000


def _require_pygls():
    try:
        from lsprotocol import types
        from pygls.lsp.server import LanguageServer
    except ImportError:
        raise NgrulesError(
            "the language server needs pygls: pip install 'ngrules[lsp]'"
        ) from None
    return types, LanguageServer


def _path(uri: str) -> str:
    from pygls.uris import to_fs_path

    return to_fs_path(uri) or uri


def _uri(path: str) -> str:
    return Path(path).resolve().as_uri()


def _read_document(uri: str) -> str:
    """A document the editor has not opened: a regular file of bounded size, or an error."""
    from pygls.exceptions import JsonRpcInvalidParams

    from ngrules.ir.fileio import read_regular

    if not uri.startswith("file:"):
        raise JsonRpcInvalidParams(f"{uri} is not open, and not a file: URI")
    try:
        return read_regular(_path(uri), MAX_DOCUMENT_BYTES).decode("utf-8")
    except (NgrulesError, OSError, UnicodeDecodeError) as e:
        why = e.message if isinstance(e, NgrulesError) else getattr(e, "strerror", None) or e
        raise JsonRpcInvalidParams(f"{uri} is not open and cannot be read: {why}") from None


class Documents:
    """The analyses of the open documents: the latest per document, the pending timers."""

    def __init__(self, server):
        self.server = server
        self.analysed: dict[str, tuple[str, Document]] = {}  # uri -> (text, analysis)
        self.windows: dict[str, tuple[str, str, Document]] = {}  # uri -> (text, window, doc)
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.background = Background()
        self.columns = Columns()

    def text(self, uri: str) -> tuple[str, int | None]:
        opened = self.server.workspace.text_documents.get(unquote(uri))  # pygls's keys
        if opened is not None:
            return opened.source, opened.version
        return _read_document(uri), None

    def full(self, uri: str) -> Document:
        """The analysis of the document's current text (made now if it is not there)."""
        text, _ = self.text(uri)
        cached = self.analysed.get(uri)
        if cached is None or cached[0] != text:
            cached = self.analysed[uri] = (text, _analyse(text, _path(uri)))
        return cached[1]

    def at(self, uri: str, line: int) -> Document:
        """What answers a query at `line`: the full analysis when it is current or cheap,
        else a window of the document around the line (the full check runs elsewhere)."""
        text, _ = self.text(uri)
        cached = self.analysed.get(uri)
        if cached is not None and cached[0] == text:
            return cached[1]
        if len(text) <= SMALL:
            return self.full(uri)
        window = window_text(text, line)
        found = self.windows.get(uri)
        if found is None or found[:2] != (text, window):
            found = self.windows[uri] = (text, window, _analyse(window, _path(uri)))
        return found[2]

    def changed(self, uri: str) -> None:
        """Analyse (and publish) once the edits pause; a newer edit restarts the wait and
        stops the check of an older version."""
        self.background.cancel(uri)
        pending = self.timers.pop(uri, None)
        if pending is not None:
            pending.cancel()
        loop = asyncio.get_running_loop()
        self.timers[uri] = loop.call_later(DEBOUNCE, self.publish, uri)

    def closed(self, uri: str) -> None:
        pending = self.timers.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self.analysed.pop(uri, None)
        self.windows.pop(uri, None)
        self.background.cancel(uri)

    def publish(self, uri: str) -> None:
        """Diagnose the current version in the background; publish if still current then."""
        self.timers.pop(uri, None)
        if unquote(uri) not in self.server.workspace.text_documents:
            return
        text, version = self.text(uri)
        lines, path = text.split("\n"), _path(uri)
        if _too_large(text):
            self._send(uri, version, lines, _TooLarge(path, len(text)).diagnostics())
            return
        self.background.start(uri, text, path,
                              lambda found: self._checked(uri, version, text, found))

    def _checked(self, uri: str, version, text: str, found) -> None:
        if found is None:
            log.warning("the check of %s failed", uri)
        elif unquote(uri) in self.server.workspace.text_documents and self.text(uri)[0] == text:
            self._send(uri, version, text.split("\n"), found)
        # else replaced while it was checked: the check of the new text is on its way

    def _send(self, uri: str, version, lines: list[str], found) -> None:
        types = _require_pygls()[0]
        path = _path(uri)
        diagnostics = [
            types.Diagnostic(self.range(lines, path, d.place), d.message,
                             types.DiagnosticSeverity.Warning if getattr(d, "warning", False)
                             else types.DiagnosticSeverity.Error, source=_SOURCE)
            for d in found
        ]
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    # -- positions ---------------------------------------------------------------------------
    def position(self, doc: Document, position) -> tuple[int, int] | None:
        """The client's position as (line, code-point column), or None past the last line."""
        line = position.line
        if not 0 <= line < len(doc.lines):
            return None
        return line, self.columns.to_points(doc.lines[line], position.character)

    def range(self, lines: list[str], path: str, place: Place):
        """A place as an LSP range; `lines` are those of the file at `path`."""
        types = _require_pygls()[0]
        lines = lines if place.path == path else _lines_of(place.path)

        def pos(line: int, col: int):
            text = lines[line] if 0 <= line < len(lines) else ""
            return types.Position(line, self.columns.to_client(text, col))

        return types.Range(pos(place.line, place.col), pos(place.end_line, place.end_col))


def _too_large(text: str) -> bool:
    return len(text) > MAX_DOCUMENT_BYTES or (
        len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES)


def _analyse(text: str, path: str) -> Document:
    return _TooLarge(path, len(text)) if _too_large(text) else Document(text, path)


class _TooLarge(Document):
    """A document too large to analyse: one diagnostic, no answers."""

    def __init__(self, path: str, size: int):
        super().__init__("", path)
        self.size = size

    def diagnostics(self):
        from ngrules.lsp.analysis import Diagnostic

        why = f"this document is too large to check ({self.size} characters; the limit is "
        return [Diagnostic(why + f"{MAX_DOCUMENT_BYTES} bytes)", Place(self.path, 0, 0, 0, 0))]


def _lines_of(path: str) -> list[str]:
    """Another file's lines, to convert a definition's columns (none if it cannot be read)."""
    from ngrules.ir.fileio import read_regular

    try:
        return read_regular(path, MAX_DOCUMENT_BYTES).decode("utf-8").split("\n")
    except (NgrulesError, OSError, UnicodeDecodeError):
        return []


def build_server():
    """The pygls server with every feature registered (not started)."""
    types, LanguageServer = _require_pygls()
    server = LanguageServer("ngrules", __version__, protocol_cls=protocol_class())
    docs = Documents(server)
    server.ngrules_documents = docs

    @server.feature(types.INITIALIZED)
    def initialized(ls, params):
        docs.columns = Columns(ls.workspace.position_encoding or "utf-16")

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params):
        docs.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params):
        docs.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params):
        docs.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params):
        docs.closed(params.text_document.uri)

    def located(params):
        """(document, line, column) for a position query, or None when nothing is there."""
        uri = params.text_document.uri
        doc = docs.at(uri, params.position.line)
        at = docs.position(doc, params.position)
        return None if at is None else (doc, *at)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls, params):
        found = located(params)
        text = found[0].hover(*found[1:]) if found else None
        if text is None:
            return None
        return types.Hover(contents=types.MarkupContent(types.MarkupKind.Markdown, text))

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls, params):
        found = located(params)
        place = found[0].definition(*found[1:]) if found else None
        if place is None:
            return None
        return types.Location(_uri(place.path), docs.range(found[0].lines, found[0].path, place))

    _KINDS = {
        "op": types.CompletionItemKind.Class,
        "function": types.CompletionItemKind.Function,
        "keyword": types.CompletionItemKind.Keyword,
        "attribute": types.CompletionItemKind.Property,
        "kind": types.CompletionItemKind.TypeParameter,
    }

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."])
    )
    def completion(ls, params):
        found = located(params)
        items = [
            types.CompletionItem(label, kind=_KINDS[kind], detail=detail or None)
            for label, kind, detail in (found[0].completions(*found[1:]) if found else [])
        ]
        return types.CompletionList(is_incomplete=False, items=items)

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls, params):
        doc = docs.full(params.text_document.uri)
        text = doc.formatted()
        if text is None or text == doc.text:
            return []
        end = types.Position(len(doc.lines), 0)
        return [types.TextEdit(types.Range(types.Position(0, 0), end), text)]

    _SYMBOLS = {
        "pass": types.SymbolKind.Namespace,
        "rule": types.SymbolKind.Function,
        "pipeline": types.SymbolKind.Event,
        "op": types.SymbolKind.Operator,
    }

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls, params):
        doc = docs.full(params.text_document.uri)

        def symbol(s) -> types.DocumentSymbol:
            """A pass with its rules as children, its range reaching its last rule's end (the
            protocol wants a parent's range to hold its children's)."""
            place = s.place
            if s.children:
                last = s.children[-1].place
                place = replace(place, end_line=last.end_line, end_col=last.end_col)
            return types.DocumentSymbol(
                s.name, _SYMBOLS.get(s.kind, types.SymbolKind.Object),
                docs.range(doc.lines, doc.path, place),
                docs.range(doc.lines, doc.path, s.name_place),
                detail=s.kind, children=[symbol(c) for c in s.children] or None)

        return [symbol(s) for s in doc.symbol_tree()]

    return server


def serve(reader: BinaryIO | None = None, writer: BinaryIO | None = None) -> int:
    """Run the server on stdin and stdout until the editor shuts it down; the exit code
    (0 after shutdown and exit, 1 when the editor left without a shutdown)."""
    import sys

    from ngrules.lsp.session import Session, quiet_logging

    quiet_logging()
    server = build_server()
    # the raw stdin: the reader thread blocked in it at exit holds no buffer's lock
    try:
        return Session(server, reader or sys.stdin.buffer.raw, writer or sys.stdout.buffer).run()
    finally:  # the analyses still running are stale: ended here, not by the exit's SIGTERM
        server.ngrules_documents.background.close()
