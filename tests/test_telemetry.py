"""OpenTelemetry traces and metrics of a tools/call on both MCP wires, REST and stdio, read back from the
SDK's in-memory exporters; W3C trace context taken from `_meta` and from HTTP headers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import Depends
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from mcpfusion import MCPFusion, Presenter, Tool
from mcpfusion.errors import ToolError
from mcpfusion.mcp.stdio import StdioBridge
from mcpfusion.telemetry import Telemetry

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class Invoice(BaseModel):
    id: str
    amount_cents: int


invoice_view = Presenter("invoice").schema(Invoice)


def tenant() -> str:
    return "acme"


def build(count_tokens: bool = True) -> tuple[Any, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    telemetry = Telemetry(tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[metrics]),
                          count_tokens=count_tokens)
    billing = Tool("billing", description="Invoices")

    @billing.action(readonly=True, returns=invoice_view)
    async def get_invoice(id: str, who: str = Depends(tenant)):
        """Fetch one invoice."""
        if id == "missing":
            raise ToolError("NOT_FOUND", f"Invoice {id} was not found.")
        return {"id": id, "amount_cents": 1250, "secret": "never"}

    app = MCPFusion("traced", tools=[billing], telemetry=telemetry).build_app()
    return app, spans, metrics


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def by_name(spans: InMemorySpanExporter) -> dict[str, Any]:
    return {span.name: span for span in spans.get_finished_spans()}


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def assert_action_tree(found: dict[str, Any], parent: Any, transport: str) -> None:
    """execute_tool under `parent`, with dependency, handler and present spans under it."""
    action = found["execute_tool billing.get_invoice"]
    assert action.parent.span_id == parent.context.span_id
    assert action.context.trace_id == parent.context.trace_id
    assert action.attributes["gen_ai.tool.name"] == "billing.get_invoice"
    assert action.attributes["gen_ai.operation.name"] == "execute_tool"
    assert action.attributes["mcpfusion.transport"] == transport
    for child in ("mcpfusion.dependencies", "mcpfusion.handler", "mcpfusion.present"):
        assert found[child].parent.span_id == action.context.span_id, child


def assert_action_metrics(reader: InMemoryMetricReader, transport: str) -> None:
    points = metric_points(reader)
    calls = [p for p in points["mcpfusion.action.calls"] if p.attributes["mcpfusion.transport"] == transport]
    assert [p.value for p in calls] == [1]
    assert calls[0].attributes["mcpfusion.tool"] == "billing"
    assert calls[0].attributes["mcpfusion.action"] == "get_invoice"
    assert [p.count for p in points["mcpfusion.action.duration"]] == [1]
    renders = [p for p in points["mcpfusion.presenter.render.time"] if p.attributes["mcpfusion.transport"] == transport]
    assert len(renders) == 1 and 0 < renders[0].value < 5  # seconds spent presenting, summed per action
    body = json.dumps({"id": "inv_1", "amount_cents": 1250}, separators=(",", ":"))
    assert points["mcpfusion.response.size"][0].value >= len(body)
    assert points["mcpfusion.response.tokens"][0].value > 5


async def test_sessionless_wire_traces_a_tools_call_under_the_meta_traceparent():
    app, spans, metrics = build()
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"},
        "_meta": {**META_2026, "traceparent": TRACEPARENT}}}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": "billing"}
    async with client(app) as http:
        r = await http.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200 and r.json()["result"]["isError"] is False
    found = by_name(spans)
    server = found["tools/call billing"]
    assert server.kind is SpanKind.SERVER
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert format(server.parent.span_id, "016x") == PARENT_ID
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["jsonrpc.request.id"] == "7"
    assert server.attributes["mcp.protocol.version"] == "2026-07-28"
    assert server.attributes["network.transport"] == "tcp"
    assert server.attributes["gen_ai.tool.name"] == "billing"
    assert "error.type" not in server.attributes
    assert_action_tree(found, server, "mcp")
    assert_action_metrics(metrics, "mcp")
    points = metric_points(metrics)
    assert [p.attributes["mcp.method.name"] for p in points["mcp.server.operation.duration"]] == ["tools/call"]


async def test_session_wire_traces_under_the_http_traceparent_with_the_session_id():
    app, spans, metrics = build()
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with client(app) as http:
        init = await http.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        session = init.headers["mcp-session-id"]
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25", "traceparent": TRACEPARENT}
        await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        r = await http.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"}}})
    assert r.status_code == 200 and '"isError":false' in r.text
    found = by_name(spans)
    server = found["tools/call billing"]
    assert format(server.parent.span_id, "016x") == PARENT_ID
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.attributes["mcp.session.id"] == session
    assert server.attributes["mcp.protocol.version"] == "2025-11-25"
    assert_action_tree(found, server, "mcp")
    assert_action_metrics(metrics, "mcp")


async def test_rest_call_has_a_server_span_and_the_same_action_tree():
    app, spans, metrics = build()
    async with client(app) as http:
        r = await http.post("/api/billing/get_invoice", json={"id": "inv_1"}, headers={"traceparent": TRACEPARENT})
    assert r.status_code == 200
    found = by_name(spans)
    server = found["POST /api/billing/get_invoice"]
    assert server.kind is SpanKind.SERVER
    assert format(server.parent.span_id, "016x") == PARENT_ID
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["http.request.method"] == "POST"
    assert_action_tree(found, server, "rest")
    assert_action_metrics(metrics, "rest")


async def test_stdio_traces_with_the_pipe_transport():
    app, spans, metrics = build()
    lines: list[dict[str, Any]] = []
    bridge = StdioBridge(app, lambda text: lines.append(json.loads(text)), headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"},
        "_meta": {**META_2026, "traceparent": TRACEPARENT}}}))
    await bridge.close()
    assert lines[-1]["result"]["isError"] is False
    found = by_name(spans)
    server = found["tools/call billing"]
    assert server.attributes["network.transport"] == "pipe"
    assert format(server.parent.span_id, "016x") == PARENT_ID
    assert_action_tree(found, server, "stdio")
    assert_action_metrics(metrics, "stdio")


async def test_errors_are_recorded_by_type_and_code():
    app, spans, metrics = build(count_tokens=False)
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": "billing"}
    async with client(app) as http:
        r = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "billing", "arguments": {"action": "get_invoice", "id": "missing"}, "_meta": META_2026}})
        assert r.json()["result"]["isError"] is True
        r = await http.post("/mcp", headers={**headers, "mcp-method": "nope/nope", "mcp-name": ""}, json={
            "jsonrpc": "2.0", "id": 2, "method": "nope/nope", "params": {"_meta": META_2026}})
        assert r.json()["error"]["code"] == -32601
    found = by_name(spans)
    assert found["tools/call billing"].attributes["error.type"] == "tool_error"
    assert found["execute_tool billing.get_invoice"].attributes["error.type"] == "NOT_FOUND"
    handler = found["mcpfusion.handler"]  # the phase the ToolError came from
    assert handler.status.status_code is StatusCode.ERROR and handler.status.description == "ToolError"
    assert "mcpfusion.present" not in found  # nothing to present after a failed handler
    assert found["_OTHER"].attributes["error.type"] == "-32601"  # a made-up method names no span
    points = metric_points(metrics)
    assert [(p.attributes["error.type"], p.value) for p in points["mcpfusion.action.errors"]] == [("NOT_FOUND", 1)]
    assert "mcpfusion.response.tokens" not in points  # counting is opt-in


async def test_a_trace_that_is_not_sampled_keeps_the_metrics_and_records_no_span():
    app, spans, metrics = build()
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": "billing", "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-00"}
    async with client(app) as http:
        r = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"}, "_meta": META_2026}})
        assert r.json()["result"]["isError"] is False
        rest = await http.post("/api/billing/get_invoice", json={"id": "inv_1"}, headers={"traceparent": headers["traceparent"]})
        assert rest.status_code == 200
    assert spans.get_finished_spans() == ()  # the parent-based sampler follows the caller's "not sampled"
    points = metric_points(metrics)
    assert sorted(p.attributes["mcpfusion.transport"] for p in points["mcpfusion.action.calls"]) == ["mcp", "rest"]
    assert sum(p.count for p in points["mcpfusion.action.duration"]) == 2
    assert [p.count for p in points["mcp.server.operation.duration"]] == [1]


class _ForeignTracer:
    """A tracer that is not the SDK's (a vendor wrapper, say): phase spans go through its `start_span`."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer.start_span(*args, **kwargs)


class _ForeignProvider:
    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> _ForeignTracer:
        return _ForeignTracer(self._provider.get_tracer(*args, **kwargs))


async def test_phase_spans_with_a_tracer_that_is_not_the_sdks():
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry = Telemetry(tracer_provider=_ForeignProvider(provider), meter_provider=MeterProvider())
    billing = Tool("billing", description="Invoices")

    @billing.action(readonly=True, returns=invoice_view)
    async def get_invoice(id: str, who: str = Depends(tenant)):
        """Fetch one invoice."""
        return {"id": id, "amount_cents": 1250}

    app = MCPFusion("foreign", tools=[billing], telemetry=telemetry).build_app(telemetry=None)
    async with client(app) as http:
        r = await http.post("/mcp", headers={"accept": "application/json, text/event-stream",
                                             "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                             "mcp-name": "billing", "traceparent": TRACEPARENT}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"}, "_meta": META_2026}})
    assert r.json()["result"]["isError"] is False
    found = by_name(spans)
    assert format(found["tools/call billing"].parent.span_id, "016x") == PARENT_ID
    assert_action_tree(found, found["tools/call billing"], "mcp")
    handler = found["mcpfusion.handler"]
    assert handler.start_time <= handler.end_time and handler.start_time >= found["execute_tool billing.get_invoice"].start_time


async def test_an_untraced_app_has_no_telemetry_objects():
    fusion = MCPFusion("plain", tools=[Tool("t", description="d")])
    fusion.build_app()
    assert fusion.telemetry is None and fusion.registry.telemetry is None and fusion.engine.observer is None


async def test_prometheus_endpoint_exposes_the_action_metrics():
    telemetry = Telemetry(prometheus=True, tracer_provider=TracerProvider())
    echo = Tool("echo", description="Echo")

    @echo.action(readonly=True)
    async def say(text: str) -> str:
        """Say it back."""
        return text

    app = MCPFusion("prom", tools=[echo], telemetry=telemetry).build_app()
    async with client(app) as http:
        assert (await http.post("/api/echo/say", json={"text": "hi"})).status_code == 200
        r = await http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    line = next(x for x in r.text.splitlines()
                if x.startswith("mcpfusion_action_calls_total{") and 'mcpfusion_tool="echo"' in x)
    assert float(line.rsplit(" ", 1)[1]) >= 1


@pytest.mark.parametrize("extra", [{}, {"telemetry": None}])
async def test_healthz_is_liveness_only(extra):
    app = MCPFusion("h", **extra).build_app()
    async with client(app) as http:
        r = await http.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


async def test_reference_service_exports_over_otlp_when_the_endpoint_is_set(tmp_path):
    """OTEL_EXPORTER_OTLP_ENDPOINT switches the service's telemetry on; a local receiver gets the spans."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from app.main import create_app
    from tests.service_kit import mcp, rest, settings_for

    received: dict[str, list[bytes]] = {}

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["content-length"]))
            received.setdefault(self.path, []).append(body)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        app = create_app(settings_for(tmp_path, otlp_endpoint=endpoint))
        async with client(app) as http:
            r = await mcp(http, "billing", "get_invoice", {"id": "inv_0001"}, "demo-admin")
            assert r.status_code == 200 and r.json()["result"]["isError"] is False
            assert (await rest(http, "billing", "get_invoice", {"id": "inv_0001"}, "demo-support")).status_code == 200
        app.state.mcpfusion.telemetry.shutdown()  # flushes, and stops the periodic metric exporter
    finally:
        server.shutdown()
    traces = b"".join(received.get("/v1/traces", []))
    assert b"execute_tool billing.get_invoice" in traces and b"tools/call billing" in traces
    assert b"POST /api/billing/get_invoice" in traces  # FastAPI's own server span of the REST call
    assert b"mcpfusion-billing" in traces  # the service name of the resource
    assert b"mcpfusion.action.calls" in b"".join(received.get("/v1/metrics", []))


async def test_made_up_methods_share_one_metric_series():
    """A client's invented methods never become labels: the series stay bounded whatever it sends."""
    app, spans, metrics = build()
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"}
    async with client(app) as http:
        for i in range(5):
            body = {"jsonrpc": "2.0", "id": i, "method": f"made/up-{i}", "params": {"_meta": META_2026}}
            await http.post("/mcp", json=body, headers={**headers, "mcp-method": f"made/up-{i}"})
    labels = {p.attributes["mcp.method.name"] for p in metric_points(metrics)["mcp.server.operation.duration"]}
    assert labels == {"_OTHER"}
