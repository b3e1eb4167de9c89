"""Sessions that cannot pile up: expired ones swept, anonymous ones owned by their address, full pools that
close their least recently used session (or say the honest wait), small stored client fields."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcpfusion import MCPFusion
from mcpfusion.mcp.sessions import (
    MAX_CLIENT_FIELD_BYTES,
    SWEEP_BATCH,
    InMemorySessionStore,
    Session,
    SessionLimitError,
    SessionLimits,
    SessionQuotaError,
)

VERSION = "2025-11-25"
HEADERS = {"accept": "application/json", "content-type": "application/json"}


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(clock: Clock, total: int = 100, per_caller: int = 100, per_tenant: int = 100) -> InMemorySessionStore:
    return InMemorySessionStore(idle_timeout=1800, limits=SessionLimits(total, per_caller, per_tenant),
                                evict_after=60, clock=clock)


def initialize(capabilities: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": capabilities or {}, "clientInfo": {"name": "t", "version": "1"}}}


# -- (a) expired sessions are reclaimed without any limit being hit --------------------------------------------

async def test_expired_sessions_are_swept_by_a_create_and_by_reads():
    clock = Clock()
    sessions = store(clock)
    for i in range(5):
        await sessions.create(Session(f"old{i}", VERSION))
    clock.now += 1801
    await sessions.create(Session("new", VERSION))  # far below every cap
    assert len(sessions) == 1
    await sessions.create(Session("idle", VERSION))
    clock.now += 1801
    assert await sessions.get("unknown") is None  # any read sweeps, at most once a second
    assert len(sessions) == 0


async def test_one_sweep_does_bounded_work():
    clock = Clock()
    sessions = store(clock, total=10 * SWEEP_BATCH, per_caller=10 * SWEEP_BATCH)
    for i in range(SWEEP_BATCH + 10):
        await sessions.create(Session(f"s{i}", VERSION))
    clock.now += 1801
    await sessions.create(Session("new", VERSION))
    assert len(sessions) == 11  # ten expired left for the next sweep, and the new one
    clock.now += 1
    await sessions.get("new")
    assert len(sessions) == 1


# -- (b) anonymous sessions count against their address's quota -----------------------------------------------

async def test_anonymous_sessions_share_their_address_quota():
    clock = Clock()
    sessions = store(clock, per_caller=2)
    await sessions.create(Session("a", VERSION, peer="10.0.0.1"))
    await sessions.create(Session("b", VERSION, peer="10.0.0.1"))
    with pytest.raises(SessionQuotaError, match="client address") as refused:
        await sessions.create(Session("c", VERSION, peer="10.0.0.1"))
    assert refused.value.retry_after == 60
    await sessions.create(Session("d", VERSION, peer="10.0.0.2"))  # another address has its own


# -- (d) / defect 5: a full pool closes its least recently used idle session ----------------------------------

async def test_a_caller_at_its_quota_is_told_the_honest_wait_then_admitted():
    clock = Clock()
    sessions = store(clock, per_caller=2)
    await sessions.create(Session("a", VERSION, principal="crashy"))
    clock.now += 10
    await sessions.create(Session("b", VERSION, principal="crashy"))
    clock.now += 20
    with pytest.raises(SessionQuotaError) as refused:
        await sessions.create(Session("c", VERSION, principal="crashy"))
    assert refused.value.retry_after == 30  # "a" (idle 30 s) is closed once idle 60 s, not in 30 minutes
    clock.now += 30
    await sessions.create(Session("c", VERSION, principal="crashy"))
    assert await sessions.get("a") is None
    assert await sessions.get("b") is not None and await sessions.get("c") is not None


async def test_a_full_store_closes_the_least_recently_used_session_not_a_busy_one():
    clock = Clock()
    sessions = store(clock, total=2)
    await sessions.create(Session("a", VERSION))
    await sessions.create(Session("b", VERSION))
    with pytest.raises(SessionLimitError) as refused:
        await sessions.create(Session("c", VERSION))
    assert refused.value.retry_after == 60 and not isinstance(refused.value, SessionQuotaError)
    clock.now += 100
    assert await sessions.get("a") is not None  # "a" is used: "b" is now the least recently used
    await sessions.create(Session("c", VERSION))
    assert await sessions.get("b") is None
    assert await sessions.get("a") is not None and await sessions.get("c") is not None


# -- over HTTP ------------------------------------------------------------------------------------------------

def client(fusion: MCPFusion) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app(), client=("10.1.2.3", 5555)),
                             base_url="http://127.0.0.1")


async def test_anonymous_initializes_hit_the_address_quota_with_an_honest_retry_after():
    clock = Clock()
    fusion = MCPFusion("anon", session_store=store(clock, per_caller=3))
    async with client(fusion) as http:
        opened = [await http.post("/mcp", json=initialize(), headers=HEADERS) for _ in range(4)]
        assert [r.status_code for r in opened] == [200, 200, 200, 429]
        assert opened[-1].headers["retry-after"] == "60" and "client address" in opened[-1].text
        clock.now += 60
        admitted = await http.post("/mcp", json=initialize(), headers=HEADERS)
        assert admitted.status_code == 200
        gone = await http.post("/mcp", headers={**HEADERS, "mcp-session-id": opened[0].headers["mcp-session-id"]},
                               json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert gone.status_code == 404  # the least recently used one made room
    assert len(fusion.transport.sessions) == 3


async def test_a_session_stores_a_few_kilobytes_of_client_fields_at_most():
    fusion = MCPFusion("fat")
    async with client(fusion) as http:
        # just over the bound: 10,000 such sessions would hold 160 MB of them for half an hour
        r = await http.post("/mcp", json=initialize({"experimental": {"x": {"pad": "c" * MAX_CLIENT_FIELD_BYTES}}}),
                            headers=HEADERS)
    assert r.json()["error"]["code"] == -32602 and str(MAX_CLIENT_FIELD_BYTES) in r.json()["error"]["message"]
    assert len(fusion.transport.sessions) == 0
