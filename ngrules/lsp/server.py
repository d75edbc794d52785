"""`ngrules lsp`: the language server, speaking LSP over stdio through pygls.

A thin adapter: every answer comes from `analysis.Document`, re-made from the document's text
on open and change, so the editor shows exactly what `ngrules check` reports. pygls is an
optional dependency (`pip install 'ngrules[lsp]'`), imported only when the server starts.
"""

from __future__ import annotations

from pathlib import Path

from ngrules.errors import NgrulesError
from ngrules.lsp.analysis import Document, Place
from ngrules.version import __version__

_SOURCE = "ngrules"


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


def build_server():
    """The pygls server with every feature registered (not started)."""
    types, LanguageServer = _require_pygls()
    server = LanguageServer("ngrules", __version__)
    docs: dict[str, Document] = {}

    def rng(p: Place):
        return types.Range(
            types.Position(p.line, p.col), types.Position(p.end_line, p.end_col)
        )

    def refresh(ls, uri: str) -> None:
        text = ls.workspace.get_text_document(uri).source
        doc = docs[uri] = Document(text, _path(uri))
        diagnostics = [
            types.Diagnostic(rng(d.place), d.message, types.DiagnosticSeverity.Error,
                             source=_SOURCE)
            for d in doc.diagnostics()
        ]
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
        )

    def document(ls, uri: str) -> Document:
        if uri not in docs:
            text = ls.workspace.get_text_document(uri).source
            docs[uri] = Document(text, _path(uri))
        return docs[uri]

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params):
        refresh(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params):
        refresh(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params):
        refresh(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params):
        docs.pop(params.text_document.uri, None)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls, params):
        pos = params.position
        text = document(ls, params.text_document.uri).hover(pos.line, pos.character)
        if text is None:
            return None
        content = types.MarkupContent(types.MarkupKind.Markdown, text)
        return types.Hover(contents=content)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls, params):
        pos = params.position
        found = document(ls, params.text_document.uri).definition(pos.line, pos.character)
        if found is None:
            return None
        return types.Location(_uri(found.path), rng(found))

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
        pos = params.position
        found = document(ls, params.text_document.uri).completions(pos.line, pos.character)
        items = [
            types.CompletionItem(label, kind=_KINDS[kind], detail=detail or None)
            for label, kind, detail in found
        ]
        return types.CompletionList(is_incomplete=False, items=items)

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls, params):
        doc = document(ls, params.text_document.uri)
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
        return [
            types.DocumentSymbol(s.name, _SYMBOLS.get(s.kind, types.SymbolKind.Object),
                                 rng(s.place), rng(s.name_place), detail=s.kind)
            for s in document(ls, params.text_document.uri).symbols()
        ]

    return server


def serve() -> None:
    """Run the server on stdin and stdout until the editor shuts it down."""
    build_server().start_io()
