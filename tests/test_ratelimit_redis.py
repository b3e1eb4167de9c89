"""The rate limit shared through a real redis-server: two uvicorn replicas count one principal's calls in
the same bucket, whichever replica answers (REST 429 + Retry-After, MCP a self-healing error with the
wait); and the Redis buckets themselves, failing open when Redis is gone."""

from __future__ import annotations

import logging
import time

import httpx
import pytest

from mcpfusion.redis import connect
from mcpfusion.redis.buckets import RedisBuckets
from mcpfusion.redis.spent import RedisSpent
from mcpfusion.spent import SpentUnavailable
from tests.governance_kit import MODERN_META
from tests.redis_helpers import replicas

ALICE = {"authorization": "Bearer alice"}
BOB = {"authorization": "Bearer bob"}


async def mcp_call(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "desk_limited", "arguments": {}, "_meta": MODERN_META}}
    r = await client.post(url, json=body, headers={
        "accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
        "mcp-name": "desk_limited", **headers})
    return r.json()["result"]


async def test_two_replicas_share_one_bucket_per_principal(redis_server):
    with replicas(redis_server.url, names="AB") as started:
        a, b = started["A"], started["B"]
        async with httpx.AsyncClient(timeout=30) as client:
            answers = []
            for replica in (a, b, a):
                r = await client.post(f"{replica.base}/api/desk/limited", json={}, headers=ALICE)
                answers.append((r.status_code, r.json()))
            assert answers == [(200, "allowed on A"), (200, "allowed on B"), (200, "allowed on A")]
            refused = await mcp_call(client, b.url, ALICE)  # the fourth call, on the other replica
            text = refused["content"][0]["text"]
            assert refused["isError"] and 'code="RATE_LIMITED"' in text and "<retry_after>" in text
            rest = await client.post(f"{a.base}/api/desk/limited", json={}, headers=ALICE)
            assert rest.status_code == 429 and int(rest.headers["retry-after"]) >= 1
            assert rest.json()["code"] == "RATE_LIMITED" and rest.json()["retry_after"] >= 1
            other = await mcp_call(client, a.url, BOB)  # another principal keeps its own allowance
            assert other["isError"] is False and other["content"][0]["text"] == "allowed on A"


async def test_one_confirmation_runs_once_across_replicas(redis_server):
    """A `_confirm` token spent on one replica is a replay on every other (Redis keeps the spent ones)."""
    with replicas(redis_server.url, names="AB") as started:
        a, b = started["A"], started["B"]
        async with httpx.AsyncClient(timeout=30) as client:
            asked = await client.post(f"{a.base}/api/desk/purge", json={"item": "x"}, headers=ALICE)
            assert asked.status_code == 428 and asked.json()["code"] == "CONFIRMATION_REQUIRED", asked.text
            token = asked.json()["details"]["confirm_token"]
            ran = await client.post(f"{b.base}/api/desk/purge", json={"item": "x", "_confirm": token}, headers=ALICE)
            assert ran.status_code == 200 and ran.json() == "purged x on B", ran.text
            for replica in (a, b):  # the same token again, on either replica: refused, nothing ran
                again = await client.post(f"{replica.base}/api/desk/purge", json={"item": "x", "_confirm": token},
                                          headers=ALICE)
                assert again.status_code == 428 and "already used" in again.json()["detail"], again.text


async def test_redis_spent_confirmations_fail_closed(redis_server, caplog):
    client = connect(redis_server.url)
    spent = RedisSpent(client, prefix="test:spent:")
    try:
        expires = time.time() + 60
        assert [await spent.spend("token|abc", expires) for _ in range(2)] == [True, False]
        assert await spent.spend("token|abd", expires) is True
        keys = await client.keys("test:spent:*")
        assert len(keys) == 2 and not any("abc" in k for k in keys)  # stored as digests, never the token
        assert 0 < await client.pttl(keys[0]) <= 60_000  # gone once the confirmation has expired anyway
        redis_server.stop()
        caplog.set_level(logging.WARNING, logger="mcpfusion.confirm")
        with pytest.raises(SpentUnavailable):  # Redis gone: the confirmation is not used (fail closed)
            await spent.spend("token|new", expires)
        assert "Redis is unreachable" in caplog.text
    finally:
        await client.aclose()


async def test_redis_buckets_refill_and_fail_open(redis_server, caplog):
    client = connect(redis_server.url)
    buckets = RedisBuckets(client, prefix="test:rl:")
    try:
        waits = [await buckets.take("k", 2, 1.0) for _ in range(3)]
        assert waits[:2] == [0.0, 0.0] and 0 < waits[2] <= 1.0  # a token is back within a second
        slow = [await buckets.take("slow", 1, 1 / 3600) for _ in range(2)]
        assert slow[0] == 0.0 and 3000 < slow[1] <= 3601  # the wait is the time to refill one token
        assert 0 < await client.pttl(buckets._name("slow")) <= 3602 * 1000  # keys expire once full again
        redis_server.stop()
        caplog.set_level(logging.WARNING, logger="mcpfusion.ratelimit")
        assert await buckets.take("k", 2, 1.0) == 0.0  # Redis gone: the call is let through, and logged
        assert "Redis is unreachable" in caplog.text
    finally:
        await client.aclose()
