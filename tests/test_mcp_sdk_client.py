"""The official SDK client (`mcp.Client`) against a real uvicorn server, at both wires."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

from tests.mcp_app import build_fusion, serve

MODES = ["auto", "legacy"]


@pytest.fixture(scope="module", params=[False, True], ids=["sse", "json"])
def server(request):
    with serve(build_fusion(json_response=request.param).build_app()) as base:
        yield base + "/mcp", request.param


@pytest.fixture
def url(server):
    return server[0]


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def elicit(context, params):
    return ElicitResult(action="accept", content={"ok": True})


async def sample(context, params):
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="short"), model="m")


async def list_roots(context):
    return ListRootsResult(roots=[Root(uri="file:///work", name="work")])


@pytest.mark.parametrize("mode", MODES)
async def test_lists_and_calls_presenter_and_structured_actions(url, mode):
    async with Client(url, mode=mode) as client:
        expected_version = "2025-11-25" if mode == "legacy" else "2026-07-28"
        assert client.protocol_version == expected_version
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"billing_get_invoice", "billing_totals", "billing_whoami"} <= set(tools)
        assert tools["billing_totals"].output_schema["properties"]["count"]["type"] == "integer"
        assert tools["billing_get_invoice"].annotations.read_only_hint is True

        result = await client.call_tool("billing_get_invoice", {"id": "inv_1"})
        assert result.is_error is False
        text = text_of(result)
        assert '"customer_email":"[REDACTED]"' in text and "ada@example.com" not in text
        assert "<domain_rules>" in text

        # The client validates structuredContent against the advertised outputSchema.
        structured = await client.call_tool("billing_totals", {})
        assert structured.structured_content == {"count": 1, "amount_cents": 1250}

        whoami = await client.call_tool("billing_whoami", {})
        assert text_of(whoami) == "tenant=acme"


@pytest.mark.parametrize("mode", MODES)
async def test_tool_errors_are_results_and_unknown_tools_are_protocol_errors(url, mode):
    async with Client(url, mode=mode) as client:
        bad = await client.call_tool("billing_get_invoice", {"id": 5})
        assert bad.is_error is True and "<validation_error" in text_of(bad)
        with pytest.raises(Exception) as exc_info:
            await client.call_tool("nope", {})
        assert "Unknown tool: nope" in str(exc_info.value)


@pytest.mark.parametrize("mode", MODES)
async def test_resources_prompts_and_completion(url, mode):
    async with Client(url, mode=mode) as client:
        resources = {r.name: r for r in (await client.list_resources()).resources}
        assert str(resources["readme"].uri) == "file:///readme.txt"
        text = await client.read_resource("file:///readme.txt")
        assert text.contents[0].text == "Read me."
        blob = await client.read_resource("file:///logo.png")
        assert blob.contents[0].mime_type == "image/png" and blob.contents[0].blob
        templates = (await client.list_resource_templates()).resource_templates
        assert templates[0].uri_template == "invoices://{id}/summary"
        summary = await client.read_resource("invoices://inv_1/summary")
        assert json.loads(summary.contents[0].text)["known"] is True

        prompts = (await client.list_prompts()).prompts
        assert prompts[0].name == "reminder"
        assert [(a.name, a.required) for a in prompts[0].arguments] == [("invoice_id", True), ("tone", False)]
        got = await client.get_prompt("reminder", {"invoice_id": "inv_1", "tone": "firm"})
        assert got.messages[0].content.text == "Write a firm reminder for inv_1."

        from mcp.types import PromptReference

        done = await client.complete(PromptReference(type="ref/prompt", name="reminder"),
                                     {"name": "tone", "value": "p"})
        assert done.completion.values == ["polite", "playful"]


@pytest.mark.parametrize("mode", MODES)
async def test_progress_and_logging_reach_the_client(server, mode):
    url, json_mode = server
    progress: list[float] = []
    logs: list[str] = []

    async def on_progress(value, total, message):
        progress.append(value)

    async def on_log(params):
        logs.append(params.data)

    async with Client(url, mode=mode, logging_callback=on_log, log_level="info") as client:
        if mode == "legacy":
            await client.set_logging_level("info")
        result = await client.call_tool("billing_slow_export", {"steps": 3}, progress_callback=on_progress)
        assert text_of(result) == "exported"
    if json_mode and mode == "auto":
        # 2026-07-28 in JSON mode: one JSON body per request, no stream for in-flight notifications.
        assert progress == [] and logs == []
    elif json_mode:
        # The session wire in JSON mode sends them on the session's GET stream, which the client opens
        # in the background: whatever arrived did so in order (best effort, as the spec allows).
        assert progress == sorted(progress) and set(progress) <= {1, 2, 3}
    else:
        assert progress == [1, 2, 3]
        assert logs == ["step 1 done", "step 2 done", "step 3 done"]


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_sampling_and_roots(url, mode):
    async with Client(url, mode=mode, elicitation_callback=elicit, sampling_callback=sample,
                      list_roots_callback=list_roots) as client:
        assert text_of(await client.call_tool("billing_confirm_delete", {"id": "inv_1"})) == "deleted"
        assert text_of(await client.call_tool("billing_summarize", {"text": "long"})) == "LLM said: short"
        assert text_of(await client.call_tool("billing_roots", {})) == "1 root(s)"
