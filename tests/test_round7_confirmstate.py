"""Round 7, confirmations and the requestState: on the 2026-07-28 wire the framework's own round data (a
confirmation's nonce and the run it confirmed, the last progress sent) travels in the signed requestState next
to the handler's state, never in it. A `confirm=` action whose handler asks the user itself is confirmed once,
`ctx.state` is exactly what the handler passed, and a replayed round still runs nothing a second time."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp.jsonrpc import McpError
from mcpfusion.mcp.state import RequestStateSigner
from tests.wire_kit import ACCEPT

FORM = {"type": "object", "properties": {"keep": {"type": "string"}}}
OLD_CARRIER = {"io.mcpfusion/context": {"state": "x", "progress": 9}}


def build(ran: list[Any]) -> Any:
    files = Tool("files")

    @files.action(destructive=True, confirm="Purge {folder}?")
    async def purge(folder: str, ctx: Context) -> str:
        """Purge a folder after asking which files to keep."""
        answer = await ctx.elicit("Keep any file?", FORM)
        ran.append(folder)
        return f"purged {folder}, kept {answer['content']['keep']}"

    @files.action(destructive=True, confirm="Wipe {folder}?")
    async def wipe(folder: str, state: Any, ctx: Context) -> str:
        """Wipe, with a handler state carried to the answering round."""
        await ctx.progress(1, 2)
        await ctx.ask({"k": ctx.elicitation("Sure?", FORM)}, state=state)
        ran.append(ctx.state)
        return json.dumps(ctx.state)

    @files.action(destructive=True, confirm=True)
    async def shred(folder: str, ctx: Context) -> str:
        """Shred, after asking the client's model for a word."""
        await ctx.sample("Say a word")
        ran.append(folder)
        return f"shredded {folder}"

    return MCPFusion("f", tools=[files]).build_app()


def meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities}


class Wire:
    """tools/call of `files` on the 2026-07-28 wire, one round at a time."""

    def __init__(self, http: httpx.AsyncClient, capabilities: dict[str, Any]) -> None:
        self.http = http
        self.meta = meta(capabilities)

    async def call(self, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        params = {"name": "files", "arguments": arguments, "_meta": self.meta, **extra}
        r = await self.http.post("/mcp", headers={**ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                  "mcp-method": "tools/call", "mcp-name": "files"},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        body = r.json() if r.headers["content-type"].startswith("application/json") else \
            json.loads([line[5:] for line in r.text.splitlines() if line.startswith("data:")][-1])
        return body["result"]  # type: ignore[no-any-return]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The client's yes to a confirmation, "none" to a form's text fields, a word to sampling."""
    if request["method"] == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "word"}, "model": "m"}
    props = request["params"]["requestedSchema"]["properties"]
    return {"action": "accept", "content": {k: True if v["type"] == "boolean" else "none" for k, v in props.items()}}


async def rounds(wire: Wire, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Answer every round: the final result, the questions asked, and the params of the last round sent."""
    asked: list[str] = []
    extra: dict[str, Any] = {}
    sent: list[dict[str, Any]] = []
    for _ in range(6):
        sent.append(extra)
        result = await wire.call(arguments, **extra)
        if result.get("resultType") != "input_required":
            return result, asked, sent
        asked += [r["params"].get("message", r["method"]) for r in result["inputRequests"].values()]
        extra = {"inputResponses": {k: answer(r) for k, r in result["inputRequests"].items()},
                 "requestState": result["requestState"]}
    raise AssertionError(f"no end after {asked}")


@pytest.fixture
def ran() -> list[Any]:
    return []


@pytest.fixture
async def wire(ran: list[Any]) -> Any:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build(ran)), base_url="http://127.0.0.1") as http:
        yield Wire(http, {"elicitation": {}})


async def test_a_confirmed_action_whose_handler_asks_is_confirmed_once(wire, ran):
    result, asked, _ = await rounds(wire, {"action": "purge", "folder": "/tmp/x"})
    assert result["isError"] is False and result["content"][0]["text"] == "purged /tmp/x, kept none"
    assert asked == ['Purge "/tmp/x"?', "Keep any file?"] and ran == ["/tmp/x"]


@pytest.mark.parametrize("state", ["mine", None, {"round": 2}, OLD_CARRIER, "confirm:0123456789abcdef"])
async def test_ctx_state_is_exactly_what_the_handler_passed(wire, ran, state):
    result, asked, _ = await rounds(wire, {"action": "wipe", "folder": "/tmp/x", "state": state})
    assert result["isError"] is False and json.loads(result["content"][0]["text"]) == state
    assert asked == ['Wipe "/tmp/x"?', "Sure?"] and ran == [state]


async def test_a_replayed_round_runs_nothing_a_second_time(wire, ran):
    arguments = {"action": "purge", "folder": "/tmp/x"}
    result, _, sent = await rounds(wire, arguments)
    assert result["isError"] is False and ran == ["/tmp/x"]
    for extra in sent[1:]:  # the confirmation's answer, then the handler's: each state once
        replayed = await wire.call(arguments, **extra)
        assert replayed["isError"] is True and "already used" in replayed["content"][0]["text"]
    assert ran == ["/tmp/x"]


async def test_a_confirm_token_covers_the_rounds_of_a_handler_that_asks(ran):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build(ran)), base_url="http://127.0.0.1") as http:
        wire = Wire(http, {"sampling": {}})  # no elicitation: the _confirm token
        arguments = {"action": "shred", "folder": "/tmp/x"}
        refused = await wire.call(arguments)
        assert refused["isError"] is True and "CONFIRMATION_REQUIRED" in refused["content"][0]["text"]
        token = refused["content"][0]["text"].split('<detail key="confirm_token">')[1].split("<")[0]
        confirmed = {**arguments, "_confirm": token}
        result, asked, sent = await rounds(wire, confirmed)
        assert result["isError"] is False and result["content"][0]["text"] == "shredded /tmp/x"
        assert asked == ["sampling/createMessage"] and ran == ["/tmp/x"]
        replayed = await wire.call(confirmed, **sent[-1])
        assert replayed["isError"] is True and "already used" in replayed["content"][0]["text"]
        assert ran == ["/tmp/x"]


def test_the_round_data_is_signed_next_to_the_handler_state():
    signer = RequestStateSigner(b"k" * 32)
    token = signer.sign("tools/call", "t", {"a": {}}, state=OLD_CARRIER, caller="c",
                        framework={"progress": 2.0, "confirm": {"nonce": "n"}})
    assert signer.verify_round(token, "tools/call", "t", "c") == (
        {"a": {}}, OLD_CARRIER, {"progress": 2.0, "confirm": {"nonce": "n"}})
    assert signer.verify(token, "tools/call", "t", "c") == ({"a": {}}, OLD_CARRIER)
    assert signer.verify_round(None, "tools/call", "t") == ({}, None, {})
    payload, mac = token.split(".")
    with pytest.raises(McpError):  # the round data is under the MAC like the rest
        signer.verify_round(f"{payload[:-2]}{'A' if payload[-2] != 'A' else 'B'}{payload[-1]}.{mac}",
                            "tools/call", "t", "c")
