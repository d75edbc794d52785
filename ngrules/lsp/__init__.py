"""The language server (`ngrules lsp`): the checker's diagnostics, hovers and definitions in
any editor that speaks LSP. Needs only the language and IR layers; pygls is optional."""
