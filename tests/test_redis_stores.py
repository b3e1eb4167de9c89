"""The Redis stores against a real redis-server: sessions, Redis Streams event store, pub/sub broker."""

from __future__ import annotations

import asyncio

import pytest

from mcpfusion.mcp.events import NotIssued, parse_event_id
from mcpfusion.mcp.sessions import Session, SessionLimitError, new_session_id
from mcpfusion.redis import SessionStoreUnavailable, from_url


@pytest.fixture
async def stores(redis_server):
    stores = from_url(redis_server.url, idle_timeout=60, max_sessions=3, max_events=50)
    try:
        yield stores
    finally:
        await stores.aclose()


@pytest.fixture
async def other(redis_server):
    """A second process's stores (own client and pub/sub connection) on the same Redis."""
    stores = from_url(redis_server.url, idle_timeout=60, max_sessions=3, max_events=50)
    try:
        yield stores
    finally:
        await stores.aclose()


def session(**kwargs) -> Session:
    return Session(id=new_session_id(), protocol_version="2025-11-25", **kwargs)


async def test_session_round_trip_keeps_every_field(stores, other):
    s = session(client_info={"name": "c", "version": "1"}, client_capabilities={"elicitation": {}},
                principal="p1", log_level="debug")
    await stores.sessions.create(s)
    got = await other.sessions.get(s.id)
    assert got is not None
    assert (got.id, got.protocol_version, got.client_info, got.client_capabilities, got.principal,
            got.log_level) == (s.id, "2025-11-25", {"name": "c", "version": "1"}, {"elicitation": {}}, "p1", "debug")
    got.initialized = True
    got.subscriptions.append("file:///a")
    await other.sessions.save(got)
    again = await stores.sessions.get(s.id)
    assert again.initialized is True and again.subscriptions == ["file:///a"]


async def test_session_delete_and_save_after_delete(stores, other):
    s = session()
    await stores.sessions.create(s)
    assert await other.sessions.delete(s.id) is True
    assert await stores.sessions.get(s.id) is None
    await stores.sessions.save(s)  # a late save must not resurrect it
    assert await stores.sessions.get(s.id) is None
    assert await stores.sessions.delete(s.id) is False


async def test_session_idle_expiry_is_refreshed_by_use(redis_server):
    stores = from_url(redis_server.url, idle_timeout=60)
    try:
        s = session()
        await stores.sessions.create(s)
        key = stores.sessions._key(s.id)
        await stores.client.pexpire(key, 50)  # nearly idle-expired...
        assert await stores.sessions.get(s.id) is not None  # ...use renews the full idle timeout
        assert await stores.client.pttl(key) > 50_000
        await stores.client.pexpire(key, 1)
        while await stores.client.exists(key):
            await asyncio.sleep(0.01)
        assert await stores.sessions.get(s.id) is None
    finally:
        await stores.aclose()


async def test_session_cap_is_shared_by_replicas(stores, other):
    for _ in range(2):
        await stores.sessions.create(session())
    await other.sessions.create(session())
    with pytest.raises(SessionLimitError):
        await other.sessions.create(session())
    assert await stores.sessions.count() == 3


async def test_unreachable_redis_means_unavailable_never_unknown(redis_server):
    stores = from_url(redis_server.url)
    try:
        s = session()
        await stores.sessions.create(s)
        redis_server.stop()
        with pytest.raises(SessionStoreUnavailable):  # the session may exist: 503, not 404
            await stores.sessions.get(s.id)
        with pytest.raises(SessionStoreUnavailable):
            await stores.sessions.create(session())
        redis_server.start()  # same port, empty: now the session is known not to exist (404, re-initialize)
        assert await stores.sessions.get(s.id) is None
        fresh = session()
        await stores.sessions.create(fresh)
        assert (await stores.sessions.get(fresh.id)).id == fresh.id
    finally:
        await stores.aclose()


async def test_event_ids_are_unique_increasing_and_replay_from_another_process(stores, other):
    stream = f"{new_session_id()}~abc"
    priming = await stores.events.store_event(stream, None)
    ids = [await stores.events.store_event(stream, {"jsonrpc": "2.0", "method": "m", "params": {"i": i}})
           for i in range(5)]
    assert len(set(ids)) == 5 and all(parse_event_id(i)[0] == stream for i in [priming, *ids])
    numbers = [int(i.rpartition("#")[2]) for i in [priming, *ids]]
    assert numbers == sorted(numbers)
    replayed_stream, events = await other.events.replay_after(ids[1])
    assert replayed_stream == stream
    assert [(eid, msg["params"]["i"]) for eid, msg in events] == [(ids[i], i) for i in (2, 3, 4)]
    # The priming event is never replayed.
    assert [eid for eid, _ in (await other.events.replay_after(priming))[1]] == ids


async def test_event_replay_of_unknown_or_bogus_ids(stores):
    assert await stores.events.replay_after("nostream~x#1") is None
    assert await stores.events.replay_after("no-hash-here") is None
    stream = "s~x"
    last = await stores.events.store_event(stream, {"jsonrpc": "2.0", "method": "m"})
    assert await stores.events.replay_after(f"{stream}#{'9' * 5000}") is None
    assert await stores.events.replay_after(last) == (stream, [])
    # Numbers past the stream's last event were never issued (up to the 40 digits an id may have).
    for number in (parse_event_id(last)[1] + 1, 10**24, 10**26, 10**40 - 1):
        with pytest.raises(NotIssued):
            await stores.events.replay_after(f"{stream}#{number}")
    assert await stores.events.replay_after(f"nostream~x#{10**40 - 1}") is None


async def test_event_retention_is_bounded(stores):
    stream = "s~bounded"
    for i in range(500):
        await stores.events.store_event(stream, {"jsonrpc": "2.0", "method": "m", "params": {"i": i}})
    assert await stores.client.xlen(stores.events._key(stream)) < 200  # MAXLEN ~ 50 (approximate trim)
    assert 0 < await stores.client.ttl(stores.events._key(stream)) <= 60


async def test_broker_crosses_processes_and_counts_receivers(stores, other):
    assert await stores.broker.publish("t", {"x": 1}) == 0
    async with other.broker.subscribe("t", "u") as sub, other.broker.subscribe("t") as sub2:
        assert await stores.broker.publish("t", ["id#1", {"x": 1}]) == 1  # one process, two local subscribers
        await stores.broker.publish("u", None)
        assert await sub.get() == ["id#1", {"x": 1}]
        assert await sub.get() is None
        assert await sub2.get() == ["id#1", {"x": 1}]
    assert await stores.broker.publish("t", {"x": 2}) == 0
    assert not other.broker.has_subscribers("t")


async def test_broker_resubscribes_after_redis_restart(redis_server):
    a, b = from_url(redis_server.url), from_url(redis_server.url)
    try:
        async with a.broker.subscribe("after-restart") as sub:
            redis_server.restart()
            # Publish until the reader has reconnected and re-subscribed (redis-py does it on connect).
            while True:
                try:
                    if await b.broker.publish("after-restart", "hello") == 1:
                        break
                except Exception:
                    pass
                await asyncio.sleep(0.05)
            assert await sub.get() == "hello"
    finally:
        await a.aclose()
        await b.aclose()


async def test_publish_event_stores_and_publishes_atomically_in_stream_order(stores, other):
    stream = "s~ordered"
    async with other.broker.subscribe("stream:s~ordered") as sub:
        # Two "replicas" appending concurrently: subscribers still see ids in increasing order.
        sent = await asyncio.gather(*(
            (stores if i % 2 else other).broker.publish_event(
                (stores if i % 2 else other).events, stream, "stream:s~ordered", {"jsonrpc": "2.0", "params": {"i": i}})
            for i in range(20)))
        assert all(receivers == 1 for _, receivers in sent)
        got = [await sub.get() for _ in range(20)]
    numbers = [int(event_id.rpartition("#")[2]) for event_id, _ in got]
    assert numbers == sorted(numbers) and len(set(numbers)) == 20
    assert sorted(eid for eid, _ in sent) == sorted(eid for eid, _ in got)
    # What was published is exactly what is stored.
    _, replayed = await stores.events.replay_after(f"{stream}#0")
    assert [[eid, msg] for eid, msg in replayed] == got


async def test_publish_event_falls_back_for_other_event_stores(stores):
    from mcpfusion.mcp.events import InMemoryEventStore

    memory = InMemoryEventStore()
    event_id, receivers = await stores.broker.publish_event(memory, "s~m", "nobody", {"jsonrpc": "2.0"})
    assert event_id.startswith("s~m#") and receivers == 0
    assert await memory.replay_after("s~m#0") == ("s~m", [(event_id, {"jsonrpc": "2.0"})])


async def test_sessions_written_by_another_server_version_still_load(stores):
    import json

    raw = {"id": "old-1", "protocol_version": "2025-06-18", "principal": "p", "field_from_the_future": 1}
    await stores.client.set(stores.sessions._key("old-1"), json.dumps(raw))
    got = await stores.sessions.get("old-1")
    assert (got.id, got.protocol_version, got.principal, got.client_info) == ("old-1", "2025-06-18", "p", {})


async def test_concurrent_session_reads_share_one_redis_call(stores, redis_server):
    created = [session(principal=f"p{i}") for i in range(3)]
    for s in created:
        await stores.sessions.create(s)
    await stores.sessions.get(created[0].id)  # loads the script; renews index entries on first use
    stats = (await stores.client.info("commandstats")).get("cmdstat_evalsha", {"calls": 0})["calls"]
    got = await asyncio.gather(*(stores.sessions.get(s.id) for s in created), stores.sessions.get("nope"))
    assert [g.principal if g else None for g in got] == ["p0", "p1", "p2", None]
    assert (await stores.client.info("commandstats"))["cmdstat_evalsha"]["calls"] == stats + 1


async def test_a_finished_request_stream_is_kept_briefly(redis_server):
    stores = from_url(redis_server.url, idle_timeout=1800, finished_retention=60)
    try:
        key = stores.events._key("s~call")
        await stores.events.store_event("s~call", None)  # priming
        await stores.broker.publish_event(stores.events, "s~call", "t", {"jsonrpc": "2.0", "method": "note"})
        assert 60 < await stores.client.ttl(key) <= 1800
        await stores.broker.publish_event(stores.events, "s~call", "t", {"jsonrpc": "2.0", "id": 1, "result": {}})
        assert 0 < await stores.client.ttl(key) <= 60
    finally:
        await stores.aclose()


async def test_app_shutdown_closes_the_redis_stores(redis_server):
    import httpx

    from mcpfusion import MCPFusion

    fusion = MCPFusion(name="closing", version="1", redis_url=redis_server.url, json_response=True)
    app = fusion.build_app()
    shared = fusion.transport.shared
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                headers={"accept": "application/json, text/event-stream"})
            assert r.status_code == 200 and await shared.sessions.get(r.headers["mcp-session-id"]) is not None
        async with shared.broker.subscribe("server"):  # starts the pub/sub reader task
            pass
        assert [t for t in asyncio.all_tasks() if t.get_name() == "mcpfusion-redis-broker"]
    # No reader task is left pending at exit ("Task was destroyed but it is pending").
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "mcpfusion-redis-broker" and not t.done()]


async def test_events_and_broker_write_messages_as_the_wire_does(stores, other):
    # A log's data holding a datetime, a pydantic model or NaN: what the wire writes of it (ISO text, the model's
    # fields, null) is what Redis keeps and replays. `json.dumps` refused the first two (the event went out
    # unstored: a client resuming never got it) and wrote NaN, which is no JSON.
    import datetime as dt

    from pydantic import BaseModel

    class Reading(BaseModel):
        at: dt.date
        value: float

    data = {"when": dt.datetime(2026, 12, 7, 13, 0, tzinfo=dt.UTC), "reading": Reading(at=dt.date(2026, 12, 7),
            value=float("nan")), "word": "NaN", "name": "Zoë 中"}
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}}
    written = {"when": "2026-12-07T13:00:00Z", "reading": {"at": "2026-12-07", "value": None}, "word": "NaN",
               "name": "Zoë 中"}
    stream = f"{new_session_id()}~log"
    stored = await stores.events.store_event(stream, message)
    async with other.broker.subscribe(f"stream:{stream}") as sub:
        published, receivers = await stores.broker.publish_event(stores.events, stream, f"stream:{stream}", message)
        assert receivers == 1
        got_id, got = await sub.get()
    assert got_id == published and got["params"]["data"] == written
    _, replayed = await other.events.replay_after(f"{stream}#0")
    assert [(eid, m["params"]["data"]) for eid, m in replayed] == [(stored, written), (published, written)]
    async with other.broker.subscribe("plain") as sub:
        assert await stores.broker.publish("plain", message) == 1
        assert (await sub.get())["params"]["data"] == written
