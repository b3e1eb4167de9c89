"""The audit trail: one structured event per mutating call, on every transport, to a pluggable sink or
as JSON log lines; the arguments appear as a keyed digest and their names, never their values."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fastapi import FastAPI

from mcpfusion import Audit, MCPFusion, Tool, ToolError
from mcpfusion.auth import RequireBearer
from tests.governance_kit import TRANSPORTS, Caller, authenticate

SECRET = "s3cr3t-value-never-logged"


def build(sink: Any = None) -> FastAPI:
    vault = Tool("vault")

    @vault.action(readonly=True)
    async def look(key: str) -> str:
        """Read-only: not audited."""
        return "looked"

    @vault.action(destructive=True)
    async def store(key: str, value: str) -> str:
        """A mutation."""
        if key == "locked":
            raise ToolError("CONFLICT", "This key is locked.")
        return "stored"

    audit = Audit() if sink is None else Audit(sink=sink)
    app = MCPFusion("audited", tools=[vault], middleware=[audit]).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_one_event_per_mutating_call_without_values(transport):
    events: list[dict[str, Any]] = []
    caller = Caller(build(events.append), transport, "vault")
    try:
        assert (await caller.call("look", {"key": "a"})).code is None
        assert (await caller.call("store", {"key": "a", "value": SECRET})).code is None
        assert (await caller.call("store", {"key": "a", "value": SECRET})).code is None
        assert (await caller.call("store", {"key": "b", "value": SECRET})).code is None
        assert (await caller.call("store", {"key": "locked", "value": SECRET})).code == "CONFLICT"
        assert (await caller.call("store", {"key": 5})).code == "VALIDATION_ERROR"  # never reached the call
    finally:
        await caller.aclose()
    assert [e["action"] for e in events] == ["vault.store"] * 4
    first = events[0]
    assert set(first) == {"event", "time", "request_id", "transport", "principal", "tenant", "action",
                          "arguments", "outcome", "error_code", "duration_ms"}
    assert first["transport"] == {"mcp-2025": "mcp", "mcp-2026": "mcp"}.get(transport, transport)
    if transport == "tester":
        assert first["principal"].startswith("token:") and first["tenant"] is None
    else:
        assert (first["principal"], first["tenant"]) == ("alice", "acme")
    assert first["arguments"]["fields"] == ["key", "value"]
    assert first["arguments"]["digest"].startswith("hmac-sha256:")
    assert events[0]["arguments"]["digest"] == events[1]["arguments"]["digest"]  # same call, same digest
    assert events[2]["arguments"]["digest"] != events[0]["arguments"]["digest"]
    assert [(e["outcome"], e["error_code"]) for e in events] == [("ok", None)] * 3 + [("error", "CONFLICT")]
    assert all(e["duration_ms"] >= 0 and e["request_id"] for e in events)
    assert len({e["request_id"] for e in events}) == 4
    assert SECRET not in json.dumps(events)


async def test_default_sink_writes_json_lines_and_takes_the_request_id(caplog):
    caller = Caller(build(), "rest", "vault")
    caplog.set_level(logging.INFO, logger="mcpfusion.audit")
    try:
        r = await caller.client.post("/api/vault/store", json={"key": "k", "value": SECRET},
                                     headers={**caller.headers, "x-request-id": "req-42"})
        assert r.status_code == 200
    finally:
        await caller.aclose()
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "mcpfusion.audit"]
    assert len(lines) == 1 and SECRET not in lines[0]
    event = json.loads(lines[0])
    assert (event["event"], event["request_id"], event["action"], event["outcome"]) == (
        "audit", "req-42", "vault.store", "ok")


async def test_a_failing_sink_never_fails_the_call(caplog):
    def broken(event: dict[str, Any]) -> None:
        raise OSError("disk full")

    async def async_events(event: dict[str, Any]) -> None:
        seen.append(event)

    seen: list[dict[str, Any]] = []
    for sink in (broken, async_events):
        caller = Caller(build(sink), "tester", "vault")
        assert (await caller.call("store", {"key": "k", "value": "v"})).code is None
        await caller.aclose()
    assert "audit sink failed for vault.store" in caplog.text
    assert [e["action"] for e in seen] == ["vault.store"]


async def test_an_audit_of_mutations_is_left_out_of_a_reads_chain():
    """Decided once per action: a read's chain holds no audit to pass through (none at all here), a
    mutation's holds it; every audit of all calls stays in every chain."""
    from mcpfusion.dispatch import ToolRegistry
    from mcpfusion.middleware import applies

    events: list[dict[str, Any]] = []
    vault = Tool("vault")

    @vault.action(readonly=True)
    async def look(key: str) -> str:
        """A read."""
        return "looked"

    @vault.action(destructive=True)
    async def store(key: str) -> str:
        """A mutation."""
        return "stored"

    mutations, everything = Audit(sink=events.append), Audit(sink=events.append, mutations_only=False)
    assert not applies(mutations, vault.actions["look"]) and applies(mutations, vault.actions["store"])
    assert applies(everything, vault.actions["look"]) and applies(lambda call, call_next: None, vault.actions["look"])
    registry = ToolRegistry([vault], middleware=[mutations])
    assert registry._pipeline(vault.actions["look"]) is None  # no middleware left: the plain path
    assert registry._pipeline(vault.actions["store"]) is not None
    assert ToolRegistry([vault], middleware=[everything])._pipeline(vault.actions["look"]) is not None
