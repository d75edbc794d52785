// The ngrules extension: starts `ngrules lsp` (a language server over stdio) for .rules files.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace
    .getConfiguration("ngrules")
    .get("command", ["ngrules", "lsp"]);
  client = new LanguageClient(
    "ngrules",
    "ngrules",
    { command, args },
    { documentSelector: [{ scheme: "file", language: "ngrules" }] }
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
