"""`ngrules lsp`: the language server for `.rules` files, over stdio (needs `ngrules[lsp]`)."""

from __future__ import annotations

from ngrules.cli.common import add_command


def run(args) -> int:
    from ngrules.lsp.server import serve

    return serve()


def register(sub) -> None:
    p = add_command(
        sub,
        "lsp",
        run,
        "run the language server on stdin/stdout (for editors; needs pip install 'ngrules[lsp]')",
        "ngrules lsp   # started by the editor, e.g. editors/vscode",
        ops="explicit",
    )
    p.add_argument("--stdio", action="store_true", help="speak over stdio (the default; "
                   "accepted because editors pass it)")
