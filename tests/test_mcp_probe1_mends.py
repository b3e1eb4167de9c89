"""Black-box probe 1 on /mcp: what it found, each test failing without its fix.

1. A 2026-07-28 `subscriptions/listen` naming ~210k resource URIs held the event loop for seconds (each URI is
   read as the caller): a list longer than `max_listen_uris` is refused whole with -32602 naming the limit,
   unread, and the URIs of a list within it are checked with the event loop serving others in between.
2. An unknown MCP-Protocol-Version header on a request without a session got the 2026 wire's demand for a
   `_meta` envelope and an Mcp-Method header: it is the structured -32022 now, saying the version came from the
   header, its data naming the version sent and every version served.
3. -32022's `data.supported` lists what `server/discover` advertises (the handshake revisions too).
6. A 413 (the body over the limit, announced or chunked), and any refusal sent before the body was read,
   carries `Connection: close`: the server will not read the rest, so the client must not reuse the
   connection for its next request (it was lost). /mcp and /api alike.
8. A notification sent with an id is -32600 saying so (it was "Method not found"), and a body holding a lone
   UTF-16 surrogate escape is told that, not that it is no JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp.channel import InputResponsesChannel
from mcpfusion.mcp.engine import Call
from tests.mcp_app import serve
from tests.test_abuse_mends import serving

MODERN = "2026-07-28"
SESSION = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
SSE = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
LISTEN_HEADERS = {**SSE, "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}


def notes_fusion(reads: list[str] | None = None, **settings: Any) -> MCPFusion:
    notes = Tool("notes", description="Notes")

    @notes.action(readonly=True)
    async def read(id: str) -> dict:
        """Read a note"""
        return {"id": id}

    fusion = MCPFusion("notes", tools=[notes], **settings)

    @fusion.resource_template("notes://{id}", mime_type="application/json")
    async def note(id: str) -> dict:
        """One note (only the even ones exist)."""
        if reads is not None:
            reads.append(id)
        if int(id) % 2:
            raise LookupError(id)
        return {"id": id}

    return fusion


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def listen(uris: list[str]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
            "params": {"_meta": META, "notifications": {"resourceSubscriptions": uris}}}


# -- 1. subscriptions/listen: the list of URIs is bounded --------------------------------------------------------


async def test_a_listen_naming_more_uris_than_the_limit_is_refused_unread():
    reads: list[str] = []
    app = notes_fusion(reads, max_listen_uris=50).build_app()
    async with client(app) as http:
        refused = await http.post("/mcp", json=listen([f"notes://{n}" for n in range(51)]), headers=LISTEN_HEADERS)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == -32602 and refused.json()["id"] == 9
    assert "names 51 URIs" in error["message"] and "at most 50 in one request" in error["message"], error
    assert reads == []  # not one URI read: the refusal costs nothing per URI


def test_the_default_limit_is_documented_and_checked():
    from mcpfusion.mcp.settings import DEFAULT_MAX_LISTEN_URIS, TransportSettings

    assert TransportSettings().max_listen_uris == DEFAULT_MAX_LISTEN_URIS == 1000
    assert "max_listen_uris" in (TransportSettings.__doc__ or "")
    with pytest.raises(ValueError, match="max_listen_uris"):
        TransportSettings(max_listen_uris=0)


def test_a_listen_within_the_limit_is_honoured():
    reads: list[str] = []
    app = notes_fusion(reads, max_listen_uris=50, max_subscriptions=3).build_app()
    with serve(app) as url, httpx.stream("POST", url + "/mcp", json=listen([f"notes://{n}" for n in range(50)]),
                                         headers=LISTEN_HEADERS, timeout=10) as answer:
        assert answer.status_code == 200
        first = next(line for line in answer.iter_lines() if line.startswith("data:"))
    acknowledged = json.loads(first[5:])["params"]["notifications"]
    assert acknowledged["resourceSubscriptions"] == ["notes://0", "notes://2", "notes://4"]
    assert reads == ["0", "1", "2", "3", "4"]  # read until max_subscriptions were honoured


async def test_the_uris_of_a_listen_are_checked_with_the_event_loop_serving_others_in_between():
    ticks = 0
    seen: list[int] = []  # the other task's ticks as each read ran

    async def other_requests() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    fusion = notes_fusion(max_listen_uris=300)

    @fusion.resource_template("count://{id}", mime_type="application/json")
    async def counted(id: str) -> dict:
        """A read that never waits (as a synchronous database read in an async function)."""
        seen.append(ticks)
        raise LookupError(id)

    app = fusion.build_app()
    uris = [f"count://{n}" for n in range(300)]
    # (the stream of a listen never ends: the engine is asked as the wire asks it)
    request = Request({"type": "http", "method": "POST", "path": "/mcp", "headers": [], "query_string": b"",
                       "app": app})
    call = Call("subscriptions/listen", listen(uris)["params"], 9, request, InputResponsesChannel(),
                protocol_version=MODERN, modern=True)
    other = asyncio.create_task(other_requests())
    await asyncio.sleep(0)
    try:
        honored = await fusion.engine.allowed_subscriptions(uris, call)
    finally:
        other.cancel()
    assert honored == [] and len(seen) == 300
    assert len(set(seen)) > 1, "the reads held the event loop from the first to the last"


# -- 2, 3. an unsupported version: -32022, naming where it was read and every version served ------------------

SERVED = ["2025-06-18", SESSION, MODERN]
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


async def discovered(http: httpx.AsyncClient) -> list[str]:
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    answer = await http.post("/mcp", json=discover, headers={**SSE, "mcp-protocol-version": MODERN,
                                                             "mcp-method": "server/discover"})
    return answer.json()["result"]["supportedVersions"]


@pytest.mark.parametrize("version", ["2025-11-26", "garbage", "2024-11-05", "2025-03-26"])
async def test_an_unknown_version_header_without_a_session_is_the_structured_32022(version):
    async with client(notes_fusion().build_app()) as http:
        refused = await http.post("/mcp", json=INITIALIZE, headers={**SSE, "mcp-protocol-version": version})
        served = await discovered(http)
    assert refused.status_code == 400, refused.text
    assert refused.json() == {"jsonrpc": "2.0", "id": 0, "error": {
        "code": -32022,
        "message": f"Unsupported protocol version {version} in the MCP-Protocol-Version header: this server serves "
                   "2025-06-18, 2025-11-25, 2026-07-28",
        "data": {"supported": served, "requested": version}}}
    assert served == SERVED
    # (nothing of the 2026 envelope, nor of an Mcp-Method header, which initialize does not have)
    assert "_meta" not in refused.text and "Mcp-Method" not in refused.text


async def test_an_unknown_version_header_on_a_notification_or_a_malformed_request():
    async with client(notes_fusion().build_app()) as http:
        headers = {**SSE, "mcp-protocol-version": "2099-01-01"}
        note = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        broken = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 4, "method": 7}, headers=headers)
    assert note.status_code == 400 and note.json()["id"] is None
    assert note.json()["error"]["code"] == -32022 and note.json()["error"]["data"]["supported"] == SERVED
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32600  # what is wrong first


async def test_an_unsupported_envelope_version_lists_what_discover_advertises():
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    async with client(notes_fusion().build_app()) as http:
        refused = await http.post("/mcp", json=body, headers={
            **SSE, "mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list"})
        served = await discovered(http)
    error = refused.json()["error"]
    assert error["code"] == -32022 and error["data"] == {"supported": served, "requested": "2099-01-01"}
    assert "in the envelope (params._meta)" in error["message"]


async def test_a_session_client_with_an_unknown_version_keeps_its_wires_answer():
    async with client(notes_fusion(json_response=True).build_app()) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers=SSE)
        headers = {**SSE, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2099-01-01"}
        refused = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"] == {"code": -32600, "message": "Unsupported MCP-Protocol-Version: 2099-01-01"}


# -- 8. a notification sent with an id; a lone surrogate escape ------------------------------------------------


async def opened_session(http: httpx.AsyncClient) -> dict[str, str]:
    opened = await http.post("/mcp", json=INITIALIZE, headers=SSE)
    headers = {**SSE, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": SESSION}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


@pytest.mark.parametrize("method", ["notifications/initialized", "notifications/cancelled",
                                    "notifications/progress", "notifications/message"])
async def test_a_notification_sent_with_an_id_is_told_to_drop_the_id(method):
    async with client(notes_fusion(json_response=True).build_app()) as http:
        headers = await opened_session(http)
        answer = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": method}, headers=headers)
        modern = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 8, "method": method, "params": {"_meta": META}},
                                 headers={**SSE, "mcp-protocol-version": MODERN, "mcp-method": method})
    assert answer.json()["id"] == 7 and answer.json()["error"] == {
        "code": -32600, "message": f"Invalid request: {method} is a notification: send it without an id (a request "
                                   "with an id expects an answer, which a notification has not)"}
    assert modern.status_code == 400 and modern.json()["error"]["code"] == -32600
    assert f"{method} is a notification" in modern.json()["error"]["message"]


async def test_an_unknown_method_is_still_not_found():
    async with client(notes_fusion(json_response=True).build_app()) as http:
        headers = await opened_session(http)
        answer = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "notifications/made_up"},
                                 headers=headers)
    assert answer.json()["error"] == {"code": -32601, "message": "Method not found: notifications/made_up"}


@pytest.mark.parametrize(("escaped", "named"), [
    (r"\ud800", r"\ud800"), (r"\uDFFF", r"\uDFFF"), (r"\ud800\u0041", r"\ud800"), (r"a\udc00b", r"\udc00")])
async def test_a_lone_surrogate_escape_is_named_as_such(escaped, named):
    body = ('{"jsonrpc":"2.0","id":8,"method":"ping","params":{"_meta":{"x":"' + escaped + '"}}}').encode()
    async with client(notes_fusion(json_response=True).build_app()) as http:
        headers = await opened_session(http)
        refused = await http.post("/mcp", content=body, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"] == {"code": -32700, "message": (
        f"Parse error: the body holds a lone UTF-16 surrogate ({named} without its pair), which is no character and "
        "cannot be carried: send the character itself, or its complete surrogate pair")}


def test_other_parse_failures_keep_their_words_and_a_pair_is_read():
    from mcpfusion.body import InvalidJSON, parse_json

    for body in (rb'{"x":"\u12"}', b'{"x":', rb'{"x":"\\ud800"'):
        with pytest.raises(InvalidJSON) as refused:
            parse_json(body)
        assert refused.value.reason == "the body is not valid JSON", body
    with pytest.raises(InvalidJSON) as encoded:  # a surrogate encoded as bytes, not escaped: no UTF-8
        parse_json(b'{"x":"\xed\xa0\x80"}')
    assert encoded.value.reason.startswith("the body is not UTF-8 (byte 0xed at offset 6)")
    assert parse_json(rb'{"x":"\ud83d\ude00"}') == {"x": "\U0001F600"}
    assert parse_json(rb'{"x":"\\ud800"}') == {"x": "\\ud800"}  # an escaped backslash: no escape at all
    with pytest.raises(InvalidJSON) as multiline:  # the position on a later line, behind a byte order mark
        parse_json(b'\xef\xbb\xbf{\n"a": "\xc3\xa9",\n"x": "\\udbff"}')
    assert "(\\udbff without its pair)" in multiline.value.reason


# -- 6. a body left unread: Connection: close ------------------------------------------------------------------

LIMIT = 1024
MODERN_JSON = {"accept": "application/json", "content-type": "application/json", "mcp-protocol-version": MODERN,
               "mcp-method": "tools/list"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}}


def padded(size: int) -> bytes:
    """A JSON-RPC request of `size` bytes."""
    head, tail = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"', b'"}}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


def chunked(data: bytes) -> Any:
    async def chunks() -> Any:  # (an iterator: httpx sends it with Transfer-Encoding: chunked)
        for start in range(0, len(data), 1000):
            yield data[start:start + 1000]
    return chunks()


@pytest.mark.parametrize("path", ["/mcp", "/api/notes/read"])
@pytest.mark.parametrize("send", ["content-length", "chunked"])
async def test_a_body_far_over_the_limit_is_refused_unread_with_connection_close(path, send):
    app = notes_fusion(max_body_bytes=LIMIT).build_app()
    body = padded(4 * LIMIT)  # past twice the limit: not read to its end
    async with client(app) as http:
        refused = await http.post(path, content=body if send == "content-length" else chunked(body),
                                  headers=MODERN_JSON)
    assert refused.status_code == 413, refused.text
    assert refused.headers["connection"] == "close"


@pytest.mark.parametrize("path", ["/mcp", "/api/notes/read"])
@pytest.mark.parametrize("send", ["content-length", "chunked"])
async def test_a_body_a_little_over_the_limit_is_read_and_dropped_keeping_the_connection(path, send):
    app = notes_fusion(max_body_bytes=LIMIT).build_app()
    body = padded(LIMIT + LIMIT // 2)
    async with client(app) as http:
        refused = await http.post(path, content=body if send == "content-length" else chunked(body),
                                  headers=MODERN_JSON)
    assert refused.status_code == 413 and "connection" not in refused.headers


async def test_a_refusal_before_the_body_is_read_closes_only_when_the_body_is_left_there():
    app = notes_fusion(max_body_bytes=LIMIT).build_app()
    text = {**MODERN_JSON, "content-type": "text/plain"}
    async with client(app) as http:
        small = await http.post("/mcp", content=b"{}", headers=text)
        large = await http.post("/mcp", content=padded(4 * LIMIT), headers=text)
        served = await http.post("/mcp", json=TOOLS_LIST, headers=MODERN_JSON)
        rest = await http.post("/api/notes/read", json={"id": "n1"}, headers={"accept": "application/json"})
    assert small.status_code == large.status_code == 415
    assert "connection" not in small.headers and large.headers["connection"] == "close"
    assert served.status_code == 200 and "connection" not in served.headers
    assert rest.status_code == 200 and "connection" not in rest.headers


@contextlib.contextmanager
def served_as_mcpfusion_serves(fusion: MCPFusion) -> Iterator[str]:
    """`fusion`'s app under uvicorn with `mcpfusion serve`'s protocol (it drops at most 1 MiB of a body answered
    early), at the URL given."""
    with serving(fusion) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("path", ["/mcp", "/api/notes/read"])
async def test_the_next_request_on_a_keep_alive_connection_after_a_413_is_answered(path):
    """The probe's failure (5,000,000 bytes against the 4 MiB limit): either the 413 or the request after it on
    the same connection was lost, most times."""
    big = padded(5_000_000)
    with served_as_mcpfusion_serves(notes_fusion()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            for _ in range(4):
                refused = await http.post(path, content=big, headers=MODERN_JSON)
                assert refused.status_code == 413
                served = await http.post("/mcp", json=TOOLS_LIST, headers=MODERN_JSON)
                assert served.status_code == 200, served.text
