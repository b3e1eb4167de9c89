"""Redis outages and client-influenced text in Redis keys.

- `subscriptions/listen` subscribes before its answer starts: a broker that cannot subscribe (Redis
  unreachable) is a 503 with Retry-After, and one failing under a started stream ends it with a JSON-RPC
  error event for the listen request, never a cut connection.
- A tenant (or subject) holding a lone surrogate, as `json.loads` decodes a JWT's claims, is stored by the
  Redis session store like any other name (no `UnicodeEncodeError`, no 500).
- Rate-limit buckets in Redis live under a digest of their key: bounded size, no subject or tenant in clear.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp.broker import InMemoryBroker, QueueSubscription
from mcpfusion.mcp.sessions import Session
from mcpfusion.redis import RedisBroker, RedisSessionStore, connect
from mcpfusion.redis import broker as redis_broker
from mcpfusion.redis.buckets import RedisBuckets
from tests.mcp_app import serve
from tests.redis_helpers import free_port

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}
LISTEN = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
          "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
           "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}


# -- 1. subscriptions/listen while the broker fails ----------------------------------------------------------


async def test_listen_while_redis_is_unreachable_is_a_503_to_retry(monkeypatch):
    monkeypatch.setattr(redis_broker, "CONFIRM_TIMEOUT", 0.3)  # (the wait for a subscription Redis never confirms)
    broker = RedisBroker(connect(f"redis://127.0.0.1:{free_port()}/0"))  # nothing listens there
    fusion = MCPFusion("down", tools=[Tool("noop")], broker=broker)
    with serve(fusion.build_app()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:
            r = await c.post("/mcp", json=LISTEN, headers=HEADERS)
    assert r.status_code == 503, (r.status_code, r.text)
    assert r.headers["retry-after"] == "5"
    body = r.json()
    assert body["id"] == 9 and "retry later" in body["error"]["message"]
    assert fusion.transport.modern_wire.listening == {}  # the refused listen gave its slot back
    assert broker._topics == {}  # and holds no subscription


class FailingSubscription(QueueSubscription):
    async def get(self) -> Any:
        raise ConnectionError("the broker lost its connection")


class FailingBroker(InMemoryBroker):
    """Subscribes, then fails under the subscriber (a broker whose connection dies mid-stream)."""

    def __init__(self) -> None:
        super().__init__()
        self.open = 0

    @contextlib.asynccontextmanager
    async def subscribe(self, *topics: str) -> AsyncIterator[QueueSubscription]:
        self.open += 1
        try:
            yield FailingSubscription()
        finally:
            self.open -= 1


async def test_a_listen_stream_whose_broker_fails_ends_with_an_error_event():
    broker = FailingBroker()
    fusion = MCPFusion("flaky", tools=[Tool("noop")], broker=broker)
    with serve(fusion.build_app()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as c, \
                c.stream("POST", "/mcp", json=LISTEN, headers=HEADERS) as r:
            assert r.status_code == 200 and "event-stream" in r.headers["content-type"]
            # Read to the end: a connection cut mid-body raises here.
            messages = [json.loads(line[5:]) async for line in r.aiter_lines()
                        if line.startswith("data:") and line[5:].strip()]
    assert [m.get("method") for m in messages] == ["notifications/subscriptions/acknowledged", None]
    error = messages[1]
    assert error["id"] == 9 and error["error"]["code"] == -32603
    assert "listen again" in error["error"]["message"]
    assert broker.open == 0 and fusion.transport.modern_wire.listening == {}


# -- 2. lone surrogates in names the session store indexes ---------------------------------------------------


async def test_redis_sessions_index_names_holding_lone_surrogates(redis_server):
    client = connect(redis_server.url)
    store = RedisSessionStore(client, prefix="t5t:")
    try:
        one = Session(id="s1", protocol_version="2025-11-25", principal="\ud800x", tenant="\udfff")
        two = Session(id="s2", protocol_version="2025-11-25", principal="\ud800y", tenant="\udffe")
        await store.create(one)
        await store.create(two)
        got = await store.get("s1")
        assert got is not None and got.tenant == "\udfff" and got.principal == "\ud800x"
        # Distinct names, distinct quota indexes (the encoding is one-to-one).
        indexes = await client.keys("t5t:sessions:*")
        assert len(indexes) == 4, indexes
        assert await store.delete("s1") and await store.delete("s2")
        assert await client.keys("t5t:sessions:*") == []
    finally:
        await client.aclose()


# -- 3. rate-limit keys are digests --------------------------------------------------------------------------


async def test_redis_buckets_are_stored_under_a_digest_of_their_key(redis_server):
    client = connect(redis_server.url)
    buckets = RedisBuckets(client, prefix="t5t:rl:")
    long_key = "10/60s:principal:" + json.dumps([None, "T" * 50_000, "alice@example.com"])
    surrogate_key = "10/60s:by_key:\udfff"  # a custom key function may return any text
    try:
        assert [await buckets.take(long_key, 2, 1 / 3600) for _ in range(2)] == [0.0, 0.0]
        assert await buckets.take(long_key, 2, 1 / 3600) > 0  # one bucket, still limited
        assert await buckets.take(surrogate_key, 2, 1 / 3600) == 0.0
        stored = sorted(await client.keys("t5t:rl:*"))
        expected = sorted("t5t:rl:" + hashlib.sha256(k.encode("utf-8", "surrogatepass")).hexdigest()
                          for k in (long_key, surrogate_key))
        assert stored == expected
        assert all("alice" not in k and "T" * 8 not in k for k in stored)
    finally:
        await client.aclose()


async def test_memory_buckets_keep_a_long_key_as_its_digest():
    from mcpfusion.buckets import MemoryBuckets

    buckets = MemoryBuckets()
    long_key = '[null,"acme","' + "s" * 500_000 + '"]'
    assert await buckets.take(long_key, 1, 1 / 3600) == 0.0
    assert await buckets.take(long_key, 1, 1 / 3600) > 0  # the same caller, the same bucket
    assert await buckets.take(long_key[:-3] + 't"]', 1, 1 / 3600) == 0.0  # another caller, its own
    assert all(len(key) <= 256 for key in buckets.buckets)
    assert await buckets.take("\udfff" * 300, 1, 1.0) == 0.0  # a lone surrogate in a long key still digests
