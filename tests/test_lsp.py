"""`ngrules lsp`, driven over stdio with LSP JSON-RPC as an editor would drive it."""

import json
import queue
import shutil
import subprocess
import threading

import pytest

pytest.importorskip("pygls")

TYPO = """\
pass simplify
rule r: Mul(x, 1) => x
"""

GOOD = """\
pass simplify
rule sum_neg:
    s @ Sum(n)
    where n = Negative(x)
    => -Sum(x, reduction_axes=s.reduction_axes)
pipeline cpu: simplify
"""


class Client:
    """A minimal LSP client: Content-Length framing, requests by id, notifications queued."""

    def __init__(self, cwd):
        exe = shutil.which("ngrules")
        assert exe, "the ngrules console script is installed with the package"
        self.proc = subprocess.Popen(
            [exe, "lsp"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.next_id = 0
        self.inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                key, _, value = line.decode().partition(":")
                if key.lower() == "content-length":
                    length = int(value)
            self.inbox.put(json.loads(out.read(length)))

    def send(self, message):
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def wait_for(self, test, timeout=30):
        while True:
            message = self.inbox.get(timeout=timeout)
            if "id" in message and "method" in message:  # a request from the server
                self.send({"id": message["id"], "result": None})
            elif test(message):
                return message

    def request(self, method, params):
        self.next_id += 1
        ident = self.next_id
        self.send({"id": ident, "method": method, "params": params})
        reply = self.wait_for(lambda m: m.get("id") == ident and "method" not in m)
        assert "error" not in reply, reply
        return reply["result"]

    def notify(self, method, params):
        self.send({"method": method, "params": params})

    def close(self):
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One server for the module (each test opens its own documents)."""
    root = tmp_path_factory.mktemp("workspace")
    c = Client(root)
    result = c.request(
        "initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}
    )
    assert result["capabilities"]["hoverProvider"]
    c.notify("initialized", {})
    yield c
    c.close()


def open_doc(client, path, text):
    path.write_text(text)
    uri = path.as_uri()
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "ngrules", "version": 1, "text": text}},
    )
    return uri


def diagnostics_for(client, uri):
    message = client.wait_for(
        lambda m: m.get("method") == "textDocument/publishDiagnostics"
        and m["params"]["uri"] == uri
    )
    return message["params"]["diagnostics"]


def at(uri, line, character):
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def test_a_typo_is_a_diagnostic_with_the_checkers_range_and_message(client, tmp_path):
    uri = open_doc(client, tmp_path / "bad.rules", TYPO)
    [diag] = diagnostics_for(client, uri)
    # `ngrules check` prints: bad.rules:2:9: error: unknown op 'Mul' (did you mean 'Multiply'?)
    checked = subprocess.run(
        [shutil.which("ngrules"), "check", "bad.rules"], cwd=tmp_path, capture_output=True,
        text=True,
    )
    assert f"bad.rules:2:9: error: {diag['message']}" in checked.stderr
    assert diag["message"] == "unknown op 'Mul' (did you mean 'Multiply'?)"
    assert diag["range"] == {"start": {"line": 1, "character": 8},
                             "end": {"line": 1, "character": 11}}
    assert diag["severity"] == 1


def test_a_change_that_fixes_the_typo_clears_the_diagnostics(client, tmp_path):
    uri = open_doc(client, tmp_path / "bad.rules", TYPO)
    assert diagnostics_for(client, uri)
    fixed = TYPO.replace("Mul(", "Multiply(")
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]},
    )
    assert diagnostics_for(client, uri) == []


def test_hover_on_an_op_gives_its_signature_and_axes_rule(client, tmp_path):
    uri = open_doc(client, tmp_path / "good.rules", GOOD)
    assert diagnostics_for(client, uri) == []
    hover = client.request("textDocument/hover", at(uri, 2, 10))  # on `Sum`
    text = hover["contents"]["value"]
    assert "Sum(x, reduction_axes: axes)" in text and "less `reduction_axes`" in text
    variable = client.request("textDocument/hover", at(uri, 3, 23))  # `x` in the where
    assert "pattern variable" in variable["contents"]["value"]


def test_definition_of_a_where_name_and_of_a_pass(client, tmp_path):
    uri = open_doc(client, tmp_path / "good.rules", GOOD)
    diagnostics_for(client, uri)
    found = client.request("textDocument/definition", at(uri, 2, 13))  # `n` in Sum(n)
    assert found["uri"] == uri and found["range"]["start"] == {"line": 3, "character": 10}
    found = client.request("textDocument/definition", at(uri, 5, 15))  # simplify in pipeline
    assert found["range"]["start"] == {"line": 0, "character": 5}


def test_completion_symbols_and_formatting(client, tmp_path):
    uri = open_doc(client, tmp_path / "good.rules", GOOD)
    diagnostics_for(client, uri)
    items = client.request("textDocument/completion", at(uri, 4, 36))  # after `s.`
    labels = {i["label"] for i in items["items"]}
    assert "reduction_axes" in labels and "Multiply" not in labels
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert [(s["name"], s["detail"], [c["name"] for c in s.get("children") or ()])
            for s in symbols] == [("simplify", "pass", ["sum_neg"]), ("cpu", "pipeline", [])]
    outer, inner = symbols[0]["range"], symbols[0]["children"][0]["range"]
    assert outer["start"]["line"] <= inner["start"]["line"] <= inner["end"]["line"] \
        <= outer["end"]["line"]  # a pass's range holds its rules'
    messy = "pass   simplify\nrule r:x*1=>x\n"
    uri = open_doc(client, tmp_path / "messy.rules", messy)
    diagnostics_for(client, uri)
    [edit] = client.request(
        "textDocument/formatting",
        {"textDocument": {"uri": uri}, "options": {"tabSize": 4, "insertSpaces": True}},
    )
    assert edit["newText"] == "pass simplify\nrule r: x * 1 => x\n"


def test_definitions_of_imports_variables_lets_and_pipelines(tmp_path):
    from ngrules.lsp.analysis import Document

    (tmp_path / "lib.rules").write_text("pass shared\nrule r: Log(Exp(a)) => a\n")
    text = (
        'import "lib.rules"\n'
        "pass mine\n"
        "rule q: s @ Sum(x)\n"
        "    let r = s.reduction_axes\n"
        "    => Sum(x, reduction_axes=r)\n"
        "pipeline cpu: shared, mine\n"
    )
    doc = Document(text, str(tmp_path / "main.rules"))
    assert doc.diagnostics() == []
    imported = doc.definition(0, 10)
    assert imported.path == str(tmp_path / "lib.rules") and imported.line == 0
    assert (doc.definition(4, 11).line, doc.definition(4, 11).col) == (2, 16)  # x
    assert (doc.definition(4, 29).line, doc.definition(4, 29).col) == (3, 8)  # let r
    shared = doc.definition(5, 16)  # a pass of the imported file
    assert shared.path.endswith("lib.rules") and (shared.line, shared.col) == (0, 5)
    assert "a value computed by `let`" in doc.hover(4, 29)
    assert "pure function" in Document("rule r: Exp(x) if len(x.axes) > 0 => x", "t.rules").hover(
        0, 19)
    assert [s.kind for s in doc.symbols()] == ["pass", "rule", "pipeline"]
    (tmp_path / "lib.rules").write_text("pass shared\nrule r: Log(Exq(a)) => a\n")
    [problem] = Document(text, str(tmp_path / "main.rules")).diagnostics()
    assert problem.place.line == 0 and problem.message.endswith(
        "lib.rules:2:13: unknown op 'Exq' (did you mean 'Exp'?)")


def test_a_short_name_is_found_as_a_word_not_inside_its_keyword():
    from ngrules.lsp.analysis import Document

    text = (
        "pass a\n"
        "rule q: s @ Sum(e)\n"
        "    where e = Negative(x)\n"
        "    let t = s.reduction_axes\n"
        "    => -Sum(x, reduction_axes=t)\n"
        "pipeline p: a\n"
    )
    doc = Document(text, "t.rules")
    assert doc.diagnostics() == []
    assert [(s.name, s.name_place.col) for s in doc.symbols()] == [("a", 5), ("q", 5), ("p", 9)]
    assert (doc.definition(5, 12).line, doc.definition(5, 12).col) == (0, 5)  # pass a
    assert (doc.definition(1, 16).line, doc.definition(1, 16).col) == (2, 10)  # where e
    assert (doc.definition(4, 30).line, doc.definition(4, 30).col) == (3, 8)  # let t


def test_a_problem_two_imports_away_is_shown_on_the_import_that_leads_to_it(tmp_path):
    """As `ngrules check` reports it; the editor once showed nothing."""
    from ngrules.lsp.analysis import Document

    (tmp_path / "c.rules").write_text("pass c\nrule r: Exq(x) => x\n")
    (tmp_path / "b.rules").write_text('import "c.rules"\npass b\n')
    (tmp_path / "ok.rules").write_text("pass ok\n")
    text = 'import "ok.rules"\nimport "b.rules"\npass a\n'
    [problem] = Document(text, str(tmp_path / "a.rules")).diagnostics()
    assert problem.place.line == 1
    assert problem.message.endswith("c.rules:2:9: unknown op 'Exq' (did you mean 'Exp'?)")
