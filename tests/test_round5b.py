"""Round 5b: a client's made-up JSON-RPC method never names the server span nor its `mcp.method.name` (`_OTHER`,
as the metric), on the 2025-11-25 session wire, the 2026-07-28 wire and stdio; unknown tool, prompt and resource
names never make a span name either."""

from __future__ import annotations

import json
from typing import Any

import httpx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp.stdio import StdioBridge
from mcpfusion.telemetry import Telemetry
from tests.wire_kit import ACCEPT, session

META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
MADE_UP = ["user/alice@example.com/0", "probe-1", "x/sk_live_SECRET42", "made/up\n" + "y" * 5000]
SECRETS = ["alice@example.com", "probe-1", "sk_live_SECRET42", "made/up", "yyyy"]


class Recorded:
    """An app with one tool, traced and measured in memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        notes = Tool("notes", description="Notes.")

        @notes.action(readonly=True)
        async def count(text: str) -> int:
            """Count the words."""
            return len(text.split())

        telemetry = Telemetry(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[self.reader]))
        self.fusion = MCPFusion("notes", tools=[notes], telemetry=telemetry)
        self.app = self.fusion.build_app()

    def server_spans(self) -> list[Any]:
        return [s for s in self.spans.get_finished_spans() if "mcp.method.name" in (s.attributes or {})]

    def method_labels(self) -> set[str]:
        return {p.attributes["mcp.method.name"] for r in self.reader.get_metrics_data().resource_metrics
                for scope in r.scope_metrics for m in scope.metrics if m.name == "mcp.server.operation.duration"
                for p in m.data.data_points}


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def assert_nothing_made_up(spans: list[Any]) -> None:
    """No span's name or attribute carries any of the made-up text."""
    for span in spans:
        text = json.dumps([span.name, dict(span.attributes or {})])
        assert not any(secret in text for secret in SECRETS), text[:200]


async def test_made_up_methods_name_no_span_on_either_wire():
    recorded = Recorded()
    async with client(recorded.app) as http:
        headers = await session(http)
        for i, method in enumerate(MADE_UP):
            r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 10 + i, "method": method}, headers=headers)
            assert '"code":-32601' in r.text  # (answered on an event stream)
        for i, method in enumerate(MADE_UP[:3]):  # (a header value cannot carry the line break)
            body = {"jsonrpc": "2.0", "id": 20 + i, "method": method, "params": {"_meta": META_2026}}
            r = await http.post("/mcp", json=body, headers={**ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                              "mcp-method": method})
            assert r.json()["error"]["code"] == -32601
    made_up = recorded.server_spans()  # (a session's initialize is answered outside the traced dispatch)
    assert len(made_up) == len(MADE_UP) + 3
    assert {s.name for s in made_up} == {"_OTHER"}
    assert {s.attributes["mcp.method.name"] for s in made_up} == {"_OTHER"}
    assert {s.attributes["error.type"] for s in made_up} == {"-32601"}
    assert_nothing_made_up(recorded.spans.get_finished_spans())
    assert recorded.method_labels() == {"_OTHER"}


async def test_made_up_method_on_stdio_names_no_span():
    recorded = Recorded()
    lines: list[dict[str, Any]] = []
    bridge = StdioBridge(recorded.app, lambda text: lines.append(json.loads(text)), headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "x/sk_live_SECRET42",
                                         "params": {"_meta": META_2026}}))
    await bridge.close()
    assert lines[-1]["error"]["code"] == -32601
    (span,) = recorded.server_spans()
    assert span.name == span.attributes["mcp.method.name"] == "_OTHER"
    assert span.attributes["network.transport"] == "pipe"
    assert_nothing_made_up([span])


async def test_known_methods_and_registered_tools_keep_their_names():
    """The fold is for made-up methods only: MCP's own methods and the server's tools still name spans."""
    recorded = Recorded()
    async with client(recorded.app) as http:
        headers = await session(http)
        await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
        r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "notes", "arguments": {"action": "count", "text": "a b"}}}, headers=headers)
        assert '"isError":false' in r.text
    names = {s.name: s.attributes["mcp.method.name"] for s in recorded.server_spans()}
    assert names == {"tools/list": "tools/list", "tools/call notes": "tools/call"}


async def test_unknown_tool_prompt_and_resource_make_no_span_name():
    """A client's names and URIs go only to their (cleaned) attributes: the span names stay the method's."""
    recorded = Recorded()
    async with client(recorded.app) as http:
        headers = await session(http)
        for i, (method, params) in enumerate([
            ("tools/call", {"name": "user/alice@example.com/0", "arguments": {}}),
            ("prompts/get", {"name": "x/sk_live_SECRET42"}),
            ("resources/read", {"uri": "file:///probe-1"}),
        ]):
            await http.post("/mcp", json={"jsonrpc": "2.0", "id": i + 1, "method": method, "params": params},
                            headers=headers)
    names = sorted(s.name for s in recorded.server_spans())
    assert names == ["prompts/get", "resources/read", "tools/call"]
