"""Round 6g: what a Redis pub/sub reconnection or a Redis restart must not cost.

1. A client's answer to a server request (an elicitation) or a `notifications/cancelled`, posted while the waiting
   replica's pub/sub connection is being re-made, still reaches the call: it is kept as well as published, and the
   waiter collects it once subscribed again (a broker that keeps nothing and reached no one answers 503).
2. Concurrent initializes never get past the per-principal or per-tenant session quota on Redis.
3. A call waiting for the client's answer ends (-32001, the session ended) once its session is gone with the
   store, instead of waiting `client_request_timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis as sync_redis

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp.broker import InMemoryBroker
from mcpfusion.mcp.sessions import InMemorySessionStore, Session, SessionLimits, SessionQuotaError
from mcpfusion.redis import RedisBroker, RedisStores, from_url
from mcpfusion.redis.sessions import RedisSessionStore
from tests.mcp_app import serve
from tests.test_redis_scale_out import SSE, call, initialize, session_headers, sse_events

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
HANG_GUARD = 30.0  # seconds: a hang guard only (without the fixes these calls wait 90 s or more)


def desk(stores: RedisStores | None = None, **settings: Any) -> MCPFusion:
    tool = Tool("desk", exposition="flat")

    @tool.action()
    async def ask(ctx: Context) -> str:
        """Ask the user."""
        answer = await ctx.elicit("Sure?", SCHEMA)
        return f"answered {answer['action']} {answer.get('content')}"

    @tool.action()
    async def wait(ctx: Context) -> str:
        """Wait for a cancellation (or 120 s)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.wait_cancelled(), 120)
        return "cancelled" if ctx.cancelled else "not cancelled"

    stored = {} if stores is None else {"session_store": stores.sessions, "event_store": stores.events,
                                        "broker": stores.broker}
    return MCPFusion("r6g", tools=[tool], client_request_timeout=90, **stored, **settings)


def gate_reconnections(broker: RedisBroker, gate: threading.Event) -> None:
    """Hold the broker's reconnections (not its first connection) until `gate` is set: what is posted meanwhile
    meets a replica whose pub/sub connection is down, deterministically."""
    connect = broker._connect

    async def gated() -> Any:
        if broker.connections:
            while not gate.is_set():
                await asyncio.sleep(0.01)
        return await connect()

    broker._connect = gated  # type: ignore[method-assign]


async def until(condition, what: str) -> None:
    for _ in range(int(HANG_GUARD / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never: {what}")


@contextlib.contextmanager
def served(fusion: MCPFusion) -> Iterator[str]:
    with serve(fusion.build_app()) as base:
        yield base + "/mcp"


async def stream_call(http: httpx.AsyncClient, url: str, sid: str, name: str, messages: list[Any]) -> None:
    """One SSE tools/call (id 41); appends each message (None for the priming event) as it comes."""
    request = {**call(name, {}), "id": 41}
    async with http.stream("POST", url, json=request, headers=session_headers(sid, accept=SSE)) as r:
        assert r.status_code == 200, await r.aread()
        async for event in sse_events(r):
            messages.append(event.get("data"))


def asked(messages: list[Any]) -> dict[str, Any] | None:
    return next((m for m in messages if isinstance(m, dict) and m.get("method") == "elicitation/create"), None)


def reply_of(messages: list[Any]) -> dict[str, Any]:
    replies = [m for m in messages if isinstance(m, dict) and "id" in m and ("result" in m or "error" in m)]
    assert len(replies) == 1, messages
    return replies[0]


def kill_pubsub(redis_server) -> None:
    client = sync_redis.Redis(port=redis_server.port)
    try:
        client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    finally:
        client.close()


@contextlib.asynccontextmanager
async def asking_offline(redis_server) -> AsyncIterator[tuple[httpx.AsyncClient, str, str, Any, threading.Event,
                                                               asyncio.Task[None], list[Any]]]:
    """A served desk whose `desk_ask` call waits for the client's answer while the replica's pub/sub connection
    is down, its re-subscription held until `gate` is set: (http, url, session id, the request's id, gate, the
    call's stream task, its messages)."""
    stores = from_url(redis_server.url)
    gate = threading.Event()
    gate_reconnections(stores.broker, gate)
    with served(desk(stores)) as url:
        async with httpx.AsyncClient(timeout=HANG_GUARD * 2) as http:
            sid = await initialize(http, url)
            messages: list[Any] = []
            running = asyncio.create_task(stream_call(http, url, sid, "desk_ask", messages))
            await until(lambda: asked(messages) is not None, "the elicitation was sent")
            kill_pubsub(redis_server)
            await until(lambda: not stores.broker.ready, "the replica saw its pub/sub connection drop")
            yield http, url, sid, asked(messages)["id"], gate, running, messages  # type: ignore[index]


# -- 1. answers and cancellations posted while a pub/sub connection is re-made -------------------------------


async def test_an_answer_posted_while_the_pubsub_connection_is_remade_reaches_the_call(redis_server):
    async with asking_offline(redis_server) as (http, url, sid, rid, gate, running, messages):
        answer = {"jsonrpc": "2.0", "id": rid, "result": {"action": "accept", "content": {"ok": True}}}
        posted = await http.post(url, json=answer, headers=session_headers(sid))
        assert posted.status_code == 202, posted.text
        gate.set()  # subscribed again: the kept answer is collected
        await asyncio.wait_for(running, HANG_GUARD)
    reply = reply_of(messages)
    assert reply["result"]["content"][0]["text"] == "answered accept {'ok': True}", reply
    assert not sync_redis.Redis(port=redis_server.port).keys("*kept*")  # taken, not left to expire


async def test_a_cancellation_posted_while_the_pubsub_connection_is_remade_stops_the_call(redis_server):
    a_stores, b_stores = from_url(redis_server.url), from_url(redis_server.url)
    gate = threading.Event()
    gate_reconnections(a_stores.broker, gate)
    gate_reconnections(b_stores.broker, gate)
    with served(desk(a_stores)) as a, served(desk(b_stores)) as b:
        async with httpx.AsyncClient(timeout=HANG_GUARD * 2) as http:
            sid = await initialize(http, a)
            messages: list[Any] = []
            running = asyncio.create_task(stream_call(http, a, sid, "desk_wait", messages))
            await until(lambda: messages and a_stores.broker.has_subscribers("cancel"), "the call runs on A")
            kill_pubsub(redis_server)
            await until(lambda: not a_stores.broker.ready, "A saw its pub/sub connection drop")
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
            posted = await http.post(b, json=cancel, headers=session_headers(sid))  # B: A runs the call
            assert posted.status_code == 202, posted.text
            gate.set()
            await asyncio.wait_for(running, HANG_GUARD)
    # A cancelled request ends its stream without a reply (the handler never returned "not cancelled").
    assert not any(isinstance(m, dict) and "result" in m for m in messages), messages


class ForgetfulBroker(InMemoryBroker):
    """A cross-process broker that keeps nothing (no `publish_kept`): nobody here listens."""

    distributed = True


@pytest.mark.parametrize("broker, status", [(ForgetfulBroker, 503), (InMemoryBroker, 202)])
async def test_an_answer_nobody_received_nor_kept_is_a_503_to_retry(broker, status):
    fusion = desk(broker=broker())
    with served(fusion) as url:
        async with httpx.AsyncClient(timeout=HANG_GUARD) as http:
            sid = await initialize(http, url)
            ours = {"jsonrpc": "2.0", "id": "s-0123456789abcdef", "result": {"action": "cancel"}}
            r = await http.post(url, json=ours, headers=session_headers(sid))
            # Across processes the waiter may be between two connections: retry. In one process nobody waits.
            assert r.status_code == status, r.text
            if status == 503:
                assert r.headers["retry-after"]
            # An id no request of this server has: nobody waits for it anywhere, nothing to retry.
            other = await http.post(url, json={**ours, "id": 5}, headers=session_headers(sid))
            assert other.status_code == 202, other.text


# -- 2. session quotas under concurrent initializes ----------------------------------------------------------


async def test_concurrent_creates_keep_to_the_principal_and_tenant_quotas_on_redis(redis_server):
    stores = from_url(redis_server.url)
    store: RedisSessionStore = stores.sessions
    store.limits = SessionLimits(total=1000, per_principal=3, per_tenant=6)

    async def create(i: int, principal: str, tenant: str) -> bool:
        try:
            await store.create(Session(id=f"{principal}-{i}", protocol_version="2025-11-25",
                                       principal=principal, tenant=tenant))
        except SessionQuotaError:
            return False
        return True

    try:
        same = await asyncio.gather(*(create(i, "alice", "acme") for i in range(20)))
        assert sum(same) == 3, same
        # Another principal of the tenant: the tenant has room for 3 more, however many come at once.
        others = await asyncio.gather(*(create(i, f"user{i}", "acme") for i in range(20)))
        assert sum(others) == 3, others
        assert await stores.client.zcard(f"{store.index}") == 6
    finally:
        await stores.aclose()


async def test_concurrent_creates_keep_to_the_quotas_in_memory():
    store = InMemorySessionStore(limits=SessionLimits(total=1000, per_principal=3, per_tenant=6))

    async def create(i: int, principal: str) -> bool:
        try:
            await store.create(Session(id=f"{principal}-{i}", protocol_version="2025-11-25", principal=principal,
                                       tenant="acme"))
        except SessionQuotaError:
            return False
        return True

    assert sum(await asyncio.gather(*(create(i, "alice") for i in range(20)))) == 3
    assert sum(await asyncio.gather(*(create(i, f"user{i}") for i in range(20)))) == 3


# -- 3. a call waiting for an answer ends with its session ---------------------------------------------------


async def ends_with_its_lost_session(redis_server, lose, **settings: Any) -> None:
    stores = from_url(redis_server.url)
    with served(desk(stores, **settings)) as url:
        async with httpx.AsyncClient(timeout=HANG_GUARD * 2) as http:
            sid = await initialize(http, url)
            messages: list[Any] = []
            running = asyncio.create_task(stream_call(http, url, sid, "desk_ask", messages))
            await until(lambda: asked(messages) is not None, "the elicitation was sent")
            await asyncio.to_thread(lose)
            await asyncio.wait_for(running, HANG_GUARD)  # (without the fix: client_request_timeout, 90 s)
            gone = await http.post(url, json=call("desk_ask", {}), headers=session_headers(sid))
            assert gone.status_code == 404, gone.text
    error = reply_of(messages)["error"]
    assert error["code"] == -32001, error
    assert "session ended" in error["message"] and "elicitation/create" in error["message"], error


async def test_a_waiting_call_ends_when_a_redis_restart_loses_its_session(redis_server):
    await ends_with_its_lost_session(redis_server, redis_server.restart)


async def test_a_waiting_call_looks_at_its_session_as_often_as_a_get_stream(redis_server):
    def flush() -> None:  # the session is gone, yet no connection drops: only the periodic look finds it
        client = sync_redis.Redis(port=redis_server.port)
        try:
            client.flushall()
        finally:
            client.close()

    await ends_with_its_lost_session(redis_server, flush, sse_ping_seconds=0.3)
