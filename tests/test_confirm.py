"""Confirmation of destructive actions: the official SDK client's elicitation callback on both wires, and
a confirmation token for every caller that cannot ask the user (REST, stdio, clients without elicitation,
the tester). The action never runs before the user agreed to these exact arguments."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import ElicitResult, TextContent

from mcpfusion import MCPFusion, Tool
from mcpfusion.auth import RequireBearer
from mcpfusion.confirm import CONFIRM_PARAM
from tests.governance_kit import MODERN_META, TRANSPORTS, Caller, authenticate
from tests.mcp_app import serve
from tests.service_kit import confirm_token


def build(voided: list[str]) -> FastAPI:
    ledger = Tool("ledger", exposition="flat")

    @ledger.action(destructive=True, confirm="Void invoice {id} ({reason})?")
    async def void(id: str, reason: str) -> str:
        """Void an invoice."""
        voided.append(id)
        return f"voided {id}"

    @ledger.action(destructive=True, confirm=True)
    async def purge() -> str:
        """Delete everything."""
        voided.append("*")
        return "purged"

    app = MCPFusion("confirming", tools=[ledger]).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_caller_that_cannot_ask_gets_a_token_bound_to_the_arguments(transport):
    voided: list[str] = []
    app = build(voided)
    caller = Caller(app, transport, "ledger")
    other = Caller(app, transport, "ledger", token="mallory")
    try:
        asked = await caller.call("void", {"id": "inv_1", "reason": "duplicate"})
        assert asked.code == "CONFIRMATION_REQUIRED" and voided == []
        # (the agent's values quoted: in REST's JSON each quote is escaped)
        question = 'Void invoice "inv_1" ("duplicate")?'
        assert question in asked.text.replace('\\"', '"') and CONFIRM_PARAM in asked.text
        if transport == "rest":
            assert asked.status == 428
        token = confirm_token(asked.text)
        changed = await caller.call("void", {"id": "inv_2", "reason": "duplicate", CONFIRM_PARAM: token})
        assert changed.code == "CONFIRMATION_REQUIRED" and voided == []  # other arguments: not this token
        stolen = await other.call("void", {"id": "inv_1", "reason": "duplicate", CONFIRM_PARAM: token})
        assert stolen.code == "CONFIRMATION_REQUIRED" and voided == []  # another caller: not this token
        done = await caller.call("void", {"id": "inv_1", "reason": "duplicate", CONFIRM_PARAM: token})
        assert done.code is None and voided == ["inv_1"]
    finally:
        await caller.aclose()
        await other.aclose()


@pytest.fixture(scope="module")
def server():
    voided: list[str] = []
    with serve(build(voided)) as base:
        yield base + "/mcp", voided


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 (input required), 2025-11-25 (elicitation)
async def test_the_sdk_client_confirms_through_elicitation(server, mode):
    url, voided = server
    voided.clear()
    asked: list[str] = []
    answers = iter(["decline", "accept"])

    async def elicit(context, params):
        asked.append(params.message)
        answer = next(answers)
        if answer == "accept":
            return ElicitResult(action="accept", content={"confirm": True})
        return ElicitResult(action="decline")

    http = create_mcp_http_client(headers={"authorization": "Bearer alice"})
    async with Client(streamable_http_client(url, http_client=http), mode=mode,
                      elicitation_callback=elicit) as client:
        declined = await client.call_tool("ledger_void", {"id": "inv_7", "reason": "typo"})
        assert declined.is_error and 'code="NOT_CONFIRMED"' in text_of(declined)
        assert voided == []
        accepted = await client.call_tool("ledger_void", {"id": "inv_7", "reason": "typo"})
        assert accepted.is_error is False and text_of(accepted) == "voided inv_7"
    assert asked == ['Void invoice "inv_7" ("typo")?'] * 2
    assert voided == ["inv_7"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_elicitation_is_told_how_to_confirm(server, mode):
    url, voided = server
    voided.clear()
    http = create_mcp_http_client(headers={"authorization": "Bearer alice"})
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        result = await client.call_tool("ledger_purge", {})
        assert result.is_error and 'code="CONFIRMATION_REQUIRED"' in text_of(result)
        assert "Confirm ledger.purge (Delete everything) with no arguments?" in text_of(result)
        token = confirm_token(text_of(result))
        assert voided == []
        done = await client.call_tool("ledger_purge", {CONFIRM_PARAM: token})
        assert text_of(done) == "purged" and voided == ["*"]


async def test_the_modern_wire_binds_the_answer_to_the_arguments():
    """2026-07-28: the input-required key carries the arguments' digest; an answer given for other
    arguments does not confirm this call."""
    voided: list[str] = []
    caller = Caller(build(voided), "mcp-2026", "ledger")
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "ledger_void", **caller.headers}

    async def rpc(arguments: dict[str, Any], responses: dict[str, Any] | None = None,
                  state: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": "ledger_void", "arguments": arguments, "_meta": meta}
        if responses is not None:
            params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        r = await caller.client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                   "params": params}, headers=headers)
        return r.json()["result"]

    try:
        first = await rpc({"id": "inv_1", "reason": "dup"})
        assert first["resultType"] == "input_required"
        (key, request), = first["inputRequests"].items()
        assert key.startswith("confirm-") and request["method"] == "elicitation/create"
        assert request["params"]["message"] == 'Void invoice "inv_1" ("dup")?'
        yes = {key: {"action": "accept", "content": {"confirm": True}}}
        other = await rpc({"id": "inv_2", "reason": "dup"}, yes, first["requestState"])
        assert other["resultType"] == "input_required" and key not in other["inputRequests"]
        assert voided == []
        # The state carries the user's answers for the caller that asked: another caller cannot replay it.
        headers["authorization"] = "Bearer mallory"
        stolen = await caller.client.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "ledger_void", "arguments": {"id": "inv_1", "reason": "dup"}, "_meta": meta,
                "requestState": first["requestState"]}})
        assert stolen.json()["error"]["code"] == -32602 and voided == []
        # Nor can it answer the question without the state: the key is the asking caller's own, so it is
        # asked again (its own key differs).
        unasked = await caller.client.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "ledger_void", "arguments": {"id": "inv_1", "reason": "dup"}, "_meta": meta,
                "inputResponses": yes}})
        assert unasked.json()["result"]["resultType"] == "input_required" and voided == []
        assert key not in unasked.json()["result"]["inputRequests"]
        headers.update(caller.headers)
        done = await rpc({"id": "inv_1", "reason": "dup"}, yes, first["requestState"])
        assert done["content"][0]["text"] == "voided inv_1" and voided == ["inv_1"]
    finally:
        await caller.aclose()


async def test_an_input_required_round_is_not_audited_as_a_failure():
    """The confirmation round of the 2026-07-28 wire is not the end of the call: the audit trail records
    only the confirmed call, as one successful event."""
    from mcpfusion import Audit

    events: list[dict[str, Any]] = []
    ledger = Tool("ledger", exposition="flat")

    @ledger.action(destructive=True, confirm=True)
    async def purge() -> str:
        """Delete everything."""
        return "purged"

    app = MCPFusion("confirming", tools=[ledger], middleware=[Audit(sink=events.append)]).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    caller = Caller(app, "mcp-2026", "ledger")
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "ledger_purge", **caller.headers}

    async def rpc(**extra: Any) -> dict[str, Any]:
        params = {"name": "ledger_purge", "arguments": {}, "_meta": meta, **extra}
        r = await caller.client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                   "params": params}, headers=headers)
        return r.json()["result"]

    try:
        first = await rpc()
        assert first["resultType"] == "input_required"
        assert events == []
        (key, _), = first["inputRequests"].items()
        done = await rpc(inputResponses={key: {"action": "accept", "content": {"confirm": True}}},
                         requestState=first["requestState"])
        assert done["content"][0]["text"] == "purged"
    finally:
        await caller.aclose()
    assert [(e["action"], e["outcome"], e["error_code"]) for e in events] == [("ledger.purge", "ok", None)]



@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_a_malformed_confirmation_token_is_refused_not_a_crash(transport):
    voided: list[str] = []
    caller = Caller(build(voided), transport, "ledger")
    try:
        for sent in ("\u00b2.aaaa", "9" * 5000 + ".x", "\uff11\uff12\uff13.abc", ".", "12.", "-5.x", "x" * 100_000):
            refused = await caller.call("void", {"id": "inv_1", "reason": "r", CONFIRM_PARAM: sent})
            assert refused.code == "CONFIRMATION_REQUIRED" and "does not match" in refused.text, (sent[:10], refused.text)
        assert voided == []
    finally:
        await caller.aclose()


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026", "stdio"])
async def test_one_confirmation_runs_the_action_once(transport):
    """A `_confirm` token is spent by the run it confirms: sent again it is refused (with a new token to ask
    the user again), so one "yes" never refunds or voids twice."""
    voided: list[str] = []
    caller = Caller(build(voided), transport, "ledger")
    try:
        args = {"id": "inv_1", "reason": "dup"}
        asked = await caller.call("void", args)
        token = confirm_token(asked.text)
        assert (await caller.call("void", {**args, CONFIRM_PARAM: token})).code is None
        again = await caller.call("void", {**args, CONFIRM_PARAM: token})
        assert again.code == "CONFIRMATION_REQUIRED" and "already used" in again.text
        assert voided == ["inv_1"]
        fresh = confirm_token(again.text)
        assert fresh != token and (await caller.call("void", {**args, CONFIRM_PARAM: fresh})).code is None
        assert voided == ["inv_1", "inv_1"]
    finally:
        await caller.aclose()


async def test_one_answer_on_the_2026_wire_runs_the_action_once():
    """The question's key carries a nonce that comes back in the signed requestState: replaying the answer,
    with or without that state, never runs the action a second time."""
    voided: list[str] = []
    caller = Caller(build(voided), "mcp-2026", "ledger")
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "ledger_void", **caller.headers}

    async def rpc(**extra: Any) -> dict[str, Any]:
        params = {"name": "ledger_void", "arguments": {"id": "inv_1", "reason": "dup"}, "_meta": meta, **extra}
        r = await caller.client.post("/mcp", headers=headers,
                                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        return r.json()["result"]

    try:
        first = await rpc()
        (key, _), = first["inputRequests"].items()
        yes = {key: {"action": "accept", "content": {"confirm": True}}}
        done = await rpc(inputResponses=yes, requestState=first["requestState"])
        assert done["content"][0]["text"] == "voided inv_1"
        replayed = await rpc(inputResponses=yes, requestState=first["requestState"])
        assert replayed["isError"] is True and "already used" in replayed["content"][0]["text"]
        ahead = await rpc(inputResponses=yes)  # no state: a question never asked
        assert ahead["resultType"] == "input_required" and key not in ahead["inputRequests"]
        assert voided == ["inv_1"]
    finally:
        await caller.aclose()
