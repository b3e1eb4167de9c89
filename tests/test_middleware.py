"""Middleware around every action call: order, the typed call context, changed arguments and responses,
short-circuits, on every transport (tester, REST, MCP 2025-11-25 and 2026-07-28, stdio); and middleware
declared in discovered files and on a tool whose actions come from several files."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from starlette.requests import Request

from mcpfusion import ActionCall, CallNext, MCPFusion, Tool, ToolError, ToolResponse, success
from mcpfusion.auth import RequireBearer
from mcpfusion.discovery import discover_tools
from tests.governance_kit import TRANSPORTS, Caller, authenticate


def recorder(name: str, log: list[Any]):
    async def middleware(call: ActionCall, call_next: CallNext) -> ToolResponse:
        log.append(f"{name}>")
        response = await call_next(call)
        log.append(f"<{name}:{response.error_code or 'ok'}")
        return response

    middleware.__name__ = name
    return middleware


def build(log: list[Any], tools: list[Tool] | None = None, app_middleware: list[Any] | None = None) -> FastAPI:
    if tools is None:
        desk = Tool("desk", middleware=[recorder("tool", log)])

        @desk.action(readonly=True, middleware=[recorder("action", log)])
        async def echo(text: str) -> str:
            """Answer the text."""
            log.append("handler")
            return text

        tools = [desk]

    async def inspect_call(call: ActionCall, call_next: CallNext) -> ToolResponse:
        log.append({"transport": call.transport, "tool": call.tool.name, "action": call.action.name,
                    "arguments": dict(call.arguments), "principal": call.principal_id, "tenant": call.tenant,
                    "request_id": call.request_id, "has_request": isinstance(call.request, Request)})
        return await call_next(call)

    async def rewrite(call: ActionCall, call_next: CallNext) -> ToolResponse:
        text = call.arguments.get("text", "")
        if text == "forbidden":
            raise ToolError("DENIED", "Not this text.", recovery="Send another text.")
        if text.startswith("shout:"):
            call.arguments["text"] = text.removeprefix("shout:").upper()
        response = await call_next(call)
        if text == "wrap" and not response.is_error:
            return success(f"[{response.texts[0]}]")
        return response

    middleware = app_middleware if app_middleware is not None else [
        recorder("app1", log), inspect_call, recorder("app2", log), rewrite]
    fusion = MCPFusion("governed", middleware=middleware, json_response=False)
    for tool in tools:
        fusion.registry.add(tool)
    app = fusion.build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


@pytest.fixture(params=TRANSPORTS)
async def caller_for(request):
    made: list[Caller] = []

    def make(app: FastAPI, tool: str = "desk", token: str | None = "alice") -> Caller:
        made.append(Caller(app, request.param, tool, token))
        return made[-1]

    yield make
    for caller in made:
        await caller.aclose()


async def test_order_and_call_context_on_every_transport(caller_for):
    log: list[Any] = []
    caller = caller_for(build(log))
    outcome = await caller.call("echo", {"text": "hi"})
    assert outcome.code is None and "hi" in outcome.texts[0]
    steps = [s for s in log if isinstance(s, str)]
    assert steps == ["app1>", "app2>", "tool>", "action>", "handler", "<action:ok", "<tool:ok", "<app2:ok",
                     "<app1:ok"]
    seen = next(s for s in log if isinstance(s, dict))
    transport = {"mcp-2025": "mcp", "mcp-2026": "mcp"}.get(caller.transport, caller.transport)
    assert seen["transport"] == transport
    assert (seen["tool"], seen["action"], seen["arguments"]) == ("desk", "echo", {"text": "hi"})
    assert seen["has_request"] is True and seen["request_id"]
    if caller.transport == "tester":  # no HTTP middleware in process: the caller is known by its token
        assert seen["principal"].startswith("token:") and seen["tenant"] is None
    else:  # RequireBearer stored the principal; middleware read it
        assert (seen["principal"], seen["tenant"]) == ("alice", "acme")


async def test_middleware_change_arguments_and_the_response(caller_for):
    log: list[Any] = []
    caller = caller_for(build(log))
    shouted = await caller.call("echo", {"text": "shout:hello"})
    assert shouted.code is None and "HELLO" in shouted.texts[0]
    wrapped = await caller.call("echo", {"text": "wrap"})
    assert wrapped.code is None and "[wrap]" in wrapped.texts[0]


async def test_a_tool_error_short_circuits_and_outer_middleware_see_it(caller_for):
    log: list[Any] = []
    caller = caller_for(build(log))
    denied = await caller.call("echo", {"text": "forbidden"})
    assert denied.code == "DENIED" and "Send another text." in denied.text
    steps = [s for s in log if isinstance(s, str)]
    assert "handler" not in steps and "tool>" not in steps
    assert steps == ["app1>", "app2>", "<app2:DENIED", "<app1:DENIED"]
    if caller.transport == "rest":
        assert denied.status == 400


async def test_invalid_arguments_never_reach_middleware(caller_for):
    log: list[Any] = []
    caller = caller_for(build(log))
    bad = await caller.call("echo", {"text": 5})
    assert bad.code == "VALIDATION_ERROR" and log == []


async def test_a_failing_middleware_is_an_internal_error_for_the_agent_and_outer_middleware(caller_for):
    log: list[Any] = []

    async def broken(call: ActionCall, call_next: CallNext) -> ToolResponse:
        raise RuntimeError("secret detail")

    caller = caller_for(build(log, app_middleware=[recorder("outer", log), broken]))
    failed = await caller.call("echo", {"text": "x"})
    assert failed.code == "INTERNAL_ERROR" and "secret detail" not in failed.text
    assert log == ["outer>", "<outer:INTERNAL_ERROR"]


async def test_a_middleware_returning_no_response_is_named_and_the_call_fails_cleanly(caller_for, caplog):
    """A middleware that returns a dict (or None) instead of the ToolResponse: the agent gets an internal
    error on every transport, its outer middleware see that error, and the log names the middleware."""
    log: list[Any] = []

    async def forgetful(call: ActionCall, call_next: CallNext) -> ToolResponse:
        await call_next(call)
        return {"content": "oops"}  # type: ignore[return-value]

    caller = caller_for(build(log, app_middleware=[recorder("outer", log), forgetful]))
    failed = await caller.call("echo", {"text": "x"})
    assert failed.code == "INTERNAL_ERROR" and "oops" not in failed.text
    assert (log[0], log[-1]) == ("outer>", "<outer:INTERNAL_ERROR")  # the inner layers ran, as call_next does
    assert "forgetful" in caplog.text and "returned a dict, not the ToolResponse" in caplog.text


async def test_no_middleware_means_no_pipeline():
    plain = Tool("plain")

    @plain.action(readonly=True)
    async def ping() -> str:
        return "pong"

    fusion = MCPFusion("plain", tools=[plain])
    caller = Caller(fusion.build_app(), "tester", "plain")
    assert (await caller.call("ping")).texts == ["pong"]
    assert fusion.registry._pipelines == {plain.actions["ping"]: None}  # the plain path, nothing composed
    await caller.aclose()


def test_order_is_app_then_tool_then_action():
    log: list[Any] = []
    app = build(log)
    registry = app.state.mcpfusion.registry
    action = registry.tools["desk"].actions["echo"]
    names = [getattr(m, "__name__", "") for m in registry.layers(action)]
    assert names == ["app1", "inspect_call", "app2", "rewrite", "tool", "action"]


DISCOVERED_TOOL = '''
from mcpfusion import ActionCall, Tool

LOG = []

async def tool_level(call: ActionCall, call_next):
    LOG.append("tool:" + call.action.name)
    return await call_next(call)

notes = Tool("notes", middleware=[tool_level])

@notes.action(readonly=True)
async def read(id: str) -> str:
    """Read a note."""
    return "note " + id
'''

MORE_ACTIONS = '''
from mcpfusion import ActionCall

from .notes import LOG, notes

async def action_level(call: ActionCall, call_next):
    LOG.append("action:" + call.action.name)
    return await call_next(call)

@notes.action(middleware=[action_level])
async def write(id: str, text: str) -> str:
    """Write a note (declared in another file than the tool)."""
    return "wrote " + id
'''


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_middleware_survive_discovery_and_a_tool_merged_from_two_files(tmp_path, monkeypatch, transport):
    package = tmp_path / "gov_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "notes.py").write_text(DISCOVERED_TOOL)
    (package / "notes_more.py").write_text(MORE_ACTIONS)
    monkeypatch.syspath_prepend(str(tmp_path))
    tools = discover_tools(package)
    assert [t.name for t in tools] == ["notes"] and set(tools[0].actions) == {"read", "write"}
    import gov_tools.notes as module

    module.LOG.clear()  # the package stays imported across the parametrized runs
    log: list[Any] = []
    app = build(log, tools=tools, app_middleware=[recorder("app", log)])
    caller = Caller(app, transport, "notes")
    try:
        assert (await caller.call("read", {"id": "n1"})).code is None
        assert (await caller.call("write", {"id": "n1", "text": "t"})).code is None
    finally:
        await caller.aclose()
    assert module.LOG == ["tool:read", "tool:write", "action:write"]
    assert log == ["app>", "<app:ok", "app>", "<app:ok"]
