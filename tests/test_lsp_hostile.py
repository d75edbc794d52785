"""The language server against hostile traffic and a busy editor (issue 25): framing guarded
and resynchronised, every request answered, edits debounced, bounded disk reads, UTF-16
columns, the shutdown/exit lifecycle, and a fuzz of malformed messages."""

import io
import json
import os
import random
import threading
import time

import pytest
from test_lsp import Client, at

from ngrules.lsp.framing import MAX_BODY, BadFrame, Framer
from ngrules.lsp.positions import Columns
from ngrules.lsp.window import window_text

pytest.importorskip("pygls")

RULES = "pass p\nrule r: Log(Exp(x)) => x\n"


def frame(body: bytes, length: int | None = None) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


def messages(data: bytes) -> list:
    framer, out = Framer(io.BytesIO(data)), []
    while (item := framer.next()) is not None:
        out.append(item)
    return out


# -- framing, on bytes -----------------------------------------------------------------------------
GOOD = b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}'


@pytest.mark.parametrize(
    "bad, reason",
    [
        (b"Content-Length: 1000000000000\r\n\r\n", "more than the limit of"),
        (b"Content-Length: 12345678901234567890123456\r\n\r\n", "more than the limit of"),
        (b"Content-Length: 12e3\r\n\r\n", "is not a whole number of bytes"),
        (b"Content-Length: -5\r\n\r\n", "is not a whole number of bytes"),
        (b"Content-Length:\r\nContent-Type: x\r\n\r\n", "is not a whole number"),
        (frame(b'{"jsonrpc": "2.0", "meth', 500), "a message shorter than its Content-Length"),
        (b"GET / HTTP/1.1\r\n\r\n", "bytes that are not a message header"),
        (b"Content-Length: 5\r\n" + b"X-Pad: y\r\n" * 600, "a header block longer than"),
    ],
)
def test_a_bad_frame_is_skipped_and_the_next_message_read(bad, reason):
    items = messages(bad + frame(GOOD))
    assert items[-1] == GOOD
    assert all(isinstance(i, BadFrame) for i in items[:-1]) and items[:-1]
    assert reason in items[0].reason


def test_a_length_too_short_leaves_a_tail_that_is_skipped():
    items = messages(frame(GOOD, 10) + frame(GOOD))
    assert items[0] == GOOD[:10] and isinstance(items[1], BadFrame) and items[2] == GOOD


def test_the_end_of_the_stream_inside_a_message_or_a_header_is_a_bad_frame_then_the_end():
    assert [type(i) for i in messages(frame(GOOD, 100))] == [BadFrame]
    assert [type(i) for i in messages(b"Content-Length: 3\r\n")] == [BadFrame, BadFrame]
    assert messages(b"") == [] and messages(b"\r\n \r\n") == []


def test_messages_split_into_one_byte_reads_are_read_whole():
    class Trickle(io.BytesIO):
        def read1(self, n=-1):
            return super().read1(1)

    data = frame(GOOD) * 3
    assert messages_from(Trickle(data)) == [GOOD] * 3


def messages_from(stream) -> list:
    framer, out = Framer(stream), []
    while (item := framer.next()) is not None:
        out.append(item)
    return out


def test_the_body_limit_is_the_documented_one():
    assert MAX_BODY == 16 * 2**20
    assert messages(frame(b"x" * 10, 11 + MAX_BODY))[0].reason.endswith(f"{MAX_BODY} bytes")


# -- columns and windows ---------------------------------------------------------------------------
def test_utf16_columns_count_an_emoji_as_two_units():
    line = 'import "😀é.rules"'
    utf16, utf8, points = Columns("utf-16"), Columns("utf-8"), Columns("utf-32")
    end = len(line)
    assert utf16.to_client(line, end) == end + 1 and utf8.to_client(line, end) == end + 4
    assert points.to_client(line, end) == end
    for columns in (utf16, utf8, points):
        assert columns.to_points(line, columns.to_client(line, 10)) == 10
    assert utf16.to_points(line, 10_000) == end and utf16.to_points("abc", 99) == 3


def test_a_window_keeps_the_declaration_under_the_cursor_and_what_others_name():
    text = "# head\nop Sq(x) = x * x\npass a\nrule r1: Exp(x)\n    => x\nrule r2: Log(x) => x\n"
    lines = window_text(text, 4).split("\n")
    assert lines[:5] == text.split("\n")[:5] and lines[5] == ""
    assert len(lines) == len(text.split("\n"))


def test_edits_apply_as_pygls_applies_them_in_utf16_columns():
    """`edits.apply_change` splices where pygls's line-by-line rewrite would put the text."""
    from lsprotocol import types
    from pygls.workspace import TextDocument

    from ngrules.lsp.edits import apply_change

    rng = random.Random(7)
    alphabet = ["a", "b", " ", "\n", "😀", "é", "Exp(x)"]
    text = "".join(rng.choice(alphabet) for _ in range(200))
    for _ in range(300):
        lines = text.split("\n")
        line = rng.randrange(len(lines))
        other = rng.randrange(line, len(lines))
        units = [len(ln.encode("utf-16-le")) // 2 for ln in (lines[line], lines[other])]
        start = types.Position(line, rng.randrange(units[0] + 1))
        end = types.Position(other, rng.randrange(units[1] + 1) if other > line else
                             rng.randrange(start.character, units[1] + 1))
        new = "".join(rng.choice(alphabet) for _ in range(rng.randrange(4)))
        change = types.TextDocumentContentChangePartial(types.Range(start, end), new)
        reference = TextDocument("file:///t.rules", text)
        reference.apply_change(change)
        text = apply_change(text, change, Columns("utf-16"))
        assert text == reference.source


# -- the server, over stdio ------------------------------------------------------------------------
class Drained(Client):
    """A client that keeps reading the server's stderr (a full pipe would stall the server)."""

    def __init__(self, cwd):
        super().__init__(cwd)
        self.err: list[bytes] = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def stderr(self) -> str:
        self.proc.wait(10)
        time.sleep(0.1)
        return b"".join(self.err).decode()

    def said(self, text: str, seconds: float = 30) -> str:
        """The server's stderr once it holds `text` (its reader thread may lag behind stdout's
        replies on a loaded machine), or as it is after `seconds`."""
        deadline = time.monotonic() + seconds
        while text not in (said := b"".join(self.err).decode()) and time.monotonic() < deadline:
            time.sleep(0.01)
        return said


def started(folder, capabilities=None) -> Drained:
    c = Drained(folder)
    c.request("initialize", {"processId": None, "rootUri": folder.as_uri(),
                             "capabilities": capabilities or {}})
    c.notify("initialized", {})
    return c


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the tests that leave it running; the last checks its stderr."""
    c = started(tmp_path_factory.mktemp("hostile"))
    yield c
    if c.proc.poll() is None:
        c.proc.kill()
    c.proc.wait(10)


def ask(client, ident, method, params):
    client.send({"id": ident, "method": method, "params": params})
    return client.wait_for(lambda m: m.get("id") == ident and "method" not in m)


def published_for(message, uri) -> bool:
    return (message.get("method") == "textDocument/publishDiagnostics"
            and message["params"]["uri"] == uri)


def opened(client, path, text, version=1):
    path.write_text(text)
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": path.as_uri(), "languageId": "ngrules", "version": version, "text": text}})
    return path.as_uri()


def test_huge_and_26_digit_lengths_and_a_wrong_one_leave_the_server_answering(server, tmp_path):
    uri = opened(server, tmp_path / "a.rules", RULES)
    for bad in (b"Content-Length: 1000000000000\r\n\r\n",
                b"Content-Length: 12345678901234567890123456\r\n\r\n",
                frame(b'{"jsonrpc": "2.0", "id": 1, "method": "textDocument/hov', 900)):
        server.proc.stdin.write(bad)
        hover = server.request("textDocument/hover", at(uri, 1, 14))  # on `Exp`
        assert "e ** x" in hover["contents"]["value"]
    expected = "bad message framing: Content-Length 12345678901234567890123456 is more"
    assert expected in server.said(expected)


@pytest.mark.parametrize(
    "body, code",
    [
        (b"{not json", -32700),
        (b'[{"jsonrpc": "2.0", "id": 3, "method": "shutdown"}]', -32600),
        (b'{"jsonrpc": "1.0", "id": 3, "method": "shutdown"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 3, "method": 7}', -32600),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": 5}', -32602),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "no/such"}', -32601),
    ],
)
def test_every_bad_request_gets_a_protocol_error(server, body, code):
    server.proc.stdin.write(frame(body))
    server.proc.stdin.flush()
    reply = server.wait_for(lambda m: "error" in m and m.get("id") in (3, None))
    assert reply["error"]["code"] == code


def test_positions_out_of_range_are_answered(server, tmp_path):
    uri = opened(server, tmp_path / "a.rules", RULES)
    assert server.request("textDocument/hover", at(uri, 99, 0)) is None
    assert server.request("textDocument/definition", at(uri, 99, 0)) is None
    assert server.request("textDocument/completion", at(uri, 99, 0))["items"] == []
    past = server.request("textDocument/hover", at(uri, 1, 10_000))  # clamped: the line's end
    assert "pattern variable" in past["contents"]["value"]
    reply = ask(server, "neg", "textDocument/hover", at(uri, -1, 0))
    assert reply["error"]["code"] == -32602


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_document_not_open_is_read_only_from_a_regular_file(server, tmp_path, target):
    if target == "fifo":
        target = str(tmp_path / "f.rules")
        os.mkfifo(target)
    reply = ask(server, "z", "textDocument/hover",
                {"textDocument": {"uri": f"file://{target}"}, "position": {"line": 0,
                                                                          "character": 0}})
    assert reply["error"]["code"] == -32602 and "not a regular file" in reply["error"]["message"]
    (tmp_path / "closed.rules").write_text(RULES)  # a regular file is fine
    assert server.request("textDocument/hover", at((tmp_path / "closed.rules").as_uri(), 1, 14))


def test_an_open_document_is_answered_from_the_editors_text_not_the_disk(server, tmp_path):
    folder = tmp_path / "my rules"  # a space: the URI quotes it, pygls's keys do not
    folder.mkdir()
    uri = opened(server, folder / "a.rules", "pass p\n")
    (folder / "a.rules").write_text("pass p\n")  # the disk keeps the old text
    edit = {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}},
            "text": "rule r: Log(Exp(x)) => x\n"}
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [edit]})
    assert "%20" in uri and "e ** x" in server.request(
        "textDocument/hover", at(uri, 1, 14))["contents"]["value"]


def test_columns_are_utf16_units_unless_negotiated(server, tmp_path):
    text = 'import "😀.rules"\npass p\n'
    for offered, unit in ((None, "utf-16"), (["utf-32", "utf-16"], "utf-32")):
        c = server if offered is None else Drained(tmp_path)
        if offered is not None:
            result = c.request("initialize", {"processId": None, "rootUri": None, "capabilities":
                                              {"general": {"positionEncodings": offered}}})
            assert result["capabilities"]["positionEncoding"] == unit
            c.notify("initialized", {})
        uri = opened(c, tmp_path / "e.rules", text)
        m = c.wait_for(lambda m, u=uri: published_for(m, u))
        [diagnostic] = m["params"]["diagnostics"]
        # the import's range ends after the closing quote: 16 code points, 17 UTF-16 units
        assert diagnostic["range"]["end"]["character"] == (17 if unit == "utf-16" else 16)
    c.close()


def test_requests_before_initialize_and_after_shutdown_get_the_specs_errors(tmp_path):
    c = Drained(tmp_path)
    assert ask(c, 1, "textDocument/hover", at("file:///x.rules", 0, 0))["error"]["code"] == -32002
    c.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    assert ask(c, 2, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})[
        "error"]["code"] == -32600
    c.request("shutdown", None)
    reply = ask(c, 3, "textDocument/hover", at("file:///x.rules", 0, 0))
    assert reply["error"]["code"] == -32600 and "shut down" in reply["error"]["message"]
    c.notify("exit", None)
    assert c.proc.wait(10) == 0


def test_exit_without_shutdown_exits_1(tmp_path):
    c = started(tmp_path)
    c.notify("exit", None)
    assert c.proc.wait(10) == 1
    assert "Traceback" not in c.stderr()


# -- a busy editor ---------------------------------------------------------------------------------
BIG = "pass p\n" + "".join(f"rule r{i}: Log(Exp(x)) * {i} + 0 => x * {i}\n" for i in range(1280))


def test_a_burst_of_edits_is_analysed_once_and_a_hover_does_not_wait_for_it(server, tmp_path):
    """200 edits of a 56 kB document: only the last version is analysed and published, and
    the hover sent right after the burst is answered before that analysis (not after 200)."""
    assert len(BIG.encode()) > 56_000
    uri = opened(server, tmp_path / "big.rules", BIG)
    first = server.wait_for(lambda m: published_for(m, uri), timeout=120)
    assert first["params"]["version"] == 1
    for version in range(2, 202):
        line = version + 1
        edit = {"range": {"start": {"line": line, "character": 0},
                          "end": {"line": line, "character": 0}}, "text": " "}
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [edit]})
    server.send({"id": "h", "method": "textDocument/hover", "params": at(uri, 640, 12)})
    order = []
    server.wait_for(lambda m: order.append(m) or published_for(m, uri), timeout=120)
    replies = [m for m in order if m.get("id") == "h"]
    assert replies and "natural logarithm" in replies[0]["result"]["contents"]["value"]
    published = [m["params"]["version"] for m in order if published_for(m, uri)]
    assert published == [201]  # versions 2..200 were never analysed
    assert order.index(replies[0]) < len(order) - 1  # answered before the analysis finished


def test_a_newer_version_kills_the_check_of_the_older_one():
    import asyncio

    from ngrules.lsp.background import Background

    async def check() -> list:
        background, reported = Background(), []
        background.start("u", BIG, "/t/big.rules", reported.append)
        older = background.running["u"][0]
        background.start("u", RULES, "/t/a.rules", reported.append)
        assert not older.is_alive()
        for _ in range(600):
            if reported:
                break
            await asyncio.sleep(0.05)
        return reported

    assert asyncio.run(check()) == [[]]  # the newer text's diagnostics (none), only


# -- fuzz ------------------------------------------------------------------------------------------
FUZZ_ROUNDS = 1000


def _malformed(rng: random.Random, uri: str) -> bytes:
    """One malformed message: framing, JSON, JSON-RPC or params gone wrong."""
    good = json.dumps({"jsonrpc": "2.0", "id": rng.randrange(10**6),
                       "method": rng.choice(["textDocument/hover", "textDocument/completion",
                                             "textDocument/definition", "initialize"]),
                       "params": at(uri, rng.randrange(-3, 40), rng.randrange(-3, 200))}).encode()
    kind = rng.randrange(9)
    if kind == 0:  # bit flips anywhere, header included
        data = bytearray(frame(good))
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 1:  # a wrong length
        wrong = rng.choice([-50, -1, 1, 7, 10 ** rng.randrange(3, 30)])
        return frame(good, max(0, len(good) + wrong))
    if kind == 2:  # truncated
        return frame(good)[: rng.randrange(1, len(good))]
    if kind == 3:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    if kind == 4:  # deep nesting
        depth = rng.randrange(10, 100_000)
        return frame(b"[" * depth + b"]" * depth)
    if kind == 5:  # valid JSON, wrong shapes
        shapes = [None, 1, "x", [], {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "id": {}},
                  {"jsonrpc": "2.0", "id": True, "method": "textDocument/hover"},
                  {"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover", "params": []},
                  {"jsonrpc": "2.0", "id": 5, "result": 1},
                  {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"x": 1}},
                  {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "nope"}}]
        return frame(json.dumps(rng.choice(shapes)).encode())
    if kind == 6:  # bad header lines
        return rng.choice([b"Content-Length: abc\r\n\r\n", b"Content-Type: x\r\n\r\n{}",
                           b"Content-Length: 5\n\n{}{}{", b"\r\n\r\n\r\n",
                           b"Content-Length: " + b"9" * rng.randrange(1, 5000) + b"\r\n\r\n"])
    if kind == 7:  # not UTF-8
        return frame(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}')
    return frame(good.replace(b'"line"', b'"lime"'))  # params that do not fit the method


def test_malformed_traffic_never_stops_the_server(server, tmp_path):
    """1,000 malformed messages, each followed by a real request: the server answers every
    one of those (so it never died, hung or lost the stream) and logs no traceback."""
    uri = opened(server, tmp_path / "a.rules", RULES)
    rng = random.Random(25)
    for round_ in range(FUZZ_ROUNDS):
        server.proc.stdin.write(_malformed(rng, uri))
        server.next_id += 1
        ident = f"ok{round_}"
        server.send({"id": ident, "method": "textDocument/hover", "params": at(uri, 1, 14)})
        reply = server.wait_for(lambda m, i=ident: m.get("id") == i, timeout=30)
        assert "e ** x" in reply["result"]["contents"]["value"], (round_, reply)
    assert server.proc.poll() is None
    server.close()
    assert server.proc.returncode == 0
    assert "Traceback" not in server.stderr()
