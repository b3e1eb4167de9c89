"""Round 7 (context): sampling with tools (MCP 2025-11-25) on both wires and stdio: a tool-enabled answer
(a list of blocks, tool_use, stopReason "toolUse") is accepted, and tools or includeContext are never sent to
a client that did not declare `sampling.tools` / `sampling.context`; on 2026-07-28 progress sent before a
question is not sent again when the retry re-runs the handler."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitResult,
    SamplingCapability,
    SamplingContextCapability,
    SamplingToolsCapability,
    TextContent,
    ToolUseContent,
)

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.context import _answer_problem, _lacking
from mcpfusion.mcp.channel import Channel
from tests.mcp_app import serve

MODES = ["legacy", "auto"]  # 2025-11-25 session wire, 2026-07-28
WEATHER = {"name": "get_weather", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}

t = Tool("s")


@t.action(readonly=True)
async def with_tools(ctx: Context) -> str:
    """Sampling with a tool: the answer, as the handler sees it."""
    return json.dumps(await ctx.sample("Weather in Paris?", tools=[WEATHER], toolChoice={"mode": "auto"}))


@t.action(readonly=True)
async def with_context(ctx: Context) -> str:
    """Sampling that asks for the client's context."""
    return json.dumps(await ctx.sample("Summarize", includeContext="thisServer"))


@t.action(readonly=True)
async def progress_then_elicit(ctx: Context) -> str:
    """Progress, a question, progress again."""
    await ctx.progress(1, 3, "before")
    await ctx.elicit("Go?", {"type": "object", "properties": {"go": {"type": "boolean"}}})
    await ctx.progress(2, 3, "after")
    return "done"


@t.action(readonly=True)
async def three_rounds(ctx: Context) -> str:
    """Progress around two questions asked one after the other (three rounds on 2026-07-28)."""
    await ctx.progress(1, 3)
    await ctx.elicit("First?")
    await ctx.progress(2, 3)
    await ctx.elicit("Second?")
    await ctx.progress(3, 3)
    return "done"


@t.action(readonly=True)
async def progress_then_ask_with_state(ctx: Context, state: Any = None) -> str:
    """Progress and a question carrying handler state: the state comes back as given."""
    await ctx.progress(1, 2)
    await ctx.ask({"q": ctx.elicitation("Go?")}, state=state)
    return json.dumps(ctx.state)


app = MCPFusion("s", tools=[t]).build_app()
TOOL_USE = CreateMessageResultWithTools(role="assistant", model="m", stop_reason="toolUse", content=[
    ToolUseContent(type="tool_use", id="c1", name="get_weather", input={"city": "Paris"})])
PLAIN = CreateMessageResult(role="assistant", model="m", content=TextContent(type="text", text="sunny"))


@pytest.fixture(scope="module")
def url():
    with serve(app) as base:  # a real server: the session wire sends its questions on the call's SSE stream
        yield base + "/mcp"


def client(url: str, mode: str, **kwargs: Any) -> Client:
    return Client(streamable_http_client(url), mode=mode, **kwargs)


# -- 1a. a tool-enabled answer is accepted ---------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_use_answer_to_sampling_with_tools_reaches_the_handler(url, mode):
    sent = []

    async def sampling(context, params):
        sent.append([tool.name for tool in params.tools or []])
        return TOOL_USE

    caps = SamplingCapability(tools=SamplingToolsCapability())
    async with client(url, mode, sampling_callback=sampling, sampling_capabilities=caps) as mcp:
        result = await mcp.call_tool("s", {"action": "with_tools"})
    assert sent == [["get_weather"]]
    assert result.is_error is False
    answer = json.loads(result.content[0].text)
    assert answer["stopReason"] == "toolUse"
    assert answer["content"] == [{"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}}]


def test_the_answer_is_checked_against_the_result_type_the_request_calls_for():
    with_tools = Context.sampling("hi", tools=[WEATHER])
    plain = Context.sampling("hi")
    tool_use = TOOL_USE.model_dump(by_alias=True, exclude_none=True)
    assert _answer_problem(with_tools, tool_use) is None
    assert _answer_problem(plain, tool_use) is not None  # a request without tools gets one block, never a tool_use
    problem = _answer_problem(with_tools, {"role": "assistant", "model": "m", "content": [{"type": "nope"}]})
    assert problem is not None and "not a valid CreateMessageResultWithTools" in problem
    # A conversation that carries tool_use/tool_result blocks is tool-enabled too.
    history = Context.sampling([{"role": "assistant", "content": [tool_use["content"][0]]},
                                {"role": "user", "content": [{"type": "tool_result", "toolUseId": "c1",
                                                              "content": [{"type": "text", "text": "sunny"}]}]}])
    assert _answer_problem(history, tool_use) is None
    assert _lacking({"sampling": {}}, history) == {"sampling": {"tools": {}}}


# -- 1b. nothing the client did not declare is sent --------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("action", "needs"), [("with_tools", "tools"), ("with_context", "context")])
async def test_sampling_the_client_did_not_declare_is_refused_before_sending(url, mode, action, needs):
    sent = []

    async def sampling(context, params):
        sent.append(params)
        return PLAIN

    async with client(url, mode, sampling_callback=sampling) as mcp:  # declares `sampling: {}` only
        with pytest.raises(Exception) as caught:
            await mcp.call_tool("s", {"action": action})
    assert sent == []
    error = caught.value
    assert getattr(error, "code", None) == -32021
    assert getattr(error, "data", None) == {"requiredCapabilities": {"sampling": {needs: {}}}}
    assert f"'sampling.{needs}'" in str(error)


@pytest.mark.parametrize("mode", MODES)
async def test_include_context_is_sent_to_a_client_that_declared_it(url, mode):
    sent = []

    async def sampling(context, params):
        sent.append(params.include_context)
        return PLAIN

    caps = SamplingCapability(context=SamplingContextCapability())
    async with client(url, mode, sampling_callback=sampling, sampling_capabilities=caps) as mcp:
        result = await mcp.call_tool("s", {"action": "with_context"})
    assert result.is_error is False and sent == ["thisServer"]


def test_can_ask_and_the_capabilities_a_sampling_request_lacks():
    ctx = Context(Channel(), transport="test", client_capabilities={"sampling": {}})
    assert ctx.can_ask(Context.sampling("hi")) is True
    assert ctx.can_ask(Context.sampling("hi", includeContext="none")) is True
    assert ctx.can_ask(Context.sampling("hi", tools=[WEATHER])) is False
    both = Context.sampling("hi", tools=[WEATHER], includeContext="allServers")
    assert _lacking({}, both) == {"sampling": {"tools": {}, "context": {}}}
    assert _lacking({"sampling": {"tools": {}, "context": {}}}, both) == {}
    assert _lacking({}, Context.sampling("hi")) == {"sampling": {}}


def stdio_params() -> StdioServerParameters:
    root = Path(__file__).parent.parent
    return StdioServerParameters(command=sys.executable, cwd=str(root), env={"PYTHONPATH": str(root)},
                                 args=["-m", "mcpfusion.mcp.stdio", "tests.test_round7_context:app"])


@pytest.mark.parametrize("mode", MODES)
async def test_sampling_with_tools_over_stdio(mode):
    async def sampling(context, params):
        return TOOL_USE if params.tools else PLAIN

    caps = SamplingCapability(tools=SamplingToolsCapability())
    async with Client(stdio_params(), mode=mode, sampling_callback=sampling, sampling_capabilities=caps) as mcp:
        result = await mcp.call_tool("s", {"action": "with_tools"})
    assert result.is_error is False and json.loads(result.content[0].text)["stopReason"] == "toolUse"
    async with Client(stdio_params(), mode=mode, sampling_callback=sampling) as mcp:
        with pytest.raises(Exception) as caught:
            await mcp.call_tool("s", {"action": "with_tools"})
    assert getattr(caught.value, "code", None) == -32021


# -- 2. progress across the rounds of a 2026-07-28 request -------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
async def test_progress_sent_before_a_question_is_not_sent_again_on_the_retry(url, mode):
    seen = []

    async def elicit(context, params):
        return ElicitResult(action="accept", content={"go": True})

    async def on_progress(done, total, message):
        seen.append((done, message))

    async with client(url, mode, elicitation_callback=elicit) as mcp:
        result = await mcp.call_tool("s", {"action": "progress_then_elicit"}, progress_callback=on_progress)
    assert result.is_error is False
    assert seen == [(1.0, "before"), (2.0, "after")]


@pytest.mark.parametrize("mode", MODES)
async def test_progress_increases_over_three_rounds(url, mode):
    seen = []

    async def elicit(context, params):
        return ElicitResult(action="accept", content={})

    async def on_progress(done, total, message):
        seen.append(done)

    async with client(url, mode, elicitation_callback=elicit) as mcp:
        result = await mcp.call_tool("s", {"action": "three_rounds"}, progress_callback=on_progress)
    assert result.is_error is False and seen == [1.0, 2.0, 3.0]


CARRIER_LIKE = {"io.mcpfusion/context": {"state": "x", "progress": 9}}


@pytest.mark.parametrize("state", [None, "s1", {"round": 1}, CARRIER_LIKE])
async def test_the_handler_state_comes_back_as_given_next_to_the_carried_progress(url, state):
    async def elicit(context, params):
        return ElicitResult(action="accept", content={})

    async def on_progress(done, total, message):
        pass

    async with client(url, "auto", elicitation_callback=elicit) as mcp:
        result = await mcp.call_tool("s", {"action": "progress_then_ask_with_state", "state": state},
                                     progress_callback=on_progress)
    assert result.is_error is False and json.loads(result.content[0].text) == state
