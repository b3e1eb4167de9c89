"""Redis stores under concurrency and faults: concurrent session changes, notifications and progress during an
outage, a frozen or full Redis, a resumed stream whose replica died. Each test runs its own redis-server
(`redis_server`, 127.0.0.1, a free port) and stops it."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp.sessions import Session, new_session_id
from mcpfusion.mcp.streams import new_stream_id
from mcpfusion.redis import SessionStoreUnavailable, from_url
from mcpfusion.redis.client import COMMAND_TIMEOUT

VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
async def replicas_stores(redis_server):
    """Two processes' stores on one Redis (each its own client, broker and session cache)."""
    pair = [from_url(redis_server.url, idle_timeout=60) for _ in range(2)]
    try:
        yield pair
    finally:
        for stores in pair:
            await stores.aclose()


async def test_concurrent_session_changes_on_two_replicas_are_all_kept(replicas_stores):
    a, b = replicas_stores
    s = Session(id=new_session_id(), protocol_version=VERSION)
    await a.sessions.create(s)
    uris = [f"notes://n{i:02d}" for i in range(10)]

    async def subscribe(stores, uri: str) -> None:  # what resources/subscribe does: read, change, save
        session = await stores.sessions.get(s.id)
        session.subscriptions.append(uri)
        await stores.sessions.save(session)

    async def set_level() -> None:
        session = await b.sessions.get(s.id)
        session.log_level = "debug"
        await b.sessions.save(session)

    await asyncio.gather(*(subscribe((a, b)[i % 2], uri) for i, uri in enumerate(uris)), set_level())
    a.sessions.cache._entries.clear()
    got = await a.sessions.get(s.id)
    assert sorted(got.subscriptions) == uris and got.log_level == "debug"
    # An unsubscribe removes only its own URI, the idle timeout still applies to everything, and a DELETE wins.
    got.subscriptions.remove(uris[0])
    await a.sessions.save(got)
    b.sessions.cache._entries.clear()
    assert sorted((await b.sessions.get(s.id)).subscriptions) == uris[1:]
    assert 0 < await a.client.pttl(a.sessions._state_key(s.id)) <= 60_000
    assert await b.sessions.delete(s.id) is True
    got.subscriptions.append("notes://late")
    await a.sessions.save(got)  # a late save must not bring it back
    assert await a.client.exists(a.sessions._key(s.id), a.sessions._state_key(s.id)) == 0
    assert await a.sessions.get(s.id) is None


async def test_a_session_id_naming_another_key_is_unknown_not_an_error(replicas_stores):
    a, _ = replicas_stores
    s = Session(id=new_session_id(), protocol_version=VERSION)
    await a.sessions.create(s)
    got = await a.sessions.get(s.id)
    got.subscriptions.append("notes://x")
    await a.sessions.save(got)
    for sid in (f"{s.id}:state", "../sessions", f"x}}{s.id}"):
        assert await a.sessions.get(sid) is None


# -- notifications and progress are best effort ------------------------------------------------------------------


def _app(redis_url: str, **settings):
    saved: list[str] = []
    desk = Tool("desk", description="Notifying actions", exposition="flat")

    @desk.action()
    async def save(item: str) -> str:
        """Save, then tell subscribers."""
        saved.append(item)
        await fusion.notify_resource_updated("notes://saved")
        return f"saved {item}"

    @desk.action()
    async def progress(n: int, ctx: Context) -> str:
        """Report progress and log."""
        for i in range(n):
            await ctx.report_progress(i, n, f"step {i}")
            await ctx.info({"n": i})
        return f"done {n}"

    fusion = MCPFusion("mends", "1", tools=[desk], redis_url=redis_url, **settings)

    @fusion.resource_template("notes://{id}", mime_type="text/plain")
    async def note(id: str) -> str:  # noqa: A002
        """A note."""
        return id

    return fusion, fusion.build_app(), saved


@contextlib.asynccontextmanager
async def _served(redis_url: str, **settings) -> AsyncIterator[tuple[MCPFusion, Any, list[str]]]:
    """`_app`'s fusion, app and saved items, its shared Redis connections closed on exit."""
    fusion, app, saved = _app(redis_url, **settings)
    try:
        yield fusion, app, saved
    finally:
        await fusion.transport.shared.aclose()


@contextlib.asynccontextmanager
async def _client(app) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1",
                                 timeout=60) as http:
        yield http


async def _initialize(http: httpx.AsyncClient) -> dict[str, str]:
    r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        headers={"accept": ACCEPT})
    headers = {"accept": ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def _call(rid: int, name: str, arguments: dict, **params) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, **params}}


async def test_a_notification_redis_cannot_take_never_fails_the_action_that_sent_it(redis_server):
    async with _served(redis_server.url, reply_store_timeout=600.0) as (fusion, app, saved), _client(app) as http:
        headers = await _initialize(http)
        redis_server.stop()
        r = await http.post("/api/desk/save", json={"item": "order-1"})
        assert r.status_code == 200 and r.json() == "saved order-1"
        r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "desk_save", "arguments": {"item": "order-2"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}},
            headers={"accept": ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                     "mcp-name": "desk_save"})
        assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "saved order-2"
        assert saved == ["order-1", "order-2"]  # each ran once: nothing told the client to retry
        # A session-wire call whose progress and log messages Redis refuses to store (full: the session
        # can still be read) answers, its messages sent on its open stream, unstored.
        redis_server.start()
        headers = await _initialize(http)
        async with _full(redis_server):
            # (the app waits up to 600 s for a store it retries: an answer within 60 s is one not retried)
            r = await asyncio.wait_for(http.post(
                "/mcp", json=_call(3, "desk_progress", {"n": 3}, _meta={"progressToken": "p"}), headers=headers), 60)
            assert r.status_code == 200 and '"text":"done 3"' in r.text
            assert r.text.count('"method":"notifications/progress"') == 3


# -- a frozen Redis: fail fast -----------------------------------------------------------------------------------


async def test_a_frozen_redis_fails_a_command_within_a_few_seconds():
    """A server that accepts connections and never answers (stalled, overloaded, half-open): each command
    times out once (2 s), never 5 s times four attempts."""
    frozen = socket.socket()
    frozen.bind(("127.0.0.1", 0))
    frozen.listen(16)
    stores = from_url(f"redis://127.0.0.1:{frozen.getsockname()[1]}/0")
    try:
        # What bounds the wait, read off the client (no clock on a shared machine): one command timeout of
        # COMMAND_TIMEOUT, and a timeout is not among the errors retried (a dropped connection is).
        options = stores.client.connection_pool.connection_kwargs
        assert options["socket_timeout"] == COMMAND_TIMEOUT <= 2
        retried = options["retry"]._supported_errors
        assert not any(issubclass(RedisTimeoutError, error) for error in retried)
        with pytest.raises(SessionStoreUnavailable):  # (answered, not hung: 60 s is far beyond one timeout)
            await asyncio.wait_for(stores.sessions.get(new_session_id()), 60)
    finally:
        await stores.aclose()
        frozen.close()


# -- a full Redis (noeviction): 503 with Retry-After, no stream cut, no wait ------------------------------------


@contextlib.asynccontextmanager
async def _full(redis_server) -> AsyncIterator[None]:
    client = from_url(redis_server.url).client
    try:
        await client.config_set("maxmemory-policy", "noeviction")
        await client.config_set("maxmemory", "1")
        yield
    finally:
        await client.config_set("maxmemory", "0")
        await client.aclose()


async def test_a_full_redis_answers_session_changes_503_and_replies_at_once(redis_server):
    async with _served(redis_server.url, reply_store_timeout=600.0) as (fusion, app, _), _client(app) as http:
        headers = await _initialize(http)
        async with _full(redis_server):
            for rid, (method, params) in enumerate((("resources/subscribe", {"uri": "notes://n1"}),
                                                    ("logging/setLevel", {"level": "debug"}))):
                for accept in (ACCEPT, "application/json"):  # an SSE reply and a JSON one alike
                    r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": rid, "method": method,
                                                      "params": params}, headers={**headers, "accept": accept})
                    assert r.status_code == 503 and r.headers["retry-after"] == "5", (method, r.text)
                    assert r.json()["id"] == rid
            # A refusal is not retried for reply_store_timeout (600 s in this app): the reply comes at once.
            r = await asyncio.wait_for(http.post(
                "/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=headers), 60)
            assert r.status_code == 200 and '"id":9,"result":{}' in r.text


async def test_a_get_stream_goes_on_when_redis_cannot_store_its_notifications(redis_server):
    async with _served(redis_server.url) as (fusion, app, _):
        async with _client(app) as http:
            headers = await _initialize(http)
        wire = fusion.transport.session_wire
        session = await wire.sessions.get(headers["mcp-session-id"])
        events = wire._standalone(session, None, "token")  # the events the GET stream's response sends
        async with _full(redis_server):
            first = asyncio.ensure_future(anext(events))
            await asyncio.sleep(0.3)
            assert not first.done()  # no priming event (it cannot be stored), no crash: listening
            await fusion.notify_tools_changed()
            event = await asyncio.wait_for(first, 5)
            assert "id" not in event and "tools/list_changed" in event["data"]  # sent, unstored
        await events.aclose()


# -- a resumed stream whose request nothing runs any more ---------------------------------------------------------


async def test_a_resumed_stream_of_a_dead_replicas_request_ends_then_404s(redis_server):
    async with _served(redis_server.url) as (fusion, app, _), _client(app) as http:
        headers = await _initialize(http)
        # What a replica killed mid-call leaves: its stream's priming event and a progress event, no reply.
        wire = fusion.transport.session_wire
        stream_id = new_stream_id(headers["mcp-session-id"])
        priming = await wire.events.store_event(stream_id, None)
        await wire.events.store_event(stream_id, {"jsonrpc": "2.0", "method": "notifications/progress",
                                                  "params": {"progressToken": "p", "progress": 1}})
        get = {**headers, "accept": "text/event-stream", "last-event-id": priming}
        r = await asyncio.wait_for(http.get("/mcp", headers=get), 60)  # (it ended: before, it never did)
        assert r.status_code == 200 and '"progress":1' in r.text  # what was stored, then the end
        ids = re.findall(r"^id: (\S+)", r.text, re.M)
        again = await http.get("/mcp", headers={**get, "last-event-id": ids[-1]})
        assert again.status_code == 410 and "send the request again" in again.text


async def test_a_resumed_stream_of_a_running_request_waits_for_its_reply(redis_server):
    async with _served(redis_server.url, sse_hold_seconds=0.0) as (fusion, app, _), _client(app) as http:
        headers = await _initialize(http)
        wire = fusion.transport.session_wire
        stream_id = new_stream_id(headers["mcp-session-id"])
        priming = await wire.events.store_event(stream_id, None)
        wire.running_streams.add(stream_id)  # its call runs in this process (answers probes)
        get = {**headers, "accept": "text/event-stream", "last-event-id": priming}
        resumed = asyncio.ensure_future(http.get("/mcp", headers=get))
        await asyncio.sleep(7)  # past the probe's wait
        assert not resumed.done()
        await wire.broker.publish_event(wire.events, stream_id, f"stream:{stream_id}",
                                        {"jsonrpc": "2.0", "id": 4, "result": {}})
        r = await asyncio.wait_for(resumed, 5)
        assert '"id":4,"result":{}' in r.text
