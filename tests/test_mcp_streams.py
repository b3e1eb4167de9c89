"""SSE behaviour of the session wire (priming, event ids, resumption with Last-Event-ID), GET streams and
list-changed / resource-updated notifications, 2026 `subscriptions/listen`, session cap and expiry."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time

import httpx
import pytest

from mcpfusion import Tool
from mcpfusion.mcp.sessions import InMemorySessionStore, Session, SessionLimitError
from tests.mcp_app import build_fusion, serve

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def fusion_and_base():
    fusion = build_fusion(max_sessions=50)
    with serve(fusion.build_app()) as url:
        yield fusion, url


@pytest.fixture
async def client(fusion_and_base):
    async with httpx.AsyncClient(base_url=fusion_and_base[1], timeout=10) as c:
        yield c


async def events_of(response: httpx.Response, count: int | None = None):
    """Parse SSE events (dicts with id/data/retry) from a streaming response."""
    out, current = [], {}
    async for line in response.aiter_lines():
        if line == "":
            if current:
                out.append(current)
                current = {}
                if count is not None and len(out) >= count:
                    break
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        current[key] = value.removeprefix(" ")
    if current:
        out.append(current)
    return out


async def initialize(client: httpx.AsyncClient, capabilities: dict | None = None) -> dict[str, str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities or {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = await client.post("/mcp", json=body, headers=ACCEPT)
    return {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}


async def test_post_stream_has_priming_event_and_event_ids(client):
    headers = await initialize(client)
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
    async with client.stream("POST", "/mcp", json=body, headers=headers) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = await events_of(r)
    priming, message = events
    assert priming["data"] == "" and priming["id"] and priming["retry"] == "1000"
    assert message["id"] != priming["id"]
    assert json.loads(message["data"])["id"] == 5


async def test_closed_stream_resumes_with_last_event_id(client):
    headers = await initialize(client)
    await client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                    "params": {"level": "debug"}}, headers=headers)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "billing_reconnect"}}
    async with client.stream("POST", "/mcp", json=body, headers=headers) as r:
        first = await events_of(r)
    # The server closed the stream before the result: priming event and the first log only.
    assert [json.loads(e["data"])["params"]["data"] for e in first if e.get("data")] == ["before disconnect"]
    last_id = first[-1]["id"]
    async with client.stream("GET", "/mcp", headers={**headers, "last-event-id": last_id}) as r:
        rest = await events_of(r)
    messages = [json.loads(e["data"]) for e in rest if e.get("data")]
    assert messages[0]["params"]["data"] == "after reconnect"
    assert messages[-1] == {"jsonrpc": "2.0", "id": 1,
                            "result": {"content": [{"type": "text", "text": "reconnected"}], "isError": False}}
    # Replaying from the priming event gives the same messages again, none lost or repeated.
    async with client.stream("GET", "/mcp", headers={**headers, "last-event-id": first[0]["id"]}) as r:
        replayed = await events_of(r)
    # Replayed events come before any new priming event: a priming id is newer than them, so a client cut
    # right after it would otherwise resume past events it never received.
    assert replayed[0]["data"] != ""
    again = [json.loads(e["data"]) for e in replayed if e.get("data")]
    assert [m.get("params", {}).get("data") for m in again[:2]] == ["before disconnect", "after reconnect"]
    assert again[-1]["id"] == 1 and len(again) == 3
    # An event id of another session is refused.
    other = await initialize(client)
    r = await client.get("/mcp", headers={**other, "last-event-id": last_id})
    assert r.status_code == 400  # (not 404: that session is alive, only the id is not its own)


async def test_a_last_event_id_past_the_streams_last_event_is_refused_like_a_foreign_one(client):
    headers = await initialize(client)
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=headers)
    priming_id, reply_id = [line.removeprefix("id: ") for line in r.text.split("\r\n") if line.startswith("id: ")]
    stream, _, number = reply_id.rpartition("#")
    get = {**headers, "accept": "text/event-stream"}
    for never in (f"{stream}#{int(number) + 1}", f"{stream}#{int(number) + 999999999}", f"{stream}#{'9' * 40}"):
        r = await client.get("/mcp", headers={**get, "last-event-id": never})
        assert r.status_code == 400, never
        assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "Unknown Last-Event-ID for this session: this stream never sent that event; "
                                       "resume from the id of the last event received"}}
    # The ids it did send still resume: after the priming event the reply, after the reply nothing more.
    for last, replayed in ((priming_id, [reply_id]), (reply_id, [])):
        r = await client.get("/mcp", headers={**get, "last-event-id": last})
        assert r.status_code == 200
        assert [line.removeprefix("id: ") for line in r.text.split("\r\n") if line.startswith("id: ")] == replayed
    # The session's GET stream too: its own ids go on live, a number past its last is refused before it starts.
    async with client.stream("GET", "/mcp", headers=get) as g:
        get_id = (await events_of(g, count=1))[0]["id"]
    assert get_id.startswith(headers["mcp-session-id"] + "~get#")
    get_stream, _, get_number = get_id.rpartition("#")
    r = await client.get("/mcp", headers={**get, "last-event-id": f"{get_stream}#{int(get_number) + 999999999}"})
    assert r.status_code == 400 and "never sent that event" in r.json()["error"]["message"]
    async with client.stream("GET", "/mcp", headers={**get, "last-event-id": get_id}) as g:
        assert g.status_code == 200 and (await events_of(g, count=1))[0]["data"] == ""  # (its new priming event)


async def test_a_call_without_intermediate_messages_is_one_sse_body_and_still_resumable(client):
    headers = await initialize(client)
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "billing_whoami"}}
    r = await client.post("/mcp", json=body, headers=headers)
    assert r.headers["content-type"].startswith("text/event-stream")
    # One body of known length (not a chunked live stream), with the priming event and the result.
    assert r.headers["content-length"] == str(len(r.content)) and "transfer-encoding" not in r.headers
    assert r.content.count(b"\r\n\r\n") == 2
    lines = [line for line in r.text.split("\r\n") if line]
    assert lines[0].startswith("id: ") and lines[1] == "data: " and lines[2] == "retry: 1000"
    assert lines[3].startswith("id: ") and lines[4] == "event: message"
    reply = json.loads(lines[5].removeprefix("data: "))
    assert reply["result"]["content"][0]["text"] == "tenant=acme"
    # Both events were stored: a client cut after the priming event gets the result again.
    priming_id = lines[0].removeprefix("id: ")
    async with client.stream("GET", "/mcp", headers={**headers, "last-event-id": priming_id}) as g:
        replayed = await events_of(g, count=1)
    assert replayed[0]["id"] == lines[3].removeprefix("id: ")
    assert json.loads(replayed[0]["data"]) == reply


async def test_progress_and_logging_still_stream(client):
    headers = await initialize(client)
    await client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                    "params": {"level": "info"}}, headers=headers)
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "billing_slow_export", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}}}
    async with client.stream("POST", "/mcp", json=body, headers=headers) as r:
        assert "content-length" not in r.headers  # a live stream
        events = await events_of(r)
    methods = [json.loads(e["data"]).get("method", "result") for e in events if e.get("data")]
    assert methods == ["notifications/progress", "notifications/message"] * 2 + ["result"]


@contextlib.asynccontextmanager
async def gated_call(**settings: object):
    """A server whose `gated_wait` runs until the test sets the gate (returns "released"), and the open
    response stream of one call of it: yields (gate, lines of the stream)."""
    gate = threading.Event()
    fusion = build_fusion(**settings)
    gated = Tool("gated", exposition="flat")

    @gated.action()
    async def wait() -> str:
        """Wait for the test."""
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "released"

    fusion.add_tool(gated)
    with serve(fusion.build_app()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:
            headers = await initialize(c)
            body = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "gated_wait"}}
            async with c.stream("POST", "/mcp", json=body, headers=headers) as r:
                assert "content-length" not in r.headers  # a live stream
                yield gate, r.aiter_lines()


def replies(lines: list[str]) -> list[str]:
    return [json.loads(line[6:])["result"]["content"][0]["text"] for line in lines if line.startswith("data: {")]


async def test_a_call_still_running_after_the_hold_streams_its_priming_event_first():
    """The priming event goes out while the call runs (the tool waits for the test to have read it)."""
    async with gated_call(sse_hold_seconds=0.05) as (gate, lines):
        priming = [await anext(lines) for _ in range(3)]
        gate.set()
        rest = [line async for line in lines]
    assert priming[0].startswith("id: ") and priming[1] == "data: " and priming[2] == "retry: 1000"
    assert replies(rest) == ["released"]


async def test_a_quiet_live_stream_gets_keep_alive_comments_until_its_reply():
    """A call that runs on without sending anything keeps its opened stream alive with SSE comments, and the
    stream still ends with the reply."""
    async with gated_call(sse_hold_seconds=0.02, sse_ping_seconds=0.05) as (gate, lines):
        seen: list[str] = []
        while sum(line.startswith(":") for line in seen) < 2:
            seen.append(await anext(lines))
        gate.set()
        seen += [line async for line in lines]
    assert seen[0].startswith("id: ")  # the priming event first
    assert replies(seen) == ["released"]


async def test_get_stream_receives_list_changed_and_subscribed_resource_updates(client, fusion_and_base):
    fusion = fusion_and_base[0]
    headers = await initialize(client)
    sub = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "file:///readme.txt"}}
    assert (await client.post("/mcp", json=sub, headers={**headers, "accept": "application/json"})).json() == {
        "jsonrpc": "2.0", "id": 3, "result": {}}
    async with client.stream("GET", "/mcp", headers={**headers, "accept": "text/event-stream"}) as r:
        stream = r.aiter_lines()
        await anext(stream)  # the priming event's first line means the stream is subscribed
        await fusion.notify_resource_updated("file:///other.txt")  # not subscribed: filtered out
        await fusion.notify_resource_updated("file:///readme.txt")
        await fusion.notify_tools_changed()
        methods = []
        async for line in stream:
            if line.startswith("data: {"):
                methods.append(json.loads(line[6:])["method"])
                if len(methods) == 2:
                    break
    assert methods == ["notifications/resources/updated", "notifications/tools/list_changed"]


async def test_delete_ends_the_get_stream(client):
    headers = await initialize(client)
    async with client.stream("GET", "/mcp", headers={**headers, "accept": "text/event-stream"}) as r:
        stream = r.aiter_lines()
        await anext(stream)
        async with httpx.AsyncClient(base_url=str(client.base_url)) as other:
            assert (await other.delete("/mcp", headers=headers)).status_code == 200
        rest = [line async for line in stream]
    assert all(not line.startswith("data: {") for line in rest)


async def test_subscriptions_listen_acknowledges_and_filters(client, fusion_and_base):
    fusion = fusion_and_base[0]
    body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
            "params": {"_meta": META, "notifications": {"promptsListChanged": True}}}
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}
    async with client.stream("POST", "/mcp", json=body, headers=headers) as r:
        lines = r.aiter_lines()
        ack = None
        async for line in lines:
            if line.startswith("data: "):
                ack = json.loads(line[6:])
                break
        await fusion.notify_tools_changed()  # not requested: never sent
        await fusion.notify_prompts_changed()
        async for line in lines:
            if line.startswith("data: "):
                note = json.loads(line[6:])
                break
    assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"},
                              "notifications": {"promptsListChanged": True}}}
    assert note == {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed",
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}}


async def test_session_cap_and_idle_expiry():
    store = InMemorySessionStore(idle_timeout=60, max_sessions=2)
    await store.create(Session(id="a", protocol_version="2025-11-25"))
    await store.create(Session(id="b", protocol_version="2025-11-25"))
    with pytest.raises(SessionLimitError):
        await store.create(Session(id="c", protocol_version="2025-11-25"))
    # Simulate 'a' idle for longer than the timeout: it expires and frees a slot.
    (await store.get("a")).last_seen = time.monotonic() - 120
    assert await store.get("a") is None
    await store.create(Session(id="c", protocol_version="2025-11-25"))
    assert {s for s in ("b", "c") if await store.get(s)} == {"b", "c"}


async def test_session_cap_answers_503_over_http():
    with serve(build_fusion(max_sessions=1).build_app()) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            await initialize(client)
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t",
                                                                                                  "version": "1"}}}
            r = await client.post("/mcp", json=body, headers=ACCEPT)
            assert r.status_code == 503 and "retry later" in r.json()["error"]["message"]
            assert r.headers["retry-after"] == "60"  # the honest wait: the session is closed once idle 60 s


async def test_cancellation_stops_the_handler(client):
    headers = await initialize(client, {"elicitation": {}})
    json_headers = {**headers, "accept": "application/json"}
    import asyncio

    body = {"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call",
            "params": {"name": "billing_confirm_delete", "arguments": {"id": "inv_1"}}}
    # No GET stream and no SSE: the elicitation cannot be sent, so the tool reports it (no hang).
    r = await client.post("/mcp", json=body, headers=json_headers)
    assert r.json()["result"]["isError"] is True
    # With an SSE stream the handler waits for the answer; a cancellation ends it without a result.
    async with client.stream("POST", "/mcp", json=body, headers=headers) as stream:
        lines = stream.aiter_lines()
        async for line in lines:
            if line.startswith("data: {"):
                assert json.loads(line[6:])["method"] == "elicitation/create"
                break
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1"}}
        assert (await client.post("/mcp", json=cancel, headers=json_headers)).status_code == 202
        rest = await asyncio.wait_for(_collect(lines), 5)
    assert not any('"result"' in line for line in rest)


async def _collect(lines):
    return [line async for line in lines]


async def test_an_unanswered_elicitation_times_out_instead_of_hanging():
    with serve(build_fusion(client_request_timeout=0.2).build_app()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            headers = await initialize(client, {"elicitation": {}})
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                    "params": {"name": "billing_confirm_delete", "arguments": {"id": "inv_1"}}}
            async with client.stream("POST", "/mcp", json=body, headers=headers) as r:
                messages = [json.loads(e["data"]) for e in await events_of(r) if e.get("data")]
    assert messages[0]["method"] == "elicitation/create"  # sent, never answered
    final = messages[-1]
    assert final["id"] == 9
    assert final.get("error", {}).get("code") == -32001 or final["result"]["isError"] is True


def test_one_body_events_are_the_bytes_sse_starlette_writes():
    from sse_starlette import ServerSentEvent

    from mcpfusion.mcp.streams import encode_message, encode_priming, sse_event

    message = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "a\nb\r\nc é"}]}}
    for event_id in ("sid~abc#12", None):
        assert encode_message(event_id, message) == ServerSentEvent(**sse_event(event_id, message)).encode()
    for priming in ({"id": "sid~abc#1", "data": "", "retry": 1000}, {"id": "sid~abc#1", "data": ""}):
        assert encode_priming(priming) == ServerSentEvent(**priming).encode()


def test_a_live_reply_sends_the_bytes_the_event_store_kept():
    import asyncio

    from pydantic_core import to_json

    from mcpfusion.mcp.events import InMemoryEventStore
    from mcpfusion.mcp.streams import encode_message

    store = InMemoryEventStore()
    reply = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "a\nb é"}]}}
    twin = {**reply}
    event_id = asyncio.run(store.store_event("sid~1", reply))
    kept = store.encoded(reply)
    assert kept == to_json(reply)
    assert store.encoded(twin) is None  # an equal dict is not the message stored: encoded again
    assert encode_message(event_id, reply, kept) == encode_message(event_id, reply)
    replayed = asyncio.run(store.replay_after("sid~1#0"))
    assert replayed == ("sid~1", [(event_id, reply)])
    asyncio.run(store.store_event("sid~1", {"jsonrpc": "2.0", "method": "notifications/progress"}))
    assert store.encoded(reply) is None  # only the last one


class _ServerCycle:
    """What a server keeps for one request, as uvicorn does: the scope, and `send` as its bound method (so
    whatever the app keeps of `send` reaches the scope, and the call context the app put in it)."""

    def __init__(self, headers: dict[str, str], body: dict) -> None:
        self.scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                      "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
                      "headers": [(b"host", b"127.0.0.1"), *((k.encode(), v.encode()) for k, v in headers.items())],
                      "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
        self.body = json.dumps(body).encode()
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        body, self.body = self.body, b""
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(self, message: dict) -> None:
        self.sent.append(message)


@pytest.mark.parametrize("streams", [False, True], ids=["one body", "live stream"])
async def test_an_sse_reply_leaves_no_reference_cycle_for_the_garbage_collector(streams):
    """Under a real server every SSE reply that held on to `send` made a cycle (response -> send -> scope ->
    call context -> channel -> response) of ~35 objects, which only the garbage collector frees: its passes
    then cost ~10% of an SSE reply under load. Freed by reference counting alone, the request's objects go
    as soon as it is answered."""
    import gc
    import weakref

    app = build_fusion().build_app()
    init = _ServerCycle(ACCEPT, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    await app(init.scope, init.receive, init.send)
    session = dict(init.sent[0]["headers"])[b"mcp-session-id"].decode()
    headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    params: dict = {"name": "billing_whoami"}
    if streams:
        params = {"name": "billing_slow_export", "arguments": {"steps": 1}, "_meta": {"progressToken": "p"}}
    gc.disable()
    try:
        cycle = _ServerCycle(headers, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
        await app(cycle.scope, cycle.receive, cycle.send)
        body = b"".join(m.get("body", b"") for m in cycle.sent if m["type"] == "http.response.body")
        assert dict(cycle.sent[0]["headers"])[b"content-type"].startswith(b"text/event-stream")
        assert (b"notifications/progress" in body) is streams and b'"result"' in body
        assert (b"content-length" in dict(cycle.sent[0]["headers"])) is not streams
        await asyncio.sleep(0)  # the live stream's helper tasks end
        gone = weakref.ref(cycle)
        del cycle
        assert gone() is None
    finally:
        gc.enable()


async def _asked_and_answered(client, request_id: str, answer) -> dict:
    """Call the tool that asks the user (elicitation on the POST's SSE stream), answer its question with
    `answer(question_id)` (a JSON-RPC response), and return the call's final reply."""
    headers = await initialize(client, {"elicitation": {}})
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "billing_confirm_delete", "arguments": {"id": "inv_1"}}}
    async with client.stream("POST", "/mcp", json=body, headers=headers) as stream:
        lines = stream.aiter_lines()
        async for line in lines:
            if line.startswith("data: {"):
                asked = json.loads(line[6:])
                break
        sent = await client.post("/mcp", json=answer(asked["id"]), headers={**headers, "accept": "application/json"})
        assert sent.status_code == 202
        rest = await asyncio.wait_for(_collect(lines), 5)
    return next(json.loads(line[6:]) for line in rest if line.startswith("data: {"))


async def test_a_clients_error_answer_is_told_back_bounded(client):
    reply = await _asked_and_answered(client, "ask-1", lambda asked: {"jsonrpc": "2.0", "id": asked, "error": {
        "code": "not a number", "message": "x" * 100_000, "data": {"secret": "y" * 10_000}}})
    text = json.dumps(reply)
    assert len(text) < 2_000 and "yyyy" not in text, text[:300]
    assert "The client answered elicitation/create with an error" in text


async def test_a_clients_error_code_is_named_never_taken_as_the_calls_own(client):
    """The client's -32601 for elicitation/create would tell it tools/call does not exist: the call's error
    is the server's -32603, naming the client's code."""
    reply = await _asked_and_answered(client, "ask-2", lambda asked: {"jsonrpc": "2.0", "id": asked, "error": {
        "code": -32601, "message": "Method not found"}})
    assert reply["error"] == {"code": -32603, "message": "The client answered elicitation/create with an error "
                                                         "(-32601): Method not found"}


async def test_subscriptions_listen_streams_are_capped_per_caller():
    fusion = build_fusion(max_sessions_per_principal=2)
    body = {"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
            "params": {"_meta": META, "notifications": {"toolsListChanged": True}}}

    def headers(token):
        return {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen",
                "authorization": f"Bearer {token}"}

    async def acknowledged(r):
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                return json.loads(line[6:])["method"] == "notifications/subscriptions/acknowledged"
        return False

    with serve(fusion.build_app()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            async with http.stream("POST", "/mcp", json=body, headers=headers("a")) as one, \
                    http.stream("POST", "/mcp", json=body, headers=headers("a")) as two:
                assert await acknowledged(one) and await acknowledged(two)
                third = await http.post("/mcp", json=body, headers=headers("a"))
                other = http.stream("POST", "/mcp", json=body, headers=headers("b"))
                async with other as theirs:
                    assert await acknowledged(theirs)  # another caller has its own allowance
            assert third.status_code == 429 and "at most 2" in third.json()["error"]["message"]
            await asyncio.sleep(0.2)  # the closed streams are counted out
            async with http.stream("POST", "/mcp", json=body, headers=headers("a")) as again:
                assert again.status_code == 200 and await acknowledged(again)


async def test_a_get_stream_ends_when_its_session_is_gone_from_the_store():
    """A store that loses its sessions (a Redis restart) tells no stream: a quiet GET stream looks at its
    session every ping interval and ends once it is gone."""
    fusion = build_fusion(sse_ping_seconds=0.2)
    with serve(fusion.build_app()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            headers = await initialize(http)
            sid = headers["mcp-session-id"]
            async with http.stream("GET", "/mcp", headers=headers) as stream:
                assert stream.status_code == 200
                fusion.transport.sessions._sessions.pop(sid)  # lost with its store, no one told
                lines = await asyncio.wait_for(_collect(stream.aiter_lines()), 5)  # ends, never hangs
    assert not any(line.startswith("data: {") for line in lines)


async def test_ids_7_and_string_7_are_two_requests_and_an_id_in_flight_is_not_reused(client):
    """JSON-RPC ids keep their type: cancelling 7 cancels the integer request, never the string "7" one; a
    second request with an id still in flight is refused (its cancel would be ambiguous)."""
    headers = await initialize(client, {"elicitation": {}})
    json_headers = {**headers, "accept": "application/json"}

    def body(rid):
        return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                "params": {"name": "billing_confirm_delete", "arguments": {"id": "inv_1"}}}

    async with contextlib.AsyncExitStack() as stack:
        lines = {}
        for rid in (7, "7"):
            stream = await stack.enter_async_context(client.stream("POST", "/mcp", json=body(rid), headers=headers))
            lines[rid] = stream.aiter_lines()
            async for line in lines[rid]:
                if line.startswith("data: {"):
                    assert json.loads(line[6:])["method"] == "elicitation/create"
                    break
        again = await client.post("/mcp", json=body(7), headers=json_headers)
        assert again.json()["error"]["code"] == -32600 and "already running" in again.json()["error"]["message"]
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        assert (await client.post("/mcp", json=cancel, headers=json_headers)).status_code == 202
        ended = await asyncio.wait_for(_collect(lines[7]), 5)  # the integer request ended, unanswered
        assert not any('"result"' in line for line in ended)
        cancel["params"]["requestId"] = "7"  # the string one was still running: this cancel ends it
        assert (await client.post("/mcp", json=cancel, headers=json_headers)).status_code == 202
        ended = await asyncio.wait_for(_collect(lines["7"]), 5)
        assert not any('"result"' in line for line in ended)


async def test_a_malformed_elicitation_answer_is_refused_on_the_session_wire_too(client):
    """An ElicitResult whose content is not an object never reaches the handler (the 2026 wire's params
    validation refuses it the same way): the call ends with -32602 naming the method."""
    reply = await _asked_and_answered(client, "ask-3", lambda asked: {"jsonrpc": "2.0", "id": asked, "result": {
        "action": "accept", "content": "x"}})
    assert reply["id"] == "ask-3" and reply["error"]["code"] == -32602
    assert "answer to elicitation/create is not a valid ElicitResult (at content)" in reply["error"]["message"]


async def test_initialize_carrying_a_session_id_is_404_when_it_ended_and_400_when_it_lives(client):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    live = await initialize(client)
    again = await client.post("/mcp", json=body, headers=live)
    assert again.status_code == 400 and "mcp-session-id" not in again.headers
    assert again.json()["error"]["code"] == -32600 and "initialized already" in again.json()["error"]["message"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert (await client.post("/mcp", json=ping, headers=live)).status_code == 200  # the live one still serves
    assert (await client.delete("/mcp", headers=live)).status_code == 200
    ended = await client.post("/mcp", json=body, headers=live)
    assert ended.status_code == 404 and "mcp-session-id" not in ended.headers
    unknown = await client.post("/mcp", json=body, headers={**live, "mcp-session-id": "no-such-session"})
    assert unknown.status_code == 404
    fresh = await client.post("/mcp", json=body, headers={k: v for k, v in live.items() if k != "mcp-session-id"})
    assert fresh.status_code == 200 and fresh.headers["mcp-session-id"] != live["mcp-session-id"]


async def test_event_and_stream_ids_tell_nothing_of_other_sessions(client):
    # Each stream numbers its own events, and a request's stream id is drawn at random: a client reading its own
    # ids learns nothing of how many requests and events other sessions (other tenants) had in between.
    mine, theirs = await initialize(client), await initialize(client)
    ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}

    async def ids(headers):
        r = await client.post("/mcp", json=ping, headers=headers)
        return [line.removeprefix("id: ") for line in r.text.split("\r\n") if line.startswith("id: ")]

    first = await ids(mine)
    for _ in range(5):
        await ids(theirs)
    second = await ids(mine)
    for priming, reply in (first, second):
        stream, _, number = priming.rpartition("#")
        assert reply == f"{stream}#{int(number) + 1}"  # one stream's events follow each other, nothing between
    (one, _, _), (two, _, _) = first[0].rpartition("#"), second[0].rpartition("#")
    suffixes = [one.rpartition("~")[2], two.rpartition("~")[2]]
    assert all(len(s) == 16 for s in suffixes) and int(suffixes[1], 16) - int(suffixes[0], 16) not in range(1, 64)
