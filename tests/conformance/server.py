"""The fixtures of the official MCP conformance suite, written with mcpfusion's public API only.

    python tests/conformance/server.py --port 3001      # MCP at http://127.0.0.1:3001/mcp

`scripts/conformance.sh` runs the suite against it at the 2025-11-25 and 2026-07-28 wires. What each
fixture must do is in notes/conformance.md (section 6); names and texts are the suite's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Annotated, Any

import uvicorn
from pydantic import Field

from mcpfusion import Context, MCPFusion, Tool

# 1x1 PNG and a tiny WAV, as the suite's reference servers send them.
TEST_IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
TEST_AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

fusion = MCPFusion("mcp-conformance-test-server", "0.1.0")

# -- plain tools: actions of a flat tool named "test", exposed as test_<action> -------------------------

test = Tool("test", description="Conformance fixtures", exposition="flat")


@test.action()
async def simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@test.action()
async def tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@test.action()
async def tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    for step in (0, 50, 100):
        await ctx.progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await asyncio.sleep(0.05)
    return str(ctx.meta.get("progressToken", 0))


@test.action()
async def error_handling() -> str:
    """Tests error response handling"""
    raise RuntimeError("This tool intentionally returns an error for testing")


@test.action()
async def sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling (LLM completion request)"""
    result = await ctx.sample(prompt, max_tokens=100)
    content = result.get("content") or {}
    return f"LLM response: {content.get('text', 'No response')}"


@test.action()
async def elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation (user input request)"""
    schema = {
        "type": "object",
        "properties": {"username": {"type": "string", "description": "User's response"},
                       "email": {"type": "string", "description": "User's email address"}},
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: action={result.get('action')}, content={json.dumps(result.get('content') or {})}"


@test.action()
async def elicitation_sep1034_defaults(ctx: Context) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)"""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
    }
    result = await ctx.elicit("Please provide user information", schema)
    return f"Elicitation result: action={result.get('action')}, content={json.dumps(result.get('content') or {})}"


@test.action()
async def elicitation_sep1330_enums(ctx: Context) -> str:
    """Tests elicitation with enum schema variations per SEP-1330"""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
        },
        "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
    }
    result = await ctx.elicit("Please select values using different enum schema types", schema)
    return f"Elicitation completed: action={result.get('action')}, content={json.dumps(result.get('content') or {})}"


@test.action()
async def x_mcp_header(
    region: Annotated[
        str,
        Field(description="Mirrored into the Mcp-Param-Region header", json_schema_extra={"x-mcp-header": "Region"}),
    ] = "<none>",
) -> str:
    """Tests SEP-2243 Mcp-Param-* server-side validation"""
    return f"region={region}"


@test.action()
async def missing_capability(ctx: Context) -> str:
    """Requires the client 'sampling' capability (JSON-RPC -32021 without it)"""
    ctx.require_capability("sampling")
    return "Client declared sampling capability; proceeding."


@test.action()
async def reconnection(ctx: Context) -> str:
    """Tests SSE polling by closing the stream mid-call (SEP-1699)"""
    await ctx.info("Before disconnect")
    ctx.close_stream()
    await asyncio.sleep(0.2)  # the client reconnects with Last-Event-ID meanwhile
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@test.action()
async def logging_tool(ctx: Context) -> str:
    """Logs one message: dropped unless the request set a log level"""
    await ctx.info("Diagnostic trace logging activated")
    return "Logging evaluated"


@test.action()
async def streaming_elicitation(ctx: Context) -> str:
    """Asks the client for confirmation (an input-required result on the 2026 wire)"""
    await ctx.elicit("Please confirm", CONFIRM_SCHEMA, key="confirm")
    return "Streaming complete"


# -- input-required results (SEP-2322); on the session wires the same code sends real requests --------


@test.action()
async def input_required_result_elicitation(ctx: Context) -> str:
    """Tests InputRequiredResult with a single elicitation request"""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}!"


@test.action()
async def input_required_result_sampling(ctx: Context) -> str:
    """Tests InputRequiredResult with a single sampling request"""
    answer = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"Model said: {(answer.get('content') or {}).get('text', '?')}"


@test.action()
async def input_required_result_list_roots(ctx: Context) -> str:
    """Tests InputRequiredResult with a single roots/list request"""
    roots = await ctx.list_roots(key="client_roots")
    return f"Client exposed {len(roots)} root(s)."


@test.action()
async def input_required_result_request_state(ctx: Context) -> str:
    """Tests requestState round-tripping in the InputRequiredResult flow"""
    await ctx.ask({"confirm": Context.elicitation("Please confirm", CONFIRM_SCHEMA)}, state="request-state-nonce")
    if ctx.state != "request-state-nonce":
        return "state missing"
    return "state-ok: confirmation received"


@test.action()
async def input_required_result_multiple_inputs(ctx: Context) -> str:
    """Tests InputRequiredResult carrying elicitation, sampling and roots requests together"""
    await ctx.ask(
        {
            "user_name": Context.elicitation("What is your name?", NAME_SCHEMA),
            "greeting": Context.sampling("Generate a greeting", max_tokens=50),
            "client_roots": Context.roots(),
        },
        state="multiple-inputs",
    )
    return "All inputs received."


@test.action()
async def input_required_result_multi_round(ctx: Context) -> str:
    """Tests a three-round InputRequiredResult flow with evolving requestState"""
    step1 = await ctx.ask({"step1": Context.elicitation("Step 1: What is your name?", NAME_SCHEMA)}, state={"round": 1})
    name = (step1["step1"].get("content") or {}).get("name")
    color_schema = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    step2 = await ctx.ask(
        {"step2": Context.elicitation("Step 2: What is your favorite color?", color_schema)},
        state={"round": 2, "name": name},
    )
    color = (step2["step2"].get("content") or {}).get("color")
    return f"{name} likes {color}."


@test.action()
async def input_required_result_tampered_state(ctx: Context) -> str:
    """Tests that the server rejects a tampered requestState echo"""
    await ctx.ask({"confirm": Context.elicitation("Please confirm", CONFIRM_SCHEMA)}, state="round-1")
    return f"state-ok: {ctx.state}"


@test.action()
async def input_required_result_capabilities(ctx: Context) -> str:
    """Tests that inputRequests only include methods the client declared support for"""
    requests: dict[str, dict[str, Any]] = {}
    if "sampling" in ctx.client_capabilities:
        requests["sample"] = Context.sampling("Say hello", max_tokens=50)
    if "elicitation" in ctx.client_capabilities:
        requests["ask"] = Context.elicitation("What is your name?", NAME_SCHEMA)
    await ctx.ask(requests, state="capability-gated")
    return f"Received {len(requests)} answer(s)."


@test.action()
async def trigger_tool_change() -> str:
    """Adds and removes a tool, then tells subscriptions/listen streams (SEP-2575)"""
    fusion.raw_tool("test_dynamic_tool", description="A tool that exists for an instant")(lambda: "dynamic")
    fusion.remove_raw_tool("test_dynamic_tool")
    await fusion.notify_tools_changed()
    return "tool list changed"


@test.action()
async def trigger_prompt_change() -> str:
    """Adds and removes a prompt, then tells subscriptions/listen streams (SEP-2575)"""
    fusion.prompt("test_dynamic_prompt", description="A prompt that exists for an instant")(lambda: "dynamic")
    fusion.remove_prompt("test_dynamic_prompt")
    await fusion.notify_prompts_changed()
    return "prompt list changed"


fusion.add_tool(test)

# -- tools answering non-text content or a hand-written schema: raw tools -------------------------------


def _image() -> dict[str, Any]:
    return {"type": "image", "data": TEST_IMAGE, "mimeType": "image/png"}


def _text_resource(uri: str, mime_type: str, text: str) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text}}


@fusion.raw_tool("test_image_content", description="Tests image content response")
def image_content() -> list[dict[str, Any]]:
    return [_image()]


@fusion.raw_tool("test_audio_content", description="Tests audio content response")
def audio_content() -> list[dict[str, Any]]:
    return [{"type": "audio", "data": TEST_AUDIO, "mimeType": "audio/wav"}]


@fusion.raw_tool("test_embedded_resource", description="Tests embedded resource content response")
def embedded_resource() -> list[dict[str, Any]]:
    return [_text_resource("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@fusion.raw_tool(
    "test_multiple_content_types", description="Tests response with multiple content types (text, image, resource)"
)
def multiple_content_types() -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": "Multiple content types test:"},
        _image(),
        _text_resource("test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}'),
    ]


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@fusion.raw_tool(
    "json_schema_2020_12_tool",
    description="Tests JSON Schema 2020-12 keyword preservation in tools/list",
    input_schema=JSON_SCHEMA_2020_12,
)
def json_schema_2020_12_tool(**arguments: Any) -> str:
    return "json_schema_2020_12_tool"


# -- resources ----------------------------------------------------------------------------------------


@fusion.resource("test://static-text", name="static_text_resource", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@fusion.resource("test://static-binary", name="static_binary_resource", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (image) for testing"""
    return base64.b64decode(TEST_IMAGE)


@fusion.resource_template("test://template/{id}/data", name="template_resource", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template with parameter substitution"""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@fusion.resource("test://watched-resource", name="watched_resource", mime_type="text/plain")
def watched() -> str:
    """A resource that can be subscribed to for updates"""
    return "Watched resource content"


# -- prompts and completion -----------------------------------------------------------------------------


@fusion.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments"""
    return "This is a simple prompt for testing."


@fusion.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments"""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@fusion.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:  # noqa: N803 - the suite's argument name
    """A prompt that includes an embedded resource"""
    return [
        {
            "role": "user",
            "content": _text_resource(resourceUri, "text/plain", "Embedded resource content for testing."),
        },
        "Please process the embedded resource above.",
    ]


@fusion.prompt()
def test_prompt_with_image() -> list[Any]:
    """A prompt that includes image content"""
    return [{"role": "user", "content": _image()}, "Please analyze the image above."]


@fusion.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """Tests InputRequiredResult from prompts/get (SEP-2322 non-tool request)"""
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    answer = await ctx.elicit("What context should the prompt use?", schema, key="user_context")
    return f"Use the following context: {(answer.get('content') or {}).get('context', '?')}"


@fusion.completion(prompt="test_prompt_with_arguments", argument="arg1")
def complete_arg1(value: str) -> list[str]:
    return [v for v in ("testValue1", "testValue2") if v.startswith(value)]


app = fusion.build_app()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=3001)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
