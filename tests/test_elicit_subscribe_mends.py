"""Answers to the server's questions are checked before anyone acts on them, and resource-update notifications
reach only callers who may read the resource.

- A `confirm=` action answered with a malformed `ElicitResult` (`content: [true]`) is refused with -32602 on
  both wires, as `ctx.elicit` refuses one: never an internal error, never run.
- `ctx.elicit` checks an accepted answer's `content` against the `requestedSchema` it sent: a wrong type, a
  missing required field or an undeclared property is -32602 naming the field; the handler never sees it.
- `resources/subscribe` (2025-11-25) and `subscriptions/listen` (2026-07-28) read the URI as the caller first:
  another tenant's resource, which only the resource function knows is not theirs, is refused, and its
  updates never reach them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import Depends, Header

from mcpfusion import Context, MCPFusion, Tool, ToolError
from tests.mcp_app import serve

SESSION = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}, "note": {"type": "string"}},
          "required": ["confirm"]}


def meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": capabilities or {}}


def data_of(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (or the one JSON body)."""
    if not text.lstrip().startswith(("id:", "data:", "event:", "retry:", ":")):
        return [json.loads(text)]
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


# -- the apps ---------------------------------------------------------------------------------------------


def build_asking(ran: list[Any]) -> MCPFusion:
    files = Tool("files", exposition="flat")

    @files.action(destructive=True, confirm=True)
    async def purge(folder: str) -> str:
        """Delete a folder."""
        ran.append(("purge", folder))
        return f"purged {folder}"

    @files.action()
    async def ask(ctx: Context) -> str:
        """Ask the user."""
        answer = await ctx.elicit("Sure?", SCHEMA)
        ran.append(answer)
        return "asked"

    return MCPFusion("asking", tools=[files])


NOTES = {"acme": {"a1": "acme's plans"}, "globex": {"g1": "globex's plans"}}


def tenant_of(x_tenant: str = Header()) -> str:
    return x_tenant


def build_notes() -> MCPFusion:
    notes = Tool("notes", exposition="flat")
    fusion = MCPFusion("notes", tools=[notes])

    @notes.action()
    async def bump(id: str, tenant: str = Depends(tenant_of)) -> str:
        """Tell subscribers a note changed."""
        await fusion.notify_resource_updated(f"notes://{id}")
        return "bumped"

    @fusion.resource_template("notes://{id}", mime_type="text/plain")
    async def note(id: str, tenant: str = Depends(tenant_of)) -> str:
        """One note of the caller's organisation."""
        found = NOTES[tenant].get(id)
        if found is None:
            raise ToolError("NOT_FOUND", f"Note {id!r} was not found.")
        return found

    return fusion


@pytest.fixture(scope="module")
def asking():
    ran: list[Any] = []
    with serve(build_asking(ran).build_app()) as base:
        yield base, ran


@pytest.fixture(scope="module")
def notes():
    with serve(build_notes().build_app()) as base:
        yield base


# -- helpers of the two wires -----------------------------------------------------------------------------


async def open_session(c: httpx.AsyncClient, capabilities: dict[str, Any], **extra: str) -> dict[str, str]:
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": SESSION, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}}
    r = await c.post("/mcp", json=body, headers={**ACCEPT, **extra})
    headers = {**ACCEPT, **extra, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": SESSION}
    await c.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


async def answer_on_session_wire(base: str, name: str, arguments: dict[str, Any], answer: Any, *,
                                 member: str = "result", **extra: str) -> dict[str, Any]:
    """Call `name` on 2025-11-25, answer the elicitation/create it sends with `answer` (its `member`: "result",
    or "error" for a client that fails the request); the call's reply. `extra`: headers (the caller's token)."""
    async with httpx.AsyncClient(base_url=base, timeout=10) as c:
        headers = await open_session(c, {"elicitation": {}}, **extra)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        async with c.stream("POST", "/mcp", json=call, headers=headers) as r:
            async for line in r.aiter_lines():
                if not (line.startswith("data:") and line[5:].strip()):
                    continue
                message = json.loads(line[5:])
                if message.get("method") == "elicitation/create":
                    sent = await c.post("/mcp", json={"jsonrpc": "2.0", "id": message["id"], member: answer},
                                        headers=headers)
                    assert sent.status_code == 202, sent.text
                elif message.get("id") == 1:
                    return message
    raise AssertionError("no reply")


async def answer_on_modern_wire(base: str, name: str, arguments: dict[str, Any], answer: dict[str, Any]
                                ) -> dict[str, Any]:
    """Call `name` on 2026-07-28, retry its input-required result with `answer`; the retry's reply."""
    headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": meta({"elicitation": {}})}
    async with httpx.AsyncClient(base_url=base, timeout=10) as c:
        first = data_of((await c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                    "params": params}, headers=headers)).text)[-1]["result"]
        assert first["resultType"] == "input_required"
        retry = {**params, "requestState": first["requestState"],
                 "inputResponses": {key: answer for key in first["inputRequests"]}}
        return data_of((await c.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                   "params": retry}, headers=headers)).text)[-1]


ANSWER_ON = {SESSION: answer_on_session_wire, MODERN: answer_on_modern_wire}


# -- 1: a confirm= action's answer is an ElicitResult, or the call is refused --------------------------------


@pytest.mark.parametrize("wire", [SESSION, MODERN])
@pytest.mark.parametrize("answer", [{"action": "accept", "content": [True]}, {"action": "sure"}, {}])
async def test_confirm_refuses_a_malformed_answer_as_invalid_params(asking, wire, answer):
    base, ran = asking
    ran.clear()
    reply = await ANSWER_ON[wire](base, "files_purge", {"folder": "/tmp/x"}, answer)
    assert reply["error"]["code"] == -32602, reply
    # (2026-07-28 may refuse it already as the retry's malformed inputResponses: the same code, never run)
    assert any(said in reply["error"]["message"] for said in ("is not a valid ElicitResult", "inputResponses"))
    assert ran == []


@pytest.mark.parametrize("wire", [SESSION, MODERN])
async def test_confirm_still_runs_on_a_valid_yes(asking, wire):
    base, ran = asking
    ran.clear()
    reply = await ANSWER_ON[wire](base, "files_purge", {"folder": "/tmp/y"},
                                  {"action": "accept", "content": {"confirm": True}})
    assert reply["result"]["isError"] is False and ran == [("purge", "/tmp/y")]


# -- 2: accepted content matches the requested schema ---------------------------------------------------------


@pytest.mark.parametrize("wire", [SESSION, MODERN])
@pytest.mark.parametrize(("content", "named"), [
    ({"confirm": "false"}, "content.confirm: 'false' is not of type 'boolean'"),
    ({"note": "x"}, "'confirm' is a required property"),
    ({"confirm": True, "unrequested": 1}, "'unrequested' was unexpected"),
])
async def test_elicit_refuses_content_outside_the_requested_schema(asking, wire, content, named):
    base, ran = asking
    ran.clear()
    reply = await ANSWER_ON[wire](base, "files_ask", {}, {"action": "accept", "content": content})
    assert reply["error"]["code"] == -32602, reply
    assert "does not match the requestedSchema" in reply["error"]["message"] and named in reply["error"]["message"]
    assert ran == []


@pytest.mark.parametrize("wire", [SESSION, MODERN])
@pytest.mark.parametrize("answer", [{"action": "accept", "content": {"confirm": False, "note": "later"}},
                                    {"action": "decline"}])
async def test_elicit_passes_an_answer_that_matches(asking, wire, answer):
    base, ran = asking
    ran.clear()
    reply = await ANSWER_ON[wire](base, "files_ask", {}, answer)
    assert reply["result"]["isError"] is False and ran == [answer]


# -- 3: subscriptions only for callers who may read ----------------------------------------------------------


async def bump(c: httpx.AsyncClient, tenant: str, note: str) -> None:
    r = await c.post("/api/notes/bump", json={"id": note}, headers={"x-tenant": tenant})
    assert r.status_code == 200, r.text


@contextlib.asynccontextmanager
async def updates(c: httpx.AsyncClient, method: str, headers: dict[str, str], body: Any = None
                  ) -> AsyncIterator[list[dict[str, Any]]]:
    """Collect the notifications/resources/updated of a GET (or listen POST) stream while the block runs."""
    got: list[dict[str, Any]] = []
    opened = asyncio.Event()

    async def read() -> None:
        async with c.stream(method, "/mcp", headers=headers, json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                opened.set()
                if line.startswith("data:") and "resources/updated" in line:
                    got.append(json.loads(line[5:])["params"])

    task = asyncio.create_task(read())
    await asyncio.wait_for(opened.wait(), 5)
    try:
        yield got
    finally:
        await asyncio.sleep(0.5)  # time for the notification to arrive (or not)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_session_wire_subscribes_only_a_caller_who_can_read(notes):
    async with httpx.AsyncClient(base_url=notes, timeout=10) as c:
        owner = await open_session(c, {}, **{"x-tenant": "acme"})
        other = await open_session(c, {}, **{"x-tenant": "globex"})
        subscribe = {"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": "notes://a1"}}
        assert data_of((await c.post("/mcp", json=subscribe, headers=owner)).text)[-1]["result"] == {}
        refused = data_of((await c.post("/mcp", json=subscribe, headers=other)).text)[-1]
        assert refused["error"]["code"] == -32002 and "'a1' was not found" in refused["error"]["message"]
        get = {"accept": "text/event-stream"}
        async with updates(c, "GET", {**owner, **get}) as to_owner, updates(c, "GET", {**other, **get}) as to_other:
            await bump(c, "acme", "a1")
        assert to_owner == [{"uri": "notes://a1"}]
        assert to_other == []


async def test_modern_listen_honours_only_what_the_caller_can_read(notes):
    async def listen(tenant: str) -> tuple[dict[str, str], dict[str, Any]]:
        headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen", "x-tenant": tenant}
        body = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                "params": {"_meta": meta(), "notifications": {"resourceSubscriptions": ["notes://a1", "notes://g1"]}}}
        return headers, body

    async with httpx.AsyncClient(base_url=notes, timeout=10) as c:
        acked: dict[str, Any] = {}
        for tenant in ("acme", "globex"):
            headers, body = await listen(tenant)
            async with c.stream("POST", "/mcp", json=body, headers=headers) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:") and "acknowledged" in line:
                        acked[tenant] = json.loads(line[5:])["params"]["notifications"]["resourceSubscriptions"]
                        break
        assert acked == {"acme": ["notes://a1"], "globex": ["notes://g1"]}
        (oh, ob), (gh, gb) = await listen("acme"), await listen("globex")
        async with updates(c, "POST", oh, ob) as to_owner, updates(c, "POST", gh, gb) as to_other:
            await bump(c, "acme", "a1")
        assert [u["uri"] for u in to_owner] == ["notes://a1"]
        assert to_other == []
