"""Round 6o: what a client may keep in Redis for a replica whose pub/sub connection is being re-made.

1. Only what the server waits for is kept: an answer to a server request it sent and still awaits, a cancellation
   of a call running (marked) somewhere, its reason cut short; a session's kept messages are bounded in number
   and bytes, and go with its DELETE. A session evicted by Redis holds no quota slot.
2. A DELETE sent while a replica's pub/sub connection is being re-made still ends that session's calls there.
3. A cancellation kept for a request goes when the request ends: a later request reusing the id is not cancelled.
4. A duplicate or late answer is not kept.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
import redis as sync_redis

from mcpfusion.mcp.broker import KEPT, REFUSED, UNEXPECTED
from mcpfusion.mcp.sessions import Session, SessionLimits, SessionQuotaError
from mcpfusion.redis import broker as redis_broker
from mcpfusion.redis import from_url
from tests.test_redis_scale_out import initialize, session_headers
from tests.test_round6g import (
    HANG_GUARD,
    asked,
    asking_offline,
    desk,
    gate_reconnections,
    kill_pubsub,
    reply_of,
    served,
    stream_call,
    until,
)


def kept_keys(redis_server) -> list[bytes]:
    client = sync_redis.Redis(port=redis_server.port)
    try:
        return client.keys("*kept*")
    finally:
        client.close()


def kept_hash(redis_server, sid: str) -> dict[str, str]:
    client = sync_redis.Redis(port=redis_server.port, decode_responses=True)
    try:
        return client.hgetall(f"mcpf:kept:{sid}")
    finally:
        client.close()


def cancel_of(rid: Any, reason: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"requestId": rid}
    if reason is not None:
        params["reason"] = reason
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def answer_to(rid: str, ok: bool = True) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"action": "accept", "content": {"ok": ok}}}


# -- 1. only what the server waits for is kept -----------------------------------------------------------------


async def test_an_answer_to_a_request_the_server_never_sent_is_not_kept(redis_server):
    with served(desk(from_url(redis_server.url))) as url:
        async with httpx.AsyncClient(timeout=HANG_GUARD) as http:
            sid = await initialize(http, url)
            forged = {"jsonrpc": "2.0", "id": "s-0123456789abcdef", "result": {"junk": "x" * 200_000}}
            r = await http.post(url, json=forged, headers=session_headers(sid))
            assert r.status_code == 202, r.text  # nobody waits for it: nothing to retry
            assert not kept_keys(redis_server)


async def test_a_cancellation_of_a_request_running_nowhere_is_not_kept(redis_server):
    with served(desk(from_url(redis_server.url))) as url:
        async with httpx.AsyncClient(timeout=HANG_GUARD) as http:
            sid = await initialize(http, url)
            for rid in ("r1", 7, "x" * 5000):
                r = await http.post(url, json=cancel_of(rid, "y" * 100_000), headers=session_headers(sid))
                assert r.status_code == 202, r.text
            assert not kept_keys(redis_server)


async def test_a_cancellation_of_a_running_call_is_kept_cut_short_and_reaches_it_after_a_reconnection(
        redis_server):
    a_stores, b_stores = from_url(redis_server.url), from_url(redis_server.url)
    gate = threading.Event()
    gate_reconnections(a_stores.broker, gate)
    with served(desk(a_stores)) as a, served(desk(b_stores)) as b:
        async with httpx.AsyncClient(timeout=HANG_GUARD * 2) as http:
            sid = await initialize(http, a)
            messages: list[Any] = []
            running = asyncio.create_task(stream_call(http, a, sid, "desk_wait", messages))
            await until(lambda: "w:cancel:41" in kept_hash(redis_server, sid), "A marked its call running")
            kill_pubsub(redis_server)
            await until(lambda: not a_stores.broker.ready, "A saw its pub/sub connection drop")
            posted = await http.post(b, json=cancel_of(41, "z" * 10_000), headers=session_headers(sid))
            assert posted.status_code == 202, posted.text
            kept = json.loads(kept_hash(redis_server, sid)["k:cancel:41"])
            assert kept["reason"] == "z" * 256, len(kept["reason"])
            gate.set()
            await asyncio.wait_for(running, HANG_GUARD)
    assert not any(isinstance(m, dict) and "result" in m for m in messages), messages
    assert not kept_keys(redis_server)  # taken, and its mark gone with the call


async def test_what_a_session_keeps_is_bounded_in_bytes_and_number(redis_server, monkeypatch):
    stores = from_url(redis_server.url)
    broker = stores.broker
    try:
        assert await broker.publish_kept("t", {"a": 1}, "sid", "resp:never") == (0, UNEXPECTED)
        assert await broker.expect([("sid", "resp:big", 60)]) == [True]
        big = {"junk": "x" * redis_broker.MAX_KEPT_BYTES}
        assert await broker.publish_kept("t", big, "sid", "resp:big") == (0, REFUSED)
        monkeypatch.setattr(redis_broker, "MAX_KEPT", 3)
        boxes = [f"resp:{i}" for i in range(4)]
        assert await broker.expect([("sid", box, 60) for box in boxes]) == [True] * 4
        statuses = [(await broker.publish_kept("t", {"n": i}, "sid", box))[1] for i, box in enumerate(boxes)]
        assert statuses == [KEPT, KEPT, KEPT, REFUSED]
        assert (await broker.publish_kept("t", {"n": 9}, "sid", "resp:0"))[1] == KEPT  # the first one stays
        assert await broker.collect([("sid", "resp:0"), ("sid", "resp:3")]) == [{"n": 0}, None]
        monkeypatch.setattr(redis_broker, "MAX_MARKS", 8)
        # 5 boxes are expected and 2 of them keep a message: room for one more
        assert await broker.expect([("sid", f"cancel:{i}", 60) for i in range(3)]) == [True, False, False]
        assert await broker.expect([("sid", "resp:1", 60)], fresh=False) == [True]  # (renewed: no new box)
        assert await broker.collect([("sid", "resp:1")], forget=True) == [{"n": 1}]  # (renewed, still kept)
        assert await broker.publish_kept("t", {"n": 1}, "sid", "resp:1") == (0, UNEXPECTED)  # (forgotten)
    finally:
        await stores.aclose()


async def test_a_delete_drops_what_was_kept_for_the_session(redis_server):
    async with asking_offline(redis_server) as (http, url, sid, rid, gate, running, _):
        posted = await http.post(url, json=answer_to(rid), headers=session_headers(sid))
        assert posted.status_code == 202, posted.text
        assert f"k:resp:{rid}" in kept_hash(redis_server, sid)
        deleted = await http.delete(url, headers=session_headers(sid))
        assert deleted.status_code == 200, deleted.text
        # Nothing kept is left. (A round of running-call marks in flight may write the call's mark again
        # meanwhile: it goes when the call, cancelled by the DELETE, ends.)
        assert not [field for field in kept_hash(redis_server, sid) if field.startswith("k:")]
        gate.set()
        await asyncio.wait_for(running, HANG_GUARD)
    assert not kept_keys(redis_server)


async def test_sessions_evicted_by_redis_hold_no_quota_slot(redis_server):
    stores = from_url(redis_server.url)
    store = stores.sessions
    store.limits = SessionLimits(total=1000, per_principal=2, per_tenant=1000)

    async def create(sid: str) -> None:
        await store.create(Session(id=sid, protocol_version="2025-11-25", principal="alice", tenant="acme"))

    try:
        await create("one")
        await create("two")
        with pytest.raises(SessionQuotaError):
            await create("three")
        await stores.client.delete(store._key("one"), store._key("two"))  # evicted (maxmemory) behind its back
        await create("three")
        await create("four")
        with pytest.raises(SessionQuotaError):  # live sessions still count
            await create("five")
        owned = store._indexes(Session(id="x", protocol_version="2025-11-25", principal="alice"))[1]
        assert set(await stores.client.zrange(owned, 0, -1)) == {"three", "four"}  # the dead ones dropped
    finally:
        await stores.aclose()


# -- 2. a DELETE during a reconnection ends the session's calls ------------------------------------------------


async def test_a_delete_posted_while_the_pubsub_connection_is_remade_ends_the_call(redis_server):
    a_stores, b_stores = from_url(redis_server.url), from_url(redis_server.url)
    gate = threading.Event()
    gate_reconnections(a_stores.broker, gate)
    with served(desk(a_stores)) as a, served(desk(b_stores)) as b:
        async with httpx.AsyncClient(timeout=HANG_GUARD * 2) as http:
            sid = await initialize(http, a)
            messages: list[Any] = []
            running = asyncio.create_task(stream_call(http, a, sid, "desk_wait", messages))
            await until(lambda: messages and a_stores.broker.has_subscribers("cancel"), "the call runs on A")
            kill_pubsub(redis_server)
            await until(lambda: not a_stores.broker.ready, "A saw its pub/sub connection drop")
            deleted = await http.delete(b, headers=session_headers(sid))  # B: A runs the call
            assert deleted.status_code == 200, deleted.text
            gate.set()  # subscribed again: A looks at the sessions of its calls
            await asyncio.wait_for(running, HANG_GUARD)  # (without the fix: the call's 120 s)
    assert not any(isinstance(m, dict) and "result" in m for m in messages), messages


# -- 3. a kept cancellation goes with its request --------------------------------------------------------------


async def test_a_cancellation_acted_on_leaves_nothing_for_a_later_request_with_its_id(redis_server):
    a_stores, b_stores = from_url(redis_server.url), from_url(redis_server.url)
    with served(desk(a_stores)) as a, served(desk(b_stores)) as b:
        async with httpx.AsyncClient(timeout=HANG_GUARD * 2) as http:
            sid = await initialize(http, a)
            messages: list[Any] = []
            running = asyncio.create_task(stream_call(http, a, sid, "desk_wait", messages))
            await until(lambda: "w:cancel:41" in kept_hash(redis_server, sid), "A marked its call running")
            posted = await http.post(b, json=cancel_of(41, "stop"), headers=session_headers(sid))
            assert posted.status_code == 202, posted.text
            await asyncio.wait_for(running, HANG_GUARD)  # A heard it at once
            assert not kept_keys(redis_server)  # (without the fix: kept 120 s, for the next request 41)
            again: list[Any] = []
            second = asyncio.create_task(stream_call(http, a, sid, "desk_wait", again))
            await until(lambda: "w:cancel:41" in kept_hash(redis_server, sid), "A marked the new call 41")
            assert "k:cancel:41" not in kept_hash(redis_server, sid)
            await http.post(a, json=cancel_of(41), headers=session_headers(sid))
            await asyncio.wait_for(second, HANG_GUARD)
    assert not kept_keys(redis_server)


# -- 4. duplicate and late answers ------------------------------------------------------------------------------


async def test_duplicate_and_late_answers_are_not_kept(redis_server):
    with served(desk(from_url(redis_server.url))) as url:
        async with httpx.AsyncClient(timeout=HANG_GUARD * 2) as http:
            sid = await initialize(http, url)
            messages: list[Any] = []
            running = asyncio.create_task(stream_call(http, url, sid, "desk_ask", messages))
            await until(lambda: asked(messages) is not None, "the elicitation was sent")
            rid = asked(messages)["id"]  # type: ignore[index]
            first, second = await asyncio.gather(
                http.post(url, json=answer_to(rid, True), headers=session_headers(sid)),
                http.post(url, json=answer_to(rid, False), headers=session_headers(sid)))
            assert (first.status_code, second.status_code) == (202, 202), (first.text, second.text)
            await asyncio.wait_for(running, HANG_GUARD)
            assert "answered accept" in reply_of(messages)["result"]["content"][0]["text"]
            assert not kept_keys(redis_server)
            late = await http.post(url, json=answer_to(rid), headers=session_headers(sid))
            assert late.status_code == 202, late.text  # nobody waits for it any more: nothing to retry
            assert not kept_keys(redis_server)
