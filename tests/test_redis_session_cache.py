"""The per-process session cache of the Redis session store (mcpfusion/redis/session_cache.py): repeated reads
skip Redis, and a save or delete on another process, or a lost broker connection, is never served from it."""

from __future__ import annotations

import asyncio

import pytest

from mcpfusion.mcp.sessions import Session, new_session_id
from mcpfusion.redis import from_url


@pytest.fixture
async def replicas(redis_server):
    """Two processes' stores (own clients, own pub/sub connections) on one Redis."""
    a, b = from_url(redis_server.url, idle_timeout=60), from_url(redis_server.url, idle_timeout=60)
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


def counted(stores) -> list[str]:
    """Record every session read that goes to Redis."""
    reads: list[str] = []
    call = stores.sessions._reads.call

    async def counting(key, *args):
        reads.append(key)
        return await call(key, *args)

    stores.sessions._reads.call = counting
    return reads


async def cached_on(stores, session_id: str) -> None:
    """Read until the session is served from the cache (the cache's listener subscribes on first use)."""
    for _ in range(200):
        assert await stores.sessions.get(session_id) is not None
        if stores.sessions.cache.get(session_id) is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the session was never cached")


async def cached_session(stores) -> Session:
    s = Session(id=new_session_id(), protocol_version="2025-11-25")
    await stores.sessions.create(s)
    await cached_on(stores, s.id)
    return s


async def invalidated(stores, before: int) -> None:
    """Wait until the cache has seen an invalidation after `before` (delivery over pub/sub)."""
    for _ in range(500):
        if stores.sessions.cache.epoch > before:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no invalidation arrived")


async def test_repeated_reads_are_served_from_memory(replicas):
    a, _ = replicas
    s = await cached_session(a)
    reads = counted(a)
    for _ in range(5):
        assert (await a.sessions.get(s.id)).id == s.id
    assert reads == []


async def test_delete_on_another_replica_is_not_served_from_the_cache(replicas):
    a, b = replicas
    s = await cached_session(a)
    epoch = a.sessions.cache.epoch
    assert await b.sessions.delete(s.id)
    await invalidated(a, epoch)
    assert await a.sessions.get(s.id) is None


async def test_save_on_another_replica_replaces_the_cached_copy(replicas):
    a, b = replicas
    s = await cached_session(a)
    changed = await b.sessions.get(s.id)
    changed.log_level = "debug"
    epoch = a.sessions.cache.epoch
    await b.sessions.save(changed)
    await invalidated(a, epoch)
    assert (await a.sessions.get(s.id)).log_level == "debug"


async def test_delete_here_is_gone_at_once_and_a_lost_broker_connection_bypasses_the_cache(replicas):
    a, _ = replicas
    s = await cached_session(a)
    reads = counted(a)
    a.broker._ready = False  # what the broker's reader sets when its connection drops
    assert await a.sessions.get(s.id) is not None
    assert len(reads) == 1  # went to Redis
    a.broker._ready = True
    await a.sessions.delete(s.id)
    assert a.sessions.cache.get(s.id) is None and await a.sessions.get(s.id) is None


async def test_a_reconnected_broker_does_not_trust_older_entries(replicas):
    a, _ = replicas
    s = await cached_session(a)
    a.broker.connections += 1  # what a reconnection does: messages may have been missed meanwhile
    assert a.sessions.cache.get(s.id) is None
