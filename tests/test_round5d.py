"""Refused calls, mended: a call refused for the caller's scopes (REST's 403, MCP's "unknown tool") is charged to
the rate limits like an invalid one, without telling over MCP that the hidden action exists; and an audit event
names only the arguments the action declares (any other name sent is only counted)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx
from fastapi import FastAPI, Request
from pydantic import Field

from mcpfusion import Audit, MCPFusion, RateLimit, Tool
from mcpfusion.auth import RequireBearer
from mcpfusion.testing import ToolTester
from tests.governance_kit import MODERN_META

ADMIN = {"authorization": "Bearer admin"}  # granted vault:write
BOB = {"authorization": "Bearer bob"}  # granted nothing: the writes are hidden from him


async def authenticate(request: Request) -> dict[str, str]:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    return {"sub": token, "tenant": "acme", "scope": "vault:write" if token == "admin" else ""}


def vault(exposition: str = "flat", middleware: list[Any] | None = None) -> Tool:
    """A read, and a write needing `vault:write` (its `value` sent as `v`)."""
    tool = Tool("vault", exposition=exposition, middleware=middleware or [])

    @tool.action(readonly=True)
    async def look(key: str) -> str:
        """A read."""
        return "looked"

    @tool.action(destructive=True, scopes=["vault:write"])
    async def store(key: str, value: Annotated[str, Field(alias="v")]) -> str:
        """A write."""
        return "stored"

    return tool


def served(tool: Tool, events: list[dict[str, Any]], rate: int = 3) -> FastAPI:
    fusion = MCPFusion("vault", tools=[tool], middleware=[Audit(sink=events.append), RateLimit(rate, per=3600)])

    @fusion.raw_tool("erase", annotations={"destructiveHint": True},
                     input_schema={"type": "object", "properties": {"confirm": {"type": "string"}}})
    async def erase(confirm: str = "") -> str:
        return "erased"

    app = fusion.build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def mcp(c: httpx.AsyncClient, name: str, arguments: dict[str, Any], headers: dict[str, str]) -> Any:
    """One sessionless (2026-07-28) tools/call: its JSON-RPC reply."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": MODERN_META}}
    h = {"accept": "application/json", "content-type": "application/json", "mcp-protocol-version": "2026-07-28",
         "mcp-method": "tools/call", "mcp-name": name, **headers}
    return (await c.post("/mcp", json=body, headers=h)).json()


def outcome(reply: dict[str, Any]) -> str:
    if "error" in reply:
        return f"{reply['error']['code']}: {reply['error']['message']}"
    text = reply["result"]["content"][0]["text"]
    return "RATE_LIMITED" if 'code="RATE_LIMITED"' in text else "error" if reply["result"]["isError"] else "ok"


# -- 1. refusals for the caller's scopes are charged -------------------------------------------------------

async def test_a_rest_call_refused_for_scopes_counts_against_the_rate_limit():
    events: list[dict[str, Any]] = []
    async with client(served(vault(), events)) as c:
        refused = [await c.post("/api/vault/store", json={"key": "k", "v": "x"}, headers=BOB) for _ in range(5)]
        read = await c.post("/api/vault/look", json={"key": "k"}, headers=BOB)
        other = await c.post("/api/vault/look", json={"key": "k"}, headers=ADMIN)  # another caller's bucket
    assert [r.status_code for r in refused] == [403, 403, 403, 429, 429]
    assert refused[-1].headers["retry-after"] and refused[-1].json()["code"] == "RATE_LIMITED"
    assert read.status_code == 429 and other.status_code == 200
    assert [e["error_code"] for e in events] == ["FORBIDDEN"] * 3 + ["RATE_LIMITED"] * 2


async def test_a_hidden_action_on_mcp_is_charged_as_an_unknown_tool_and_answered_as_one():
    answers: dict[str, list[str]] = {}
    for name in ("vault_store", "vault_nothing"):  # hidden from bob, and one that does not exist
        events: list[dict[str, Any]] = []
        async with client(served(vault(), events)) as c:
            replies = [await mcp(c, name, {"key": "k", "v": "x"}, BOB) for _ in range(5)]
            read = await mcp(c, "vault_look", {"key": "k"}, BOB)
        answers[name] = [outcome(r).replace(name, "NAME") for r in replies] + [outcome(read)]
        assert [e["error_code"] for e in events] == ([] if name == "vault_nothing"
                                                     else ["FORBIDDEN"] * 3 + ["RATE_LIMITED"] * 2)
    assert answers["vault_store"][:5] == [answers["vault_store"][0]] * 5  # never RATE_LIMITED, which names it
    assert answers["vault_store"][0].startswith("-32602: Unknown tool: NAME.")
    assert answers["vault_store"][5] == "RATE_LIMITED"  # the refusals took the caller's allowance
    assert answers["vault_store"] == answers["vault_nothing"]  # nothing tells the hidden from the missing


async def test_a_hidden_action_of_a_grouped_tool_leaves_the_tool_limit_alone():
    # The tool's own limit would tell which tool a hidden name belongs to: only the app's limit is charged (3
    # calls: the two refusals and a read; the tool's 2 would be spent by the refusals before the read).
    answers: dict[str, list[str]] = {}
    for chosen in ("store", "nothing"):
        events: list[dict[str, Any]] = []
        async with client(served(vault("grouped", [RateLimit(2, per=3600, name="tool")]), events, rate=3)) as c:
            replies = [await mcp(c, "vault", {"action": chosen, "key": "k"}, BOB) for _ in range(2)]
            read = await mcp(c, "vault", {"action": "look", "key": "k"}, BOB)
            after = await mcp(c, "vault", {"action": "look", "key": "k"}, BOB)
        answers[chosen] = [outcome(r) for r in (*replies, read, after)]
    assert answers["store"] == answers["nothing"] == ["error", "error", "ok", "RATE_LIMITED"]


async def test_a_hidden_action_called_through_the_tester_is_never_answered_rate_limited():
    events: list[dict[str, Any]] = []
    tester = ToolTester(served(vault(), events))
    bob = {"sub": "bob", "tenant": "acme", "scope": ""}
    results = [await tester.call("vault", "store", {"key": "k", "v": "x"}, auth=bob) for _ in range(5)]
    read = await tester.call("vault", "look", {"key": "k"}, auth=bob)
    assert {(r.error_code, r.text) for r in results} == {(results[0].error_code, results[0].text)}
    assert results[0].error_code == "UNKNOWN_ACTION"  # (addressed as vault/store: an action vault lacks)
    assert read.error_code == "RATE_LIMITED"


# -- 2. the audit event names only declared arguments ------------------------------------------------------

async def test_a_refused_call_audits_only_the_declared_argument_names():
    events: list[dict[str, Any]] = []
    flood = {f"card_4111111111111111_{i}_" + "A" * 2000: 1 for i in range(200)}
    async with client(served(vault(), events, rate=100)) as c:
        await c.post("/api/vault/store", json={"key": "k", "v": "x", **flood}, headers=BOB)
        await mcp(c, "vault_store", {"key": "k", "v": "x", "secret=hunter2": 1}, BOB)
        await mcp(c, "erase", {"confirm": "yes", "secret=hunter2": 1}, ADMIN)  # a raw tool: its schema declares
        await c.post("/api/vault/store", json={"key": "k", "v": "x"}, headers=ADMIN)
    written = json.dumps(events)
    assert "card_4111" not in written and "hunter2" not in written
    assert [(e["error_code"], e["arguments"]["fields"], e["arguments"].get("undeclared")) for e in events] == [
        ("FORBIDDEN", ["key", "v"], 200), ("FORBIDDEN", ["key", "v"], 1), (None, ["confirm"], 1),
        (None, ["key", "v"], None)]
    assert max(len(json.dumps(e)) for e in events) < 600  # bounded whatever was sent
