"""Round 5v: elicitation modes the client did not declare, progress that does not increase or is not a
number, and the code of an unknown resource on the 2025-11-25 wire. Each test fails without its fix."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp import jsonrpc
from mcpfusion.mcp.channel import Channel
from mcpfusion.mcp.jsonrpc import McpError

VERSION = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
JSON_ONLY = {"accept": "application/json", "content-type": "application/json"}
FORM_NEEDED = {"code": -32021, "message": "This request needs the client capability 'elicitation' (form mode)",
               "data": {"requiredCapabilities": {"elicitation": {"form": {}}}}}


def build_app() -> Any:
    probe = Tool("probe", description="Probes", exposition="flat")

    @probe.action()
    async def ask_name(ctx: Context) -> str:
        """Ask the user's name (form mode)."""
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"action={answer['action']}"

    @probe.action()
    async def backwards(ctx: Context) -> str:
        """Progress that goes back, stays, is not a number, then goes on."""
        for value, total in ((5, 10), (3, 10), (5, 10), (math.nan, 10), (math.inf, 10), (6, math.inf), (7, 10)):
            await ctx.progress(value, total, f"at {value}")
        return "done"

    @probe.action(destructive=True, confirm=True)
    async def wipe(id: str) -> str:
        """Wipe one record (asks the user first)."""
        return f"wiped {id}"

    fusion = MCPFusion("r5v", "1.0", tools=[probe])

    @fusion.resource("test://mine", name="mine", mime_type="text/plain")
    def mine() -> str:
        """Refuses with the resource's own -32602."""
        raise McpError(jsonrpc.INVALID_PARAMS, "the resource's own refusal")

    @fusion.resource("test://here", name="here", mime_type="text/plain")
    def here() -> str:
        """Is there."""
        return "here"

    return fusion.build_app()


@pytest.fixture
async def client():
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app()), base_url="http://127.0.0.1") as c:
        yield c


def rpc(method: str, params: dict[str, Any], id: Any = 2) -> dict[str, Any]:  # noqa: A002
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


async def session(client: httpx.AsyncClient, capabilities: dict[str, Any]) -> dict[str, str]:
    r = await client.post("/mcp", headers=JSON_ONLY, json=rpc("initialize", {
        "protocolVersion": VERSION, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}, 1))
    headers = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


async def modern(client: httpx.AsyncClient, method: str, params: dict[str, Any], capabilities: dict[str, Any],
                 name: str | None = None, **meta: Any) -> httpx.Response:
    params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                  "io.modelcontextprotocol/clientCapabilities": capabilities, **meta}}
    headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": method,
               **({"mcp-name": name} if name else {})}
    return await client.post("/mcp", headers=headers, json=rpc(method, params))


def frames(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (or the one JSON body); NaN/Infinity refused as JSON has none."""
    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    lines = [line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return [json.loads(line, parse_constant=refuse) for line in lines or [text]]


# -- 1: form elicitation only to a client that declared form mode -----------------------------------------


class Recorder(Channel):
    """A channel that keeps what it sends and answers every request with an accept."""

    kind = "session"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[tuple[str, dict[str, Any] | None]] = []

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.sent.append((method, params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.sent.append((method, params))
        return {"action": "accept", "content": {}}


def context(capabilities: dict[str, Any], **kwargs: Any) -> tuple[Context, Recorder]:
    channel = Recorder(**kwargs)
    return Context(channel, client_capabilities=capabilities, transport="session"), channel


@pytest.mark.parametrize(("capabilities", "form", "url"), [
    ({}, False, False),
    ({"elicitation": {}}, True, False),
    ({"elicitation": {"form": {}}}, True, False),
    ({"elicitation": {"url": {}}}, False, True),
    ({"elicitation": {"form": {}, "url": {}}}, True, True),
])
def test_can_ask_reads_the_elicitation_modes_declared(capabilities, form, url):
    ctx, _ = context(capabilities)
    url_request = {"method": "elicitation/create",
                   "params": {"mode": "url", "message": "Sign in", "url": "https://x.test", "elicitationId": "e"}}
    assert ctx.can_ask(ctx.elicitation("Sure?")) is form
    assert ctx.can_ask(url_request) is url
    assert Context.detached().can_ask(ctx.elicitation("Sure?")) is False


async def test_a_url_only_client_is_never_sent_a_form():
    ctx, channel = context({"elicitation": {"url": {}}})
    with pytest.raises(McpError) as caught:
        await ctx.elicit("Name?")
    assert (caught.value.code, caught.value.data) == (-32021, FORM_NEEDED["data"])
    assert channel.failure is caught.value and channel.sent == []
    with pytest.raises(McpError):
        await ctx.ask({"a": ctx.elicitation("Name?"), "b": ctx.roots()})
    assert channel.sent == []


async def test_a_form_only_client_is_never_sent_a_url_elicitation():
    ctx, channel = context({"elicitation": {}})
    url_request = {"method": "elicitation/create",
                   "params": {"mode": "url", "message": "Sign in", "url": "https://x.test", "elicitationId": "e"}}
    with pytest.raises(McpError) as caught:
        await ctx.ask({"login": url_request, "name": ctx.elicitation("Name?")})
    assert caught.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert channel.sent == []


async def test_url_only_client_gets_32021_on_the_2025_wire(client):
    headers = await session(client, {"elicitation": {"url": {}}})
    r = await client.post("/mcp", headers={**headers, "accept": "application/json"},
                          json=rpc("tools/call", {"name": "probe_ask_name", "arguments": {}}))
    assert r.json()["error"] == FORM_NEEDED
    # `{}` is form mode: past the capability check (JSON mode, no GET stream: the NO_BACK_CHANNEL tool error).
    headers = await session(client, {"elicitation": {}})
    r = await client.post("/mcp", headers={**headers, "accept": "application/json"},
                          json=rpc("tools/call", {"name": "probe_ask_name", "arguments": {}}))
    assert r.json()["result"]["isError"] is True and "NO_BACK_CHANNEL" in r.json()["result"]["content"][0]["text"]


async def test_url_only_client_gets_32021_not_input_required_on_the_2026_wire(client):
    call = {"name": "probe_ask_name", "arguments": {}}
    r = await modern(client, "tools/call", call, {"elicitation": {"url": {}}}, "probe_ask_name")
    assert r.status_code == 400 and r.json()["error"] == FORM_NEEDED
    r = await modern(client, "tools/call", call, {"elicitation": {"form": {}}}, "probe_ask_name")
    result = r.json()["result"]
    assert result["resultType"] == "input_required"
    assert [q["params"]["mode"] for q in result["inputRequests"].values()] == ["form"]


# -- 2 and 3: progress increases, and is a number ------------------------------------------------------------


async def test_progress_that_does_not_increase_or_is_not_finite_is_dropped():
    ctx, channel = context({}, progress_token="p")
    for value, total in ((5, 10), (3, 10), (5, 10), (math.nan, 10), (math.inf, 10), (-math.inf, None),
                         (6, math.inf), (6.5, math.nan), (7, 10)):
        await ctx.progress(value, total)
    assert [params for _, params in channel.sent] == [
        {"progressToken": "p", "progress": 5, "total": 10},
        {"progressToken": "p", "progress": 6},
        {"progressToken": "p", "progress": 6.5},
        {"progressToken": "p", "progress": 7, "total": 10},
    ]


async def test_progress_on_both_wires_increases_and_is_json(client):
    headers = await session(client, {})
    r = await client.post("/mcp", headers=headers, json=rpc("tools/call", {
        "name": "probe_backwards", "arguments": {}, "_meta": {"progressToken": "bk"}}))
    r26 = await modern(client, "tools/call", {"name": "probe_backwards", "arguments": {}}, {}, "probe_backwards",
                       progressToken="bk")
    for reply in (r, r26):
        sent = [(m["params"]["progress"], m["params"].get("total"))
                for m in frames(reply.text) if m.get("method") == "notifications/progress"]
        assert sent == [(5, 10), (6, None), (7, 10)]
        assert frames(reply.text)[-1]["result"]["content"][0]["text"] == "done"


# -- 4: an unknown resource's code follows the call's protocol version ----------------------------------------


async def test_unknown_resource_is_32002_to_read_and_subscribe_on_2025_and_32602_on_2026(client):
    headers = await session(client, {})
    r = await client.post("/mcp", headers={**headers, "accept": "application/json"},
                          json=rpc("resources/read", {"uri": "test://nope"}))
    assert r.json()["error"] == {"code": -32002, "message": "Resource not found: test://nope",
                                 "data": {"uri": "test://nope"}}
    r = await client.post("/mcp", headers={**headers, "accept": "application/json"},
                          json=rpc("resources/subscribe", {"uri": "test://nope"}))
    assert (r.json()["error"]["code"], r.json()["error"]["data"]) == (-32002, {"uri": "test://nope"})
    r = await modern(client, "resources/read", {"uri": "test://nope"}, {}, "test://nope")
    assert r.status_code == 400
    assert r.json()["error"] == {"code": -32602, "message": "Resource not found: test://nope",
                                 "data": {"uri": "test://nope"}}


async def test_a_resource_s_own_32602_and_bad_uris_keep_their_code_on_2025(client):
    headers = {**(await session(client, {})), "accept": "application/json"}
    r = await client.post("/mcp", headers=headers, json=rpc("resources/read", {"uri": "test://mine"}))
    assert r.json()["error"]["code"] == -32602 and r.json()["error"]["message"] == "the resource's own refusal"
    r = await client.post("/mcp", headers=headers, json=rpc("resources/read", {"uri": ""}))
    assert r.json()["error"]["code"] == -32602
    r = await client.post("/mcp", headers=headers, json=rpc("resources/read", {"uri": "test://here"}))
    assert r.json()["result"]["contents"][0]["text"] == "here"


async def test_a_confirmation_asks_a_url_only_client_with_a_token_on_both_wires(client):
    """A confirm=True action confirms through a form: a client of URL elicitation only gets the _confirm token
    path (CONFIRMATION_REQUIRED), never a form it cannot show nor a -32021."""
    call = {"name": "probe_wipe", "arguments": {"id": "r1"}}
    r = await modern(client, "tools/call", call, {"elicitation": {"url": {}}}, "probe_wipe")
    assert r.status_code == 200 and "CONFIRMATION_REQUIRED" in json.dumps(r.json()["result"]), r.text
    headers = await session(client, {"elicitation": {"url": {}}})
    r = await client.post("/mcp", headers=headers, json=rpc("tools/call", call))
    assert "CONFIRMATION_REQUIRED" in r.text and "elicitation/create" not in r.text
