"""Guards on every transport: timeout (handler cancelled, yield dependencies torn down), concurrency limit
(BUSY with a retry hint, or a bounded wait), egress limit (bytes and tokens, cut at row boundaries) and the
in-memory rate limit (429 + Retry-After on REST, a self-healing error with the wait on MCP)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import toon_format
from fastapi import Depends, FastAPI

from mcpfusion import (
    Concurrency,
    EgressLimit,
    MCPFusion,
    RateLimit,
    Timeout,
    Tool,
    success,
    toon_success,
)
from mcpfusion.auth import RequireBearer
from tests.governance_kit import TRANSPORTS, Caller, authenticate

ROWS = [{"id": f"row_{n:04d}", "name": f"Customer {n}", "note": "x" * 40} for n in range(300)]


class World:
    """What the handlers of one app share with the test: gates and what happened."""

    def __init__(self) -> None:
        self.torn_down: list[str] = []
        self.cancelled: list[str] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.finished: list[str] = []


def build(world: World) -> FastAPI:
    desk = Tool("desk")

    async def resource() -> AsyncIterator[str]:
        try:
            yield "connection"
        finally:
            world.torn_down.append("connection")

    @desk.action(readonly=True, middleware=[Timeout(0.2)])
    async def slow(forever: bool = True, conn: str = Depends(resource)) -> str:
        """Never finishes (unless told to)."""
        try:
            if forever:
                await asyncio.Event().wait()
            return "done with " + conn
        except asyncio.CancelledError:
            world.cancelled.append("slow")
            raise

    @desk.action(readonly=True, middleware=[Concurrency(1)])
    async def exclusive(tag: str) -> str:
        """One at a time."""
        world.entered.set()
        await world.release.wait()
        world.finished.append(tag)
        return tag

    @desk.action(readonly=True, middleware=[Concurrency(1, wait=30)])
    async def queued(tag: str) -> str:
        """One at a time; the others wait for their turn."""
        world.entered.set()
        await world.release.wait()
        world.finished.append(tag)
        return tag

    @desk.action(readonly=True, middleware=[EgressLimit(bytes=2_000)])
    async def rows(count: int = 300, fmt: str = "json") -> Any:
        """Many rows."""
        if fmt == "toon":
            return toon_success(ROWS[:count])
        if fmt == "object":
            return {"blob": "y" * 5_000}
        if fmt == "text":
            return "\n".join(f"line {n:03d}: " + "z" * 40 for n in range(count))
        return ROWS[:count]

    @desk.action(readonly=True, middleware=[EgressLimit(tokens=300)])
    async def token_rows() -> list[dict[str, Any]]:
        """Many rows, limited in tokens."""
        return ROWS

    @desk.action(readonly=True, middleware=[EgressLimit(bytes=10_000)])
    async def small() -> Any:
        """Within the limit: untouched."""
        return success(ROWS[:3])

    per_principal = RateLimit(2, per=3600)
    per_tenant = RateLimit(3, per=3600, key="tenant")

    @desk.action(readonly=True, middleware=[per_principal])
    async def limited() -> str:
        """Two calls an hour per principal."""
        return "ok"

    @desk.action(readonly=True, middleware=[per_tenant])
    async def tenant_limited() -> str:
        """Three calls an hour per tenant."""
        return "ok"

    app = MCPFusion("guarded", tools=[desk]).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


@pytest.fixture(params=TRANSPORTS)
def transport(request) -> str:
    return request.param


@pytest.fixture
async def world_and_caller(transport):
    world = World()
    app = build(world)
    callers: list[Caller] = []

    def make(token: str = "alice") -> Caller:
        callers.append(Caller(app, transport, "desk", token))
        return callers[-1]

    yield world, make
    for caller in callers:
        await caller.aclose()


async def test_timeout_cancels_the_handler_and_tears_down_its_dependencies(world_and_caller):
    world, make = world_and_caller
    caller = make()
    outcome = await caller.call("slow")
    assert outcome.code == "TIMEOUT"
    assert "did not finish within 0.2 s" in outcome.text and "Retry later" in outcome.recovery
    assert world.cancelled == ["slow"] and world.torn_down == ["connection"]
    if caller.transport == "rest":
        assert outcome.status == 504
    done = await caller.call("slow", {"forever": False})
    assert done.code is None and "done with connection" in done.text


async def test_concurrency_limit_answers_busy_with_a_retry_hint(world_and_caller):
    world, make = world_and_caller
    first_caller, second_caller = make(), make("bob")
    first = asyncio.create_task(first_caller.call("exclusive", {"tag": "first"}))
    await world.entered.wait()
    second = await second_caller.call("exclusive", {"tag": "second"})
    assert second.code == "BUSY" and second.retry_after == 1
    if second_caller.transport == "rest":
        assert second.status == 503 and second.headers["retry-after"] == "1"
    world.release.set()
    assert (await first).code is None
    assert world.finished == ["first"]
    assert (await second_caller.call("exclusive", {"tag": "third"})).code is None  # the slot is free again


async def test_concurrency_limit_can_wait_for_a_slot(world_and_caller):
    world, make = world_and_caller
    first = asyncio.create_task(make().call("queued", {"tag": "first"}))
    await world.entered.wait()
    second = asyncio.create_task(make("bob").call("queued", {"tag": "second"}))
    await asyncio.sleep(0.05)
    assert not second.done() and world.finished == []  # waiting, not refused
    world.release.set()
    assert [(await first).code, (await second).code] == [None, None]
    assert world.finished == ["first", "second"]


def _json_rows(outcome) -> list[dict[str, Any]]:
    rows = json.loads(outcome.texts[0])
    assert isinstance(rows, list)
    return rows


async def test_egress_limit_cuts_at_row_boundaries_with_a_notice(world_and_caller):
    _, make = world_and_caller
    caller = make()
    cut = await caller.call("rows")
    assert cut.code is None
    if caller.transport == "rest":  # REST answers the data alone: the rows that fit, valid JSON
        rows = json.loads(cut.texts[0])
        assert 0 < len(rows) < 300 and rows == ROWS[: len(rows)]
        return
    rows = _json_rows(cut)  # parses: never cut inside a JSON value
    assert 0 < len(rows) < 300 and rows == ROWS[: len(rows)]
    assert f"{len(rows)} of 300 rows shown" in cut.texts[1] and "egress limit (2000 bytes)" in cut.texts[1]
    assert sum(len(t.encode()) for t in cut.texts) <= 2_000
    one_more = json.dumps(ROWS[: len(rows) + 1], separators=(",", ":"))
    assert len(one_more.encode()) + len(cut.texts[1].encode()) > 2_000  # as many rows as fit


async def test_egress_limit_keeps_toon_valid_and_refuses_what_cannot_be_cut(world_and_caller):
    _, make = world_and_caller
    caller = make()
    toon = await caller.call("rows", {"fmt": "toon"})
    assert toon.code is None
    if caller.transport != "rest":
        decoded = toon_format.decode(toon.texts[0])
        assert 0 < len(decoded) < 300 and decoded[0]["id"] == "row_0000"
        assert f"{len(decoded)} of 300 rows shown" in toon.texts[1]
    text = await caller.call("rows", {"fmt": "text"})
    lines = (json.loads(text.texts[0]) if caller.transport == "rest" else text.texts[0]).split("\n")
    assert 0 < len(lines) < 300 and all(line == f"line {n:03d}: " + "z" * 40 for n, line in enumerate(lines))
    if caller.transport != "rest":
        assert f"{len(lines)} of 300 lines shown" in text.texts[1]
    blob = await caller.call("rows", {"fmt": "object"})
    assert blob.code == "RESPONSE_TOO_LARGE" and "y" * 100 not in blob.text
    within = await caller.call("small")
    assert within.code is None and len(within.texts) == 1 and "egress" not in within.text


async def test_egress_limit_in_tokens(world_and_caller):
    from mcpfusion.tokens import count

    _, make = world_and_caller
    caller = make()
    cut = await caller.call("token_rows")
    assert cut.code is None
    rows = json.loads(cut.texts[0])
    assert 0 < len(rows) < 300 and rows == ROWS[: len(rows)]
    if caller.transport != "rest":
        assert sum(count(t) for t in cut.texts) <= 300 and "300 tokens" in cut.texts[1]


async def test_rate_limit_per_principal(world_and_caller):
    _, make = world_and_caller
    alice, bob = make("alice"), make("bob")
    assert [(await alice.call("limited")).code for _ in range(2)] == [None, None]
    refused = await alice.call("limited")
    assert refused.code == "RATE_LIMITED"
    assert "at most 2 calls per 3600 s" in refused.text
    assert refused.retry_after > 0 and "Wait " in refused.recovery
    if alice.transport == "rest":
        assert refused.status == 429 and int(refused.headers["retry-after"]) > 0
    assert (await bob.call("limited")).code is None  # another principal, another bucket


async def test_rate_limit_per_tenant(world_and_caller):
    _, make = world_and_caller
    alice, bob = make("alice"), make("bob")  # same tenant (acme)
    codes = [(await c.call("tenant_limited")).code for c in (alice, bob, alice, bob)]
    if alice.transport == "tester":
        # The tester runs no HTTP middleware, so no tenant is known: each caller keeps its own bucket.
        assert codes == [None, None, None, None]
    else:
        assert codes == [None, None, None, "RATE_LIMITED"]


async def test_one_subject_in_two_tenants_has_two_rate_limit_buckets():
    from mcpfusion import MCPFusion as Fusion
    from mcpfusion import RateLimit, Tool
    from mcpfusion.testing import ToolTester

    tool = Tool("t", description="x")

    @tool.action(readonly=True)
    async def ping() -> str:
        """Ping"""
        return "pong"

    tester = ToolTester(Fusion("limits", tools=[tool], middleware=[RateLimit(1, per=60)]).registry)
    first = await tester.call("t", "ping", {}, auth={"sub": "alice", "tenant": "globex"})
    again = await tester.call("t", "ping", {}, auth={"sub": "alice", "tenant": "globex"})
    other_tenant = await tester.call("t", "ping", {}, auth={"sub": "alice", "tenant": "acme"})
    assert first.error_code is None and again.error_code == "RATE_LIMITED"
    assert other_tenant.error_code is None  # globex's alice does not spend acme's alice's allowance
