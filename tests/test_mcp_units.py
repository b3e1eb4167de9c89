"""Unit tests of the engine's small parts: Context outside MCP, signed request state, Host/Origin guard,
event store replay, principal binding of sessions."""

from __future__ import annotations

import httpx
import pytest

from mcpfusion.context import Context, NoBackChannel
from mcpfusion.mcp.events import InMemoryEventStore, NotIssued, event_id, parse_event_id
from mcpfusion.mcp.jsonrpc import EncodedList, McpError, encode
from mcpfusion.mcp.security import HostOriginGuard
from mcpfusion.mcp.state import RequestStateSigner
from tests.mcp_app import build_fusion


async def test_detached_context_is_a_no_op_for_progress_and_refuses_questions():
    ctx = Context.detached()
    await ctx.progress(1, 2, "half")  # nothing to send, no error
    await ctx.info("hello")
    assert ctx.cancelled is False and ctx.request_id is None and ctx.state is None
    for ask in (ctx.elicit("?"), ctx.sample("hi"), ctx.list_roots(), ctx.ask({"a": ctx.roots()})):
        with pytest.raises(NoBackChannel, match="outside MCP"):
            await ask
    ctx.require_capability("sampling")  # outside MCP there is nobody to require it from
    ctx.close_stream()


def test_request_state_is_signed_bound_and_expires():
    signer = RequestStateSigner("k" * 32, ttl=60)
    token = signer.sign("tools/call", "t", {"a": {"action": "accept"}}, state={"step": 2})
    assert signer.verify(token, "tools/call", "t") == ({"a": {"action": "accept"}}, {"step": 2})
    assert signer.verify(None, "tools/call", "t") == ({}, None)
    for bad in (token + "x", "x" + token, token.replace(".", "!"), 42, "a.b.c"):
        with pytest.raises(McpError):
            signer.verify(bad, "tools/call", "t")
    with pytest.raises(McpError):
        signer.verify(token, "tools/call", "other-tool")
    with pytest.raises(McpError):
        RequestStateSigner("another key " * 3).verify(token, "tools/call", "t")
    expired = RequestStateSigner("k" * 32, ttl=-1).sign("tools/call", "t", {})
    with pytest.raises(McpError):
        signer.verify(expired, "tools/call", "t")


@pytest.mark.parametrize(
    ("hosts", "origins", "host", "origin", "ok"),
    [
        (None, None, "127.0.0.1:8000", None, True),
        (None, None, "localhost", "http://localhost:3000", True),
        (None, None, "[::1]:8000", "http://[::1]:8000", True),
        (None, None, "evil.example.com", None, False),
        (None, None, "127.0.0.1:8000", "http://evil.example.com", False),
        (None, None, None, None, False),
        (["api.example.com"], ["https://app.example.com"], "api.example.com", "https://app.example.com", True),
        (["api.example.com:*"], None, "api.example.com:8443", None, True),
        (["api.example.com"], ["https://app.example.com"], "api.example.com", "https://evil.example.com", False),
        (["*"], ["*"], "anything", "http://anything", True),
    ],
)
def test_host_origin_guard(hosts, origins, host, origin, ok):
    assert (HostOriginGuard(hosts, origins).check(host, origin) is None) is ok


async def test_event_store_replays_after_an_id_and_skips_priming_events():
    store = InMemoryEventStore(max_events=3)
    priming = await store.store_event("s1", None)
    ids = [await store.store_event("s1", {"n": i}) for i in range(2)]
    await store.store_event("s2", {"other": True})
    assert await store.replay_after(priming) == ("s1", [(ids[0], {"n": 0}), (ids[1], {"n": 1})])
    assert await store.replay_after(ids[1]) == ("s1", [])
    assert await store.replay_after("unknown#1") is None
    assert await store.replay_after("garbage") is None


async def test_event_store_refuses_a_number_past_the_streams_last_event():
    store = InMemoryEventStore(max_events=2)
    ids = [await store.store_event("s1", {"n": i}) for i in range(3)]  # (the first one dropped: max_events)
    assert await store.replay_after(ids[-1]) == ("s1", [])  # the last event sent: nothing more, but issued
    first, last = (parse_event_id(i)[1] for i in (ids[0], ids[-1]))  # (numbered within the stream, one by one)
    assert [parse_event_id(i)[1] for i in ids] == [first, first + 1, first + 2]
    assert await store.replay_after(event_id("s1", first)) == ("s1", [(ids[1], {"n": 1}), (ids[2], {"n": 2})])
    for never in (event_id("s1", last + 1), event_id("s1", last + 999999)):
        with pytest.raises(NotIssued):
            await store.replay_after(never)
    assert await store.replay_after("s2#999999") is None  # (a stream it does not know: expired, or forged)


def test_event_ids_are_parsed_in_one_place():
    assert parse_event_id(event_id("sess~abc", 12)) == ("sess~abc", 12)
    assert parse_event_id("a#b#7") == ("a#b", 7)
    for bad in ("no-hash", "s#", "s#-1", "s#1.5", "s#\u00b2", "s#\u0663", "s#" + "9" * 41):
        assert parse_event_id(bad) is None, bad


async def test_odd_last_event_ids_are_a_404_not_a_crash():
    app = build_fusion().build_app()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        sid = (await client.post("/mcp", json=init, headers={"accept": "application/json"})).headers["mcp-session-id"]
        # ... and so are well-formed ids of streams the store never issued (forged, or expired): nothing would
        # ever come on them, and nothing is stored under an id the client chose.
        for last in (f"{sid}~x#\u00b2", f"{sid}~x#" + "9" * 50, f"{sid}~x", "#1", f"{sid}~nonexistent#1",
                     f"{sid}~" + "y" * 50_000 + "#1"):
            r = await client.get("/mcp", headers={"accept": "text/event-stream", "mcp-session-id": sid,
                                                  "last-event-id": last.encode()})
            # 400 (not this session's) or 410 (gone), never 404: that would tell the client its session is gone
            assert r.status_code in (400, 410), last
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        alive = await client.post("/mcp", json=ping, headers={"accept": "application/json", "mcp-session-id": sid,
                                                              "mcp-protocol-version": "2025-11-25"})
        assert alive.status_code == 200 and alive.json()["result"] == {}  # (the session lives on)


async def test_both_wires_refuse_a_bad_request_the_same_way():
    app = build_fusion().build_app()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    bad = {"jsonrpc": "2.0", "id": 1.5, "method": "ping", "params": {"_meta": meta}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        modern = await client.post("/mcp", json=bad, headers={"accept": "application/json",
                                                              "mcp-protocol-version": "2026-07-28"})
        session = await client.post("/mcp", json={k: v for k, v in bad.items() if k != "params"},
                                    headers={"accept": "application/json"})
    expected = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "'id' must be a string or an integer"}}
    assert (modern.status_code, modern.json()) == (400, expected)
    assert (session.status_code, session.json()) == (400, expected)


async def test_event_store_forgets_old_streams_but_never_reuses_an_id():
    store = InMemoryEventStore(retention=0)
    first = await store.store_event("s1", {"n": 1})
    await store.store_event("s2", {"n": 2})  # starting a stream sweeps the expired ones
    assert await store.replay_after(first) is None
    again = await store.store_event("s1", {"n": 3})
    assert again != first


async def test_event_store_keeps_the_newest_streams_and_events_within_its_caps():
    store = InMemoryEventStore(max_events=3, max_streams=3)
    primings = [await store.store_event(f"s{i}", None) for i in range(5)]  # s0 and s1 are dropped, oldest first
    assert [await store.replay_after(p) is not None for p in primings] == [False, False, True, True, True]
    ids = [await store.store_event("s4", {"n": n}) for n in range(5)]  # the priming event and n=0, 1 drop out
    assert await store.replay_after(primings[4]) == ("s4", [(ids[2], {"n": 2}), (ids[3], {"n": 3}),
                                                            (ids[4], {"n": 4})])
    assert await store.replay_after(ids[3]) == ("s4", [(ids[4], {"n": 4})])
    await store.store_event("s5", {"n": 5})  # a new stream drops the oldest one left (s2), never a newer one
    assert [await store.replay_after(p) is not None for p in primings[2:]] == [False, True, True]


async def test_a_session_answers_only_to_the_principal_that_created_it():
    app = build_fusion().build_app()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        alice = {"accept": "application/json", "authorization": "Bearer alice"}
        sid = (await client.post("/mcp", json=init, headers=alice)).headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await client.post("/mcp", json=ping, headers={**alice, "mcp-session-id": sid})).status_code == 200
        mallory = {"accept": "application/json", "authorization": "Bearer mallory", "mcp-session-id": sid}
        assert (await client.post("/mcp", json=ping, headers=mallory)).status_code == 404
        assert (await client.delete("/mcp", headers=mallory)).status_code == 404
        assert (await client.get("/healthz")).json() == {"status": "ok"}


async def test_tools_added_after_mount_are_listed_and_callable():
    from mcpfusion import Tool

    fusion = build_fusion()
    app = fusion.build_app()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}

    async def names(client: httpx.AsyncClient) -> set[str]:
        r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                            "params": {"_meta": meta}}, headers=headers)
        return {t["name"] for t in r.json()["result"]["tools"]}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        assert "extra_hello" not in await names(client)
        extra = Tool("extra", exposition="flat")

        @extra.action()
        async def hello() -> str:
            return "hello"

        fusion.add_tool(extra)

        @fusion.raw_tool(description="raw")
        def raw_ping() -> str:
            return "pong"

        assert {"extra_hello", "raw_ping"} <= await names(client)
        r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                            "params": {"name": "raw_ping", "_meta": meta}},
                              headers={**headers, "mcp-method": "tools/call", "mcp-name": "raw_ping"})
        assert r.json()["result"]["content"] == [{"type": "text", "text": "pong"}]
        fusion.remove_raw_tool("raw_ping")
        assert "raw_ping" not in await names(client)


def test_a_kept_listing_encodes_to_the_bytes_of_the_plain_message():
    import datetime
    import decimal

    from pydantic_core import to_json

    tools = [{"name": "é", "description": 'quote " line\nbreak \u2028', "n": 1.5, "when": datetime.date(2026, 1, 2),
              "price": decimal.Decimal("1.10"), "tags": {"b"}, "inputSchema": {"type": "object"}}]
    kept = EncodedList(tools)
    message = {"jsonrpc": "2.0", "id": "r-1", "result": {"tools": kept, "resultType": "complete", "ttlMs": 0,
                                                         "_meta": {"k": [1, None, {"x": True}]}}}
    assert kept == tools and isinstance(kept, list)
    assert encode(message) == to_json({**message, "result": {**message["result"], "tools": tools}}, fallback=str)
    assert kept.json is not None and encode(message) == encode(message)  # encoded once, then kept
    import copy

    changed = copy.deepcopy(message)
    changed["result"]["tools"][0]["name"] = "changed"  # a copy is a plain list: encoded as it is now
    assert type(changed["result"]["tools"]) is list and b'"name":"changed"' in encode(changed)
    assert type(copy.copy(kept)) is list and copy.copy(kept) == tools
    assert encode({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}) == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
async def test_a_listing_sent_again_is_the_same_bytes_until_the_tools_change(version):
    import json

    from pydantic_core import to_json

    from mcpfusion import Tool

    fusion = build_fusion()
    app = fusion.build_app()
    modern = version == "2026-07-28"
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": version,
                        "io.modelcontextprotocol/clientCapabilities": {}}} if modern else {}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": version,
               "mcp-method": "tools/list"}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        if not modern:
            init = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                headers={"accept": "application/json, text/event-stream"})
            headers["mcp-session-id"] = init.headers["mcp-session-id"]

        async def listing(request_id: int) -> tuple[bytes, list[str]]:
            r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": request_id, "method": "tools/list",
                                                "params": params}, headers=headers)
            body = r.content
            if r.headers["content-type"].startswith("text/event-stream"):
                body = next(line[6:] for line in body.split(b"\r\n") if line.startswith(b"data: {"))
            message = json.loads(body)
            assert body == to_json(message)  # what encoding the message itself writes
            return body, [t["name"] for t in message["result"]["tools"]]

        first, names = await listing(1)
        again, _ = await listing(2)
        assert again == first.replace(b'"id":1,', b'"id":2,', 1)
        extra = Tool("extra", exposition="flat")

        @extra.action()
        async def hello() -> str:
            """Say hello"""
            return "hello"

        fusion.add_tool(extra)
        assert (await listing(3))[1] == [*names, "extra_hello"]


async def test_raw_tool_failure_never_leaks_the_exception_message():
    from mcpfusion import MCPFusion

    fusion = MCPFusion(name="raw", version="1")

    @fusion.raw_tool(description="explodes")
    async def boom():
        raise RuntimeError("password=hunter2")

    result = await fusion.raw_tools["boom"].call({}, None)
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "hunter2" not in text and "RuntimeError" not in text
    assert text.startswith('<tool_error code="INTERNAL_ERROR" severity="error">')


class _Held:
    """Stands for a held `PostStream`: when it opened, on which loop."""

    def __init__(self) -> None:
        self.opened_at: float | None = None

    def open(self) -> None:
        import asyncio

        assert self.opened_at is None, "opened twice"
        self.opened_at = asyncio.get_running_loop().time()


async def test_held_sse_replies_open_at_their_own_deadline_on_one_timer():
    import asyncio

    from mcpfusion.mcp.settings import TransportSettings
    from mcpfusion.mcp.streams import Holds

    loop = asyncio.get_running_loop()
    settings = TransportSettings(sse_hold_seconds=0.1)
    holds = Holds(settings)
    start = loop.time()
    first, answered, later = _Held(), _Held(), _Held()
    holds.add(first)  # type: ignore[arg-type]
    holds.add(answered).discard(answered)  # type: ignore[arg-type]  # answered within its hold: never opened
    await asyncio.sleep(0.05)
    holds.add(later)  # type: ignore[arg-type]
    await asyncio.sleep(0.06)
    assert first.opened_at is not None and first.opened_at - start >= 0.1
    assert later.opened_at is None  # its own deadline, not the first one's
    await asyncio.sleep(0.1)
    assert later.opened_at is not None and later.opened_at - start >= 0.15
    assert answered.opened_at is None
    slow, quick = _Held(), _Held()  # a shorter hold set later opens before the longer one held already
    settings.sse_hold_seconds = 5
    held = holds.add(slow)  # type: ignore[arg-type]
    settings.sse_hold_seconds = 0.02
    holds.add(quick)  # type: ignore[arg-type]
    await asyncio.sleep(0.2)
    assert quick.opened_at is not None and slow.opened_at is None
    held.discard(slow)  # type: ignore[arg-type]


async def test_held_sse_replies_of_two_event_loops_each_open_on_their_own():
    """One wire served by two event loops at once (two servers in two threads): each loop keeps its own
    held responses and timer."""
    import asyncio
    import threading

    from mcpfusion.mcp.settings import TransportSettings
    from mcpfusion.mcp.streams import Holds

    holds = Holds(TransportSettings(sse_hold_seconds=0.05))
    here, there = _Held(), _Held()
    holds.add(here)  # type: ignore[arg-type]

    async def other_loop() -> None:
        holds.add(there)  # type: ignore[arg-type]
        await asyncio.sleep(0.15)

    thread = threading.Thread(target=asyncio.run, args=(other_loop(),))
    thread.start()
    await asyncio.sleep(0.15)
    await asyncio.to_thread(thread.join)
    assert here.opened_at is not None and there.opened_at is not None

    async def hold_one() -> None:
        holds.add(_Held()).discard(_Held())  # type: ignore[arg-type]

    for _ in range(5):  # loops that came and went (one per test, say) are forgotten once closed
        await asyncio.to_thread(asyncio.run, hold_one())
    assert len(holds._loops) <= 2  # this one and the last
