"""A confirmed run that fails saying nothing was done and to make the same call again (BUSY, RATE_LIMITED,
a `retry_after`, an HTTP 429 or a 503 with Retry-After) gives its confirmation back: the same `_confirm`
token, or the same answer on the 2026-07-28 wire, runs the retry it was told to make. Still once: a success,
or any other failure, keeps the confirmation spent."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException

from mcpfusion import MCPFusion, Tool
from mcpfusion.auth import RequireBearer
from mcpfusion.confirm import CONFIRM_PARAM
from mcpfusion.errors import ToolError
from mcpfusion.redis.client import connect
from mcpfusion.redis.spent import RedisSpent
from mcpfusion.response import tool_error
from mcpfusion.spent import MemorySpent, SpentUnavailable
from tests.governance_kit import MODERN_META, TRANSPORTS, Caller, authenticate
from tests.service_kit import confirm_token
from tests.stdio_lines import Lines

ARGS = {"id": "inv_1", "reason": "dup"}


def busy() -> ToolError:
    return ToolError("BUSY", "The database is busy; nothing was changed.",
                     recovery="Wait 5 s and make the same call again.", retry_after=5)


def build(runs: list[str], failures: list[Any]) -> FastAPI:
    """`ledger_void` answers the `failures` first (raised, or returned when a response), then runs."""
    ledger = Tool("ledger", exposition="flat")

    @ledger.action(destructive=True, confirm="Void invoice {id} ({reason})?")
    async def void(id: str, reason: str) -> Any:
        """Void an invoice."""
        await asyncio.sleep(0)  # (other calls of a burst interleave here)
        if failures:
            failure = failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            return failure
        runs.append(id)
        return f"voided {id}"

    app = MCPFusion("confirming", tools=[ledger]).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


async def asked_token(caller: Caller) -> str:
    asked = await caller.call("void", ARGS)
    assert asked.code == "CONFIRMATION_REQUIRED", asked.text
    return confirm_token(asked.text)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_same_token_runs_the_retry_a_busy_failure_asked_for(transport):
    runs: list[str] = []
    caller = Caller(build(runs, [busy()]), transport, "ledger")
    try:
        token = await asked_token(caller)
        failed = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert failed.code == "BUSY" and failed.retry_after == 5 and runs == []
        done = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})  # the same call again, as told
        assert done.code is None and runs == ["inv_1"], done.text
        again = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})  # spent by the run it confirmed
        assert again.code == "CONFIRMATION_REQUIRED" and "already used" in again.text
        assert runs == ["inv_1"]
    finally:
        await caller.aclose()


@pytest.mark.parametrize("failure", [
    ToolError("RATE_LIMITED", "Upstream is rate limited; nothing was sent."),
    ToolError("UPSTREAM_DOWN", "The payment provider did not answer; nothing was changed.", retry_after=3),
    tool_error("BUSY", "Busy; nothing was changed.", retry_after=1),  # returned, not raised
    HTTPException(429, "Too many requests"),
    HTTPException(503, "Down for a moment", headers={"Retry-After": "2"}),
], ids=["rate-limited", "retry-after", "returned-busy", "http-429", "http-503-retry-after"])
@pytest.mark.parametrize("transport", ["rest", "mcp-2026"])
async def test_every_failure_that_asks_for_the_same_call_again_gives_the_token_back(transport, failure):
    runs: list[str] = []
    caller = Caller(build(runs, [failure]), transport, "ledger")
    try:
        token = await asked_token(caller)
        failed = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert failed.code not in (None, "CONFIRMATION_REQUIRED") and runs == []
        done = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert done.code is None and runs == ["inv_1"], done.text
    finally:
        await caller.aclose()


@pytest.mark.parametrize("failure", [
    ToolError("CONFLICT", "The invoice is paid and cannot be voided."),
    ToolError("TIMEOUT", "The provider did not answer in time."),  # it may have done part of the work
    RuntimeError("boom"),
    HTTPException(503, "Down"),  # no Retry-After: not an invitation to call again
    HTTPException(500, "Broken"),
], ids=["conflict", "timeout", "internal", "http-503", "http-500"])
@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_any_other_failure_keeps_the_token_spent(transport, failure):
    runs: list[str] = []
    caller = Caller(build(runs, [failure]), transport, "ledger")
    try:
        token = await asked_token(caller)
        failed = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert failed.code not in (None, "CONFIRMATION_REQUIRED")
        again = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert again.code == "CONFIRMATION_REQUIRED" and "already used" in again.text and runs == []
    finally:
        await caller.aclose()


async def test_a_burst_of_one_token_runs_the_action_once_across_a_busy_failure():
    """30 calls with one token at once, the first run BUSY: the token given back runs at most one of the
    others, and once it ran no call runs it again."""
    runs: list[str] = []
    caller = Caller(build(runs, [busy()]), "rest", "ledger")
    try:
        token = await asked_token(caller)
        burst = await asyncio.gather(*[caller.call("void", {**ARGS, CONFIRM_PARAM: token}) for _ in range(30)])
        assert {o.code for o in burst} <= {None, "BUSY", "CONFIRMATION_REQUIRED"}
        assert [o.code for o in burst].count("BUSY") == 1 and len(runs) <= 1
        last = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert runs == ["inv_1"] and [o.code for o in [*burst, last]].count(None) == 1
    finally:
        await caller.aclose()


async def test_the_same_answer_on_the_2026_wire_runs_the_retry_a_busy_failure_asked_for():
    runs: list[str] = []
    failures: list[Any] = [busy()]
    caller = Caller(build(runs, failures), "mcp-2026", "ledger")
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "ledger_void", **caller.headers}

    async def rpc(**extra: Any) -> dict[str, Any]:
        params = {"name": "ledger_void", "arguments": ARGS, "_meta": meta, **extra}
        r = await caller.client.post("/mcp", headers=headers,
                                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        return r.json()["result"]

    try:
        first = await rpc()
        (key, _), = first["inputRequests"].items()
        answered = {"inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
                    "requestState": first["requestState"]}
        failed = await rpc(**answered)
        assert failed["isError"] is True and 'code="BUSY"' in failed["content"][0]["text"] and runs == []
        done = await rpc(**answered)  # the same answered call again, as told
        assert done["content"][0]["text"] == "voided inv_1" and runs == ["inv_1"]
        replayed = await rpc(**answered)
        assert replayed["isError"] is True and "already used" in replayed["content"][0]["text"]
        failures.append(ToolError("CONFLICT", "Already voided."))  # a fresh question, a failure that keeps it
        second = await rpc()
        (key, _), = second["inputRequests"].items()
        answered = {"inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
                    "requestState": second["requestState"]}
        assert 'code="CONFLICT"' in (await rpc(**answered))["content"][0]["text"]
        assert "already used" in (await rpc(**answered))["content"][0]["text"] and runs == ["inv_1"]
    finally:
        await caller.aclose()


async def test_the_answer_of_a_2025_session_question_is_given_back_after_busy_only():
    """On the session wire the retry is asked again; the answer a BUSY run used is not kept as spent, the
    one a run that failed otherwise used is."""
    from mcpfusion.mcp.stdio import StdioBridge

    runs: list[str] = []
    failures: list[Any] = [busy(), ToolError("CONFLICT", "Already voided.")]
    app = build(runs, failures)
    spent = app.state.mcpfusion.registry.guards.spent
    lines = Lines()
    bridge = StdioBridge(app, lines.write, headers={"authorization": "Bearer alice"})
    await bridge.startup()
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"}}}))
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    async def confirmed_call(msg_id: int) -> str:
        bridge.submit(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                                  "params": {"name": "ledger_void", "arguments": ARGS}}))
        question = await lines.wait_for(lambda m: m.get("method") == "elicitation/create"
                                        and m["id"] not in answered)
        answered.add(question["id"])
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": question["id"],
                                             "result": {"action": "accept", "content": {"confirm": True}}}))
        return await lines.reply(msg_id)

    answered: set[Any] = set()
    try:
        assert 'code="BUSY"' in await confirmed_call(1)
        assert spent.spent == {}  # given back
        assert 'code="CONFLICT"' in await confirmed_call(2)
        assert len(spent.spent) == 1  # kept: that run may have done something
        assert await confirmed_call(3) == "voided inv_1" and runs == ["inv_1"]
    finally:
        await bridge.close()


async def test_a_store_that_cannot_give_it_back_keeps_it_spent():
    """Giving back fails (the store is unreachable): the BUSY answer stands, the retry asks to confirm again."""

    class Unreachable(MemorySpent):
        async def release(self, key: str, expires: float) -> None:
            raise SpentUnavailable

    runs: list[str] = []
    app = build(runs, [busy()])
    app.state.mcpfusion.registry.guards.spent = Unreachable()
    caller = Caller(app, "rest", "ledger")
    try:
        token = await asked_token(caller)
        assert (await caller.call("void", {**ARGS, CONFIRM_PARAM: token})).code == "BUSY"
        again = await caller.call("void", {**ARGS, CONFIRM_PARAM: token})
        assert again.code == "CONFIRMATION_REQUIRED" and "already used" in again.text and runs == []
    finally:
        await caller.aclose()


async def test_the_memory_store_gives_back_only_the_spend_it_is_told_of():
    spent = MemorySpent()
    first = time.time() + 60
    assert await spent.spend("token|a", first) is True
    await spent.release("token|a", first + 1)  # not this spend: kept
    assert await spent.spend("token|a", first + 2) is False
    await spent.release("token|a", first)
    assert await spent.spend("token|a", first + 3) is True
    await spent.release("token|b", first)  # never spent: nothing to do
    assert await spent.spend("token|b", first) is True


async def test_the_redis_store_gives_back_only_the_spend_it_is_told_of(redis_server):
    client = connect(redis_server.url)
    spent = RedisSpent(client, prefix="test:spent:")
    try:
        first = time.time() + 60
        assert await spent.spend("token|a", first) is True
        await spent.release("token|a", first + 1)  # another spend's expiry: compare-and-delete keeps it
        assert await spent.spend("token|a", first + 2) is False
        await spent.release("token|a", first)
        assert await spent.spend("token|a", first + 3) is True
        keys = await client.keys("test:spent:*")
        assert len(keys) == 1
        redis_server.stop()
        with pytest.raises(SpentUnavailable):
            await spent.release("token|a", first + 3)
    finally:
        await client.aclose()
