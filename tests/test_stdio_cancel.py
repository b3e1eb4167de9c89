"""stdio cancellation on both wires, notifications and responses never answered over stdio, and sessions that
stay alive while a request of theirs is in flight (in memory and in Redis)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp.sessions import InMemorySessionStore, Session, SessionLimitError, SessionLimits, new_session_id
from mcpfusion.mcp.stdio import StdioBridge
from tests.stdio_lines import WAIT, Lines

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo": {"name": "t",
        "version": "1"}, "io.modelcontextprotocol/clientCapabilities": {}}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class Probe:
    """A tool whose actions report when they start and when they are cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()
        tool = Tool("work", description="x", exposition="flat")

        @tool.action(readonly=True)
        async def hang(ctx: Context, notify: bool = False) -> str:
            """Wait until cancelled (or released)."""
            if notify:
                await ctx.progress(1, 2, "started")
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return "released"

        @tool.action(readonly=True)
        async def ask(ctx: Context) -> str:
            """Elicit a name."""
            answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
            return f"{answer['action']}:{(answer.get('content') or {}).get('name')}"

        self.tool = tool


async def bridge_for(fusion: MCPFusion) -> tuple[StdioBridge, Lines]:
    lines = Lines()
    bridge = StdioBridge(fusion.build_app(), lines.write, headers={})
    await bridge.startup()
    return bridge, lines


def modern_call(msg_id: Any, name: str, arguments: dict[str, Any], **meta: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments, "_meta": {**META, **meta}}})


def cancel(request_id: Any, with_meta: bool = False) -> str:
    params: dict[str, Any] = {"requestId": request_id, "reason": "caller cancelled"}
    if with_meta:
        params["_meta"] = META
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})


async def settle(bridge: StdioBridge) -> None:
    """Wait until every line the bridge is handling is done."""
    if bridge.tasks:
        await asyncio.wait_for(asyncio.gather(*bridge.tasks, return_exceptions=True), WAIT)


# -- 1. notifications/cancelled over stdio ------------------------------------------------------------

@pytest.mark.parametrize("with_meta", [False, True])
async def test_a_2026_call_is_cancelled_by_notifications_cancelled_and_not_answered(with_meta):
    """The SDK cancels over stdio with a notification without `_meta`: the handler is cancelled, neither the
    call nor the notification gets a line."""
    probe = Probe()
    bridge, lines = await bridge_for(MCPFusion("c", tools=[probe.tool]))
    bridge.submit(modern_call(2, "work_hang", {}))
    await asyncio.wait_for(probe.started.wait(), WAIT)
    bridge.submit(cancel(2, with_meta))
    await asyncio.wait_for(probe.cancelled.wait(), WAIT)
    await settle(bridge)
    bridge.submit(modern_call(3, "work_hang", {}))  # the id map is left clean: a later call still answers
    await asyncio.wait_for(probe.started.wait(), WAIT)
    probe.release.set()
    await lines.wait_for(lambda m: m.get("id") == 3)
    assert await bridge.close() == 0
    assert lines.items == lines.with_id(3), lines.items  # nothing for 2, nothing for the notification


async def test_a_streaming_2026_call_is_cancelled_after_its_first_notification():
    probe = Probe()
    bridge, lines = await bridge_for(MCPFusion("c", tools=[probe.tool]))
    bridge.submit(modern_call(5, "work_hang", {"notify": True}, progressToken="p"))
    await lines.wait_for(lambda m: m.get("method") == "notifications/progress")
    bridge.submit(cancel(5))
    await asyncio.wait_for(probe.cancelled.wait(), WAIT)
    await settle(bridge)
    assert await bridge.close() == 0
    assert [m.get("method") for m in lines.items] == ["notifications/progress"], lines.items


async def test_a_cancelled_2026_listen_stops_streaming():
    fusion = MCPFusion("c", tools=[Probe().tool])
    bridge, lines = await bridge_for(fusion)
    bridge.submit(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": True}, "_meta": META}}))
    await lines.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    bridge.submit(cancel(1, with_meta=True))
    await settle(bridge)  # the listen's line is over: its stream ended
    await fusion.notify_tools_changed()
    await asyncio.sleep(0)
    assert await bridge.close() == 0
    assert [m.get("method") for m in lines.items] == ["notifications/subscriptions/acknowledged"], lines.items


async def test_a_session_wire_call_is_still_cancelled_over_stdio():
    probe = Probe()
    bridge, lines = await bridge_for(MCPFusion("c", tools=[probe.tool]))
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line(json.dumps(INITED))
    bridge.submit(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "work_hang"}}))
    await asyncio.wait_for(probe.started.wait(), WAIT)
    bridge.submit(cancel(7))
    await asyncio.wait_for(probe.cancelled.wait(), WAIT)
    await settle(bridge)
    assert await bridge.close() == 0
    assert lines.with_id(7) == [] and [m.get("id") for m in lines.items] == [0], lines.items


# -- 2. notifications and responses are never answered -------------------------------------------------

async def test_notifications_and_responses_get_no_line_before_and_after_initialize():
    bridge, lines = await bridge_for(MCPFusion("c", tools=[Probe().tool]))
    unanswered = [
        INITED,
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "id": "x9", "result": {}},  # a response to no request of the server's
        {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},  # nothing runs
    ]
    for message in unanswered:
        await bridge.handle_line(json.dumps(message))
    assert lines.items == []
    await bridge.handle_line(json.dumps(INIT))
    for message in [*unanswered, {"jsonrpc": "2.0", "method": "notifications/whatever", "params": 5},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"bad": 1}}},
                    {"jsonrpc": "2.0", "id": "x11", "error": {"code": 1, "message": "m"}}]:
        await bridge.handle_line(json.dumps(message))
    await bridge.close()
    assert [m.get("id") for m in lines.items] == [0], lines.items


async def test_lines_that_are_no_notification_nor_response_are_still_answered():
    bridge, lines = await bridge_for(MCPFusion("c", tools=[Probe().tool]))
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line('{"jsonrpc": "2.0", "id": 4}')  # neither a method nor a result
    await bridge.handle_line('{"jsonrpc": "2.0", "method": 5}')  # a method that is no name
    await bridge.handle_line("[1]")
    await bridge.close()
    assert [(m.get("id"), "error" in m) for m in lines.items] == [(0, False), (4, True), (None, True),
                                                                   (None, True)], lines.items


# -- 3. a session with a request in flight is not idle ------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def new_session(**kwargs: Any) -> Session:
    return Session(id=new_session_id(), protocol_version="2025-11-25", **kwargs)


async def test_a_busy_session_is_never_closed_for_a_new_one():
    clock = Clock()
    store = InMemorySessionStore(idle_timeout=60, limits=SessionLimits(total=2), evict_after=10, clock=clock)
    busy, idle = new_session(), new_session()
    await store.create(busy)
    clock.now += 1
    await store.create(idle)
    store.request_started(busy)
    clock.now += 30  # both past `evict_after`; the busy one is the least recently used
    await store.create(third := new_session())  # closes the idle one, not the busy one
    assert await store.get(idle.id) is None and await store.get(third.id) is not None
    store.request_started(third)
    clock.now += 30
    with pytest.raises(SessionLimitError):  # every session busy: nothing to close
        await store.create(new_session())
    assert await store.get(busy.id) is not None and await store.get(third.id) is not None


async def test_a_busy_session_does_not_expire_and_its_idle_clock_restarts_when_its_last_request_ends():
    clock = Clock()
    store = InMemorySessionStore(idle_timeout=60, clock=clock)
    busy, idle = new_session(), new_session()
    await store.create(busy)
    await store.create(idle)
    store.request_started(busy)
    store.request_started(busy)  # two requests in flight: busy until both end
    clock.now += 100
    assert await store.get(idle.id) is None
    assert await store.get(busy.id) is not None
    clock.now += 100
    store.request_ended(busy)
    clock.now += 100
    assert await store.get(busy.id) is not None
    clock.now += 100
    store.request_ended(busy)  # the last one: its idle clock restarts now
    clock.now += 59
    assert await store.get(busy.id) is not None
    clock.now += 61
    assert await store.get(busy.id) is None


async def test_the_sweep_keeps_a_busy_session_and_drops_the_idle_ones_behind_it():
    clock = Clock()
    store = InMemorySessionStore(idle_timeout=60, clock=clock)
    busy, idle = new_session(), new_session()
    await store.create(busy)
    await store.create(idle)
    store.request_started(busy)
    clock.now += 120
    await store.create(new_session())  # (every create sweeps)
    assert len(store) == 2 and await store.get(busy.id) is not None
    store.request_ended(busy)
    store.request_ended(busy)  # (one more than started: harmless)
    assert await store.get(busy.id) is not None


async def test_a_call_waiting_for_the_clients_answer_outlives_its_idle_timeout():
    """Over stdio (the session wire in-process): the client answers the elicitation after the idle timeout;
    the answer is taken, the call answers, and the session is still there."""
    clock = Clock()
    probe = Probe()
    fusion = MCPFusion("c", tools=[probe.tool], session_store=InMemorySessionStore(idle_timeout=60, clock=clock))
    bridge, lines = await bridge_for(fusion)
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line(json.dumps(INITED))
    bridge.submit(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "work_ask"}}))
    asked = await lines.wait_for(lambda m: m.get("method") == "elicitation/create")
    clock.now += 600  # the client takes ten idle timeouts to answer
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": {
        "action": "accept", "content": {"name": "late"}}}))
    answer = await lines.wait_for(lambda m: m.get("id") == 1)
    assert answer["result"]["content"][0]["text"] == "accept:late", answer
    clock.now += 59  # the idle clock restarted when the call ended
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    assert (await lines.wait_for(lambda m: m.get("id") == 2)).get("result") == {}
    await bridge.close()


async def test_redis_renews_a_session_while_a_request_runs_and_when_it_ends(redis_server):
    from mcpfusion.redis import from_url
    from mcpfusion.redis import sessions as redis_sessions

    stores = from_url(redis_server.url, idle_timeout=60)
    store = stores.sessions
    try:
        session = new_session(principal="p1")
        await store.create(session)
        key = store._key(session.id)

        async def renewals_done() -> None:
            await asyncio.wait_for(asyncio.gather(*store._renewals), WAIT)

        store.request_started(session)
        store.request_started(session)
        assert store._timer is not None  # one timer for the store, armed while requests run
        await stores.client.pexpire(key, 5_000)  # nearly idle-expired...
        store._renew_held()  # ...the timer's turn renews the full idle timeout
        await renewals_done()
        assert await stores.client.pttl(key) > 50_000
        store.request_ended(session)
        assert store._timer is not None  # one still runs
        await stores.client.pexpire(key, 5_000)
        store._held[session.id][2] -= redis_sessions.RENEW_AT_END_AFTER + 1  # the last renewal is old
        store.request_ended(session)  # the last one: renewed now, the timer disarmed
        assert store._timer is None
        await renewals_done()
        assert await stores.client.pttl(key) > 50_000
        await store.delete(session.id)
        store.request_started(session)  # a renewal never brings back a deleted session
        store._renew_held()
        await renewals_done()
        store.request_ended(session)
        assert await store.get(session.id) is None and not await stores.client.exists(key)
    finally:
        await stores.aclose()
