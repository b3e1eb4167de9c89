"""A confirmation runs its action once even when the store of spent confirmations forgets: a Redis restarted
without persistence or flushed, or a new process (same `MCPFUSION_SIGNING_KEY`) with the in-memory store. Each
confirmation is bound to the store's epoch when it was issued; one of an epoch gone is refused (the usual
CONFIRMATION_REQUIRED with a fresh token, or the question asked again), never run a second time."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI

from mcpfusion import MCPFusion, Tool
from mcpfusion import confirm as confirm_module
from mcpfusion.auth import RequireBearer
from mcpfusion.confirm import CONFIRM_PARAM, TOKEN_TTL
from mcpfusion.errors import ToolError
from mcpfusion.redis.client import connect
from mcpfusion.redis.spent import RedisSpent
from mcpfusion.spent import MemorySpent, SpentUnavailable
from tests.governance_kit import MODERN_META, TRANSPORTS, Caller, authenticate
from tests.service_kit import confirm_token

KEY = "one-signing-key-for-every-process"
ARGS = {"id": "inv_1"}
FORGOT = "cannot be known to be unused"


def build(runs: list[str], failures: list[Exception] | None = None, **settings: Any) -> FastAPI:
    """One process of the app: `ledger_void` answers the `failures` first, then runs (counted in `runs`)."""
    ledger = Tool("ledger", exposition="flat")

    @ledger.action(destructive=True, confirm="Void invoice {id}?")
    async def void(id: str) -> str:
        """Void an invoice."""
        if failures:
            raise failures.pop(0)
        runs.append(id)
        return f"voided {id}"

    app = MCPFusion("confirming", tools=[ledger], signing_key=KEY, **settings).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


@contextlib.asynccontextmanager
async def running(app: FastAPI, transport: str) -> AsyncIterator[Caller]:
    """A caller of `app` over `transport`, the app started (its Redis stores open) and stopped after."""
    async with app.router.lifespan_context(app):
        caller = Caller(app, transport, "ledger")
        try:
            yield caller
        finally:
            await caller.aclose()


async def asked_token(caller: Caller) -> str:
    asked = await caller.call("void", ARGS)
    assert asked.code == "CONFIRMATION_REQUIRED", asked.text
    return confirm_token(asked.text)


async def forget(redis_server: Any, how: str) -> None:
    """Redis loses every key: FLUSHALL, or a restart of a server without persistence."""
    if how == "restart":
        redis_server.restart()
        return
    client = connect(redis_server.url)
    try:
        await client.flushall()
    finally:
        await client.aclose()


# -- the stores -------------------------------------------------------------------------------------------

async def test_the_memory_store_refuses_a_spend_of_another_epoch():
    spent, later = MemorySpent(), MemorySpent()  # one process, then the next (a restart)
    epoch = await spent.epoch()
    assert epoch == await spent.epoch() and epoch != await later.epoch()
    expires = time.time() + 60
    assert await spent.spend("token|a", expires, epoch) is True
    assert await spent.spend("token|a", expires, epoch) is False  # a replay
    assert await later.spend("token|a", expires, epoch) is False  # forgotten there, but not of its epoch
    assert await later.spend("token|b", expires, epoch) is False and later.spent == {}
    assert await later.spend("token|a", expires, await later.epoch()) is True


@pytest.mark.parametrize("how", ["flush", "restart"])
async def test_the_redis_store_refuses_a_spend_of_an_epoch_it_forgot(redis_server, how):
    client = connect(redis_server.url)
    spent, other = RedisSpent(client, prefix="test:spent:"), RedisSpent(client, prefix="test:spent:")
    try:
        epoch = await spent.epoch()
        assert await other.epoch() == epoch == await spent.epoch()  # one per Redis, whichever replica reads it
        expires = time.time() + 60
        assert await spent.spend("token|a", expires, epoch) is True
        assert await other.spend("token|a", expires, epoch) is False
        await forget(redis_server, how)
        assert await spent.spend("token|a", expires, epoch) is False  # forgotten spend, refused all the same
        assert await spent.spend("token|b", expires, epoch) is False
        assert await client.keys("test:spent:*") == []  # a refused spend writes nothing (not even an epoch)
        fresh = await other.epoch()
        assert fresh != epoch and await spent.epoch() == fresh
        assert await spent.spend("token|a", expires, fresh) is True
        assert await other.spend("token|a", expires, fresh) is False
        redis_server.stop()
        with pytest.raises(SpentUnavailable):  # fail closed: no epoch, so no confirmation issued
            await spent.epoch()
        with pytest.raises(SpentUnavailable):
            await spent.spend("token|c", expires, fresh)
    finally:
        await client.aclose()


@pytest.fixture
async def redis_spent(redis_server):
    """A client of the test's Redis and a `RedisSpent` on it, closed after."""
    client = connect(redis_server.url)
    try:
        yield client, RedisSpent(client, prefix="test:spent:")
    finally:
        await client.aclose()


async def test_a_spend_lost_by_a_redis_restored_from_a_snapshot_is_refused(redis_server, redis_spent):
    # The epoch's key is in the snapshot, the spend made after it is not: a restart that loads the snapshot
    # (a crash, AOF's last second, a failover to a replica behind) keeps the key but is another Redis process.
    client, spent = redis_spent
    epoch = await spent.epoch()
    await client.save()  # the snapshot: the epoch key, no spend yet
    expires = time.time() + 60
    assert await spent.spend("token|a", expires, epoch) is True
    redis_server.restart()  # (no save on the way down: the last snapshot is loaded)
    assert await client.exists("test:spent:epoch") == 1
    assert await spent.spend("token|a", expires, epoch) is False  # its spend was lost: refused all the same
    fresh = await spent.epoch()
    assert fresh != epoch and await spent.spend("token|a", expires, fresh) is True
    assert await spent.spend("token|a", expires, fresh) is False


async def test_a_spend_redis_may_have_evicted_is_refused(redis_spent):
    # A spent key has an expiry: a volatile-* policy may evict it and keep the epoch's key (which has none).
    client, spent = redis_spent
    epoch = await spent.epoch()
    expires = time.time() + 60
    assert await spent.spend("token|a", expires, epoch) is True
    used = int((await client.info("memory"))["used_memory"])
    await client.config_set("maxmemory-policy", "volatile-lru")
    await client.config_set("maxmemory", str(used + 2_000_000))
    for index in range(200):  # filler with expiries until Redis evicts one of them
        await client.set(f"filler:{index}", "x" * 100_000, ex=600)
        if int((await client.info("stats"))["evicted_keys"]):
            break
    else:
        raise AssertionError("Redis evicted nothing")
    assert await spent.spend("token|b", expires, epoch) is False  # an eviction happened: no spend is sure
    fresh = await spent.epoch()
    assert fresh != epoch and await spent.spend("token|b", expires, fresh) is True


# -- in memory: a new process with the same signing key ---------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_token_used_before_a_restart_is_refused_by_the_next_process(transport):
    runs: list[str] = []
    async with running(build(runs), transport) as before:
        token = await asked_token(before)
        assert (await before.call("void", {**ARGS, CONFIRM_PARAM: token})).code is None and runs == ["inv_1"]
    async with running(build(runs), transport) as after:  # restarted: the same key, an empty memory
        replayed = await after.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert replayed.code == "CONFIRMATION_REQUIRED" and FORGOT in replayed.text, replayed.text
        assert runs == ["inv_1"]
        fresh = confirm_token(replayed.text)  # the user confirms again: that one runs, once
        assert fresh != token and (await after.call("void", {**ARGS, CONFIRM_PARAM: fresh})).code is None
        again = await after.call("void", {**ARGS, CONFIRM_PARAM: fresh})
        assert again.code == "CONFIRMATION_REQUIRED" and "already used" in again.text
        assert runs == ["inv_1", "inv_1"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_token_whose_mac_holds_a_non_ascii_character_is_refused_not_a_crash(transport):
    runs: list[str] = []
    async with running(build(runs), transport) as caller:
        token = await asked_token(caller)
        for forged in (token[:-1] + "\u00e9", token[:-1] + "\uff11", token + "\u202e"):
            answer = await caller.call("void", {**ARGS, CONFIRM_PARAM: forged})
            assert answer.code == "CONFIRMATION_REQUIRED", answer.text
        assert runs == [] and (await caller.call("void", {**ARGS, CONFIRM_PARAM: token})).code is None


class Modern:
    """`ledger_void` on the 2026-07-28 wire for a client that elicits: the question and its answered round."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    async def call(self, **extra: Any) -> dict[str, Any]:
        meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
        headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                   "mcp-name": "ledger_void", **self.caller.headers}
        params = {"name": "ledger_void", "arguments": ARGS, "_meta": meta, **extra}
        r = await self.caller.client.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        return r.json()["result"]

    async def answered(self) -> dict[str, Any]:
        """The retry that carries the user's yes (what a replay sends again)."""
        asked = await self.call()
        (key, _), = asked["inputRequests"].items()
        return {"inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
                "requestState": asked["requestState"]}


async def test_an_answer_used_before_a_restart_is_refused_by_the_next_process():
    runs: list[str] = []
    async with running(build(runs), "mcp-2026") as before:
        answered = await Modern(before).answered()
        assert (await Modern(before).call(**answered))["content"][0]["text"] == "voided inv_1"
    async with running(build(runs), "mcp-2026") as after:
        replayed = await Modern(after).call(**answered)
        text = replayed["content"][0]["text"]
        assert replayed["isError"] is True and 'code="NOT_CONFIRMED"' in text and FORGOT in text, text
        assert runs == ["inv_1"]
        again = await Modern(after).answered()  # asked once more: that answer runs it
        assert (await Modern(after).call(**again))["content"][0]["text"] == "voided inv_1"
        assert runs == ["inv_1", "inv_1"]


# -- Redis: replicas sharing a store that forgets -----------------------------------------------------------

@pytest.mark.parametrize("transport", ["rest", "mcp-2025", "mcp-2026"])
async def test_a_token_used_before_redis_was_flushed_is_refused_on_every_replica(redis_server, transport):
    runs: list[str] = []
    app_a, app_b = build(runs, redis_url=redis_server.url), build(runs, redis_url=redis_server.url)
    async with running(app_a, transport) as a, running(app_b, transport) as b:
        assert isinstance(app_a.state.mcpfusion.registry.guards.spent, RedisSpent)
        token = await asked_token(a)
        assert (await b.call("void", {**ARGS, CONFIRM_PARAM: token})).code is None and runs == ["inv_1"]
        assert "already used" in (await a.call("void", {**ARGS, CONFIRM_PARAM: token})).text  # as before
        await forget(redis_server, "flush")
        a.session = b.session = None  # (a 2025-11-25 session was flushed too: initialize again)
        for replica in (a, b):
            replayed = await replica.call("void", {**ARGS, CONFIRM_PARAM: token})
            assert replayed.code == "CONFIRMATION_REQUIRED" and FORGOT in replayed.text, replayed.text
            if transport == "rest":
                assert replayed.status == 428
        assert runs == ["inv_1"]
        fresh = confirm_token(replayed.text)  # the token the refusal carries: the user confirms again
        assert (await a.call("void", {**ARGS, CONFIRM_PARAM: fresh})).code is None
        again = await b.call("void", {**ARGS, CONFIRM_PARAM: fresh})
        assert again.code == "CONFIRMATION_REQUIRED" and "already used" in again.text
        assert runs == ["inv_1", "inv_1"]


async def test_a_token_used_before_redis_restarted_is_refused(redis_server):
    runs: list[str] = []
    async with running(build(runs, redis_url=redis_server.url), "rest") as caller:
        token = await asked_token(caller)
        assert (await caller.call("void", {**ARGS, CONFIRM_PARAM: token})).code is None
        await forget(redis_server, "restart")
        replayed = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert replayed.status == 428 and replayed.code == "CONFIRMATION_REQUIRED" and FORGOT in replayed.text
        assert runs == ["inv_1"]
        assert (await caller.call("void", {**ARGS, CONFIRM_PARAM: confirm_token(replayed.text)})).code is None
        assert runs == ["inv_1", "inv_1"]


async def test_an_answer_used_before_redis_was_flushed_is_refused(redis_server):
    runs: list[str] = []
    async with running(build(runs, redis_url=redis_server.url), "mcp-2026") as caller:
        wire = Modern(caller)
        answered = await wire.answered()
        assert (await wire.call(**answered))["content"][0]["text"] == "voided inv_1"
        await forget(redis_server, "flush")
        replayed = await wire.call(**answered)
        text = replayed["content"][0]["text"]
        assert replayed["isError"] is True and 'code="NOT_CONFIRMED"' in text and FORGOT in text, text
        assert runs == ["inv_1"]
        again = await wire.answered()
        assert (await wire.call(**again))["content"][0]["text"] == "voided inv_1"
        assert "already used" in (await wire.call(**again))["content"][0]["text"]
        assert runs == ["inv_1", "inv_1"]


async def test_a_question_asked_before_redis_was_flushed_is_asked_again(redis_server):
    """Flushed while the user read the question: that answer is refused, nothing runs."""
    runs: list[str] = []
    async with running(build(runs, redis_url=redis_server.url), "mcp-2026") as caller:
        answered = await Modern(caller).answered()
        await forget(redis_server, "flush")
        refused = await Modern(caller).call(**answered)
        assert refused["isError"] is True and FORGOT in refused["content"][0]["text"] and runs == []


async def test_a_token_given_back_after_busy_still_runs_the_retry_in_redis(redis_server):
    runs: list[str] = []
    busy = ToolError("BUSY", "Busy; nothing was changed.", retry_after=1)
    async with running(build(runs, [busy], redis_url=redis_server.url), "rest") as caller:
        token = await asked_token(caller)
        assert (await caller.call("void", {**ARGS, CONFIRM_PARAM: token})).code == "BUSY" and runs == []
        assert (await caller.call("void", {**ARGS, CONFIRM_PARAM: token})).code is None and runs == ["inv_1"]
        assert "already used" in (await caller.call("void", {**ARGS, CONFIRM_PARAM: token})).text


async def test_an_expired_token_is_refused_in_redis(redis_server, monkeypatch):
    runs: list[str] = []
    async with running(build(runs, redis_url=redis_server.url), "rest") as caller:
        token = await asked_token(caller)
        later = time.time() + TOKEN_TTL + 1
        monkeypatch.setattr(confirm_module.time, "time", lambda: later)
        expired = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert expired.code == "CONFIRMATION_REQUIRED" and "expired" in expired.text and runs == []


async def test_no_confirmation_is_asked_for_while_redis_is_unreachable(redis_server):
    """Fail closed: without the store's epoch no token is issued (BUSY, retry), and none is used."""
    runs: list[str] = []
    async with running(build(runs, redis_url=redis_server.url), "rest") as caller:
        token = await asked_token(caller)
        redis_server.stop()
        for sent in ({}, {CONFIRM_PARAM: token}):
            refused = await caller.call("void", {**ARGS, **sent})
            assert refused.code == "BUSY" and refused.retry_after == 2.0 and runs == [], refused.text
        redis_server.start()  # (without persistence: a restart, which forgot the token's epoch too)
        refused = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert refused.code == "CONFIRMATION_REQUIRED" and FORGOT in refused.text and runs == []
        assert (await caller.call("void", {**ARGS, CONFIRM_PARAM: confirm_token(refused.text)})).code is None
        assert runs == ["inv_1"]


# -- an app's own store -------------------------------------------------------------------------------------

class StoreWithoutEpoch:
    """An app's own store written before epochs: `spend(key, expires)` and nothing else."""

    def __init__(self) -> None:
        self.spent: set[str] = set()

    async def spend(self, key: str, expires: float) -> bool:
        if key in self.spent:
            return False
        self.spent.add(key)
        return True


class HalfWay(StoreWithoutEpoch):
    """An app's own store given an `epoch` but whose `spend` still takes two arguments."""

    async def epoch(self) -> str:
        return "e1"


class PlainEpoch(StoreWithoutEpoch):
    """An `epoch` written as a plain function, and a `spend` taking the epoch."""

    def epoch(self) -> str:
        return "e1"

    async def spend(self, key: str, expires: float, epoch: str | None = None) -> bool:
        return epoch in (None, "e1") and await super().spend(key, expires)


@pytest.mark.parametrize("store", [StoreWithoutEpoch, HalfWay, PlainEpoch])
async def test_an_own_store_without_or_half_way_to_epochs_runs_a_confirmation_once_never_a_500(store, caplog):
    runs: list[str] = []
    app = build(runs)
    app.state.mcpfusion.registry.guards.spent = store()  # type: ignore[assignment]
    async with running(app, "rest") as caller:
        token = await asked_token(caller)
        assert (await caller.call("void", {**ARGS, CONFIRM_PARAM: token})).code is None
        again = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert again.code == "CONFIRMATION_REQUIRED" and "already used" in again.text and runs == ["inv_1"]
    warned = [r.getMessage() for r in caplog.records if "takes no epoch" in r.getMessage()]
    assert warned == ([] if store is not HalfWay else
                      ["HalfWay has an epoch() but its spend() takes no epoch: a confirmation it forgot is not refused "
                       "(see mcpfusion.spent.Spent)"])
