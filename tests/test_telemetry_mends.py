"""Telemetry mends: client-chosen names and URIs never name a span nor reach an attribute raw; an
`HTTPException` is recorded by its code, not as a crash; a REST GET's query values are scrubbed from its span."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import HTTPException
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpfusion import MCPFusion, Tool
from mcpfusion.authorization import ProtectedResource
from mcpfusion.telemetry import Telemetry, clean, clean_uri

HOSTILE = "x\n\x1b[31mFAKE LOG LINE\x1b[0m\r\nINFO root: admin logged in \u202e" + "A" * 200_000


class Recorded:
    """A `Telemetry` on in-memory providers, and what it recorded."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.telemetry = Telemetry(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[self.reader]))

    def named(self, prefix: str) -> list[Any]:
        return [s for s in self.spans.get_finished_spans() if s.name.startswith(prefix)]

    def requests(self, method: str) -> list[Any]:
        """The SERVER spans of `method` requests."""
        return [s for s in self.spans.get_finished_spans() if s.attributes.get("mcp.method.name") == method]

    def errors(self) -> list[tuple[str, str, str]]:
        """(action, transport, error.type) of every `mcpfusion.action.errors` point."""
        out = []
        for resource in self.reader.get_metrics_data().resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "mcpfusion.action.errors":
                        out += [(p.attributes["mcpfusion.action"], p.attributes["mcpfusion.transport"],
                                 p.attributes["error.type"]) for p in metric.data.data_points]
        return sorted(out)


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any], token: str | None = None,
              request_id: Any = 1) -> Any:
    """One request on a new 2025-11-25 session (the wire that takes any name in the body alone)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               **({"authorization": f"Bearer {token}"} if token else {})}
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    started = await http.post("/mcp", json=hello, headers=headers)
    headers |= {"mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return await http.post("/mcp", json=body, headers=headers)


def assert_clean(value: str) -> None:
    assert len(value) <= 256 and value.isprintable(), value[:80]


def notes_app(recorded: Recorded) -> MCPFusion:
    notes = Tool("notes")

    @notes.action(readonly=True)
    async def count(text: str) -> int:
        """Count the words."""
        return len(text.split())

    fusion = MCPFusion("notes", tools=[notes], telemetry=recorded.telemetry)

    @fusion.prompt(description="Summarise")
    def summary(topic: str) -> str:
        return f"Summarise {topic}."

    @fusion.resource("file:///readme.txt", name="readme", mime_type="text/plain")
    def readme() -> str:
        return "Read me."

    return fusion


async def test_only_registered_tools_and_prompts_name_request_spans():
    recorded = Recorded()
    fusion = notes_app(recorded)
    async with client(fusion.build_app()) as http:
        await rpc(http, "tools/call", {"name": "notes", "arguments": {"action": "count", "text": "a b"}})
        await rpc(http, "prompts/get", {"name": "summary", "arguments": {"topic": "x"}})
        await rpc(http, "tools/call", {"name": HOSTILE, "arguments": {}})
        await rpc(http, "tools/call", {"name": "nonexistent-sk_live_0001", "arguments": {}})
        await rpc(http, "prompts/get", {"name": "p\n" + "C" * 100_000})
        # A tool added while serving names its spans from its first call on.
        late = Tool("late")

        @late.action(readonly=True)
        async def ping() -> str:
            """Answer."""
            return "pong"

        fusion.add_tool(late)
        await rpc(http, "tools/call", {"name": "late", "arguments": {"action": "ping"}})
    names = [s.name for s in recorded.requests("tools/call") + recorded.requests("prompts/get")]
    assert sorted(names) == sorted(["tools/call notes", "prompts/get summary", "tools/call", "tools/call",
                                    "prompts/get", "tools/call late"])
    for span in recorded.requests("tools/call") + recorded.requests("prompts/get"):
        for key in ("gen_ai.tool.name", "gen_ai.prompt.name"):
            if key in span.attributes:
                assert_clean(span.attributes[key])
    unknown = {s.attributes["gen_ai.tool.name"] for s in recorded.requests("tools/call") if s.name == "tools/call"}
    assert unknown == {"nonexistent-sk_live_0001", clean(HOSTILE)}
    assert clean(HOSTILE).startswith("x[31mFAKE LOG LINE[0mINFO root: admin")


async def test_a_made_up_method_and_string_id_are_cleaned():
    recorded = Recorded()
    async with client(notes_app(recorded).build_app()) as http:
        await rpc(http, "made/up\n" + "y" * 5000, {}, request_id="id\u2028\x1b[2J")
    (span,) = [s for s in recorded.spans.get_finished_spans() if s.name != "initialize"]
    assert_clean(span.name)
    assert span.attributes["mcp.method.name"] == span.name == "_OTHER"  # the made-up text is recorded nowhere
    assert span.attributes["jsonrpc.request.id"] == "id[2J"
    assert clean("a\ud800b\tc") == "abc"  # a lone surrogate would fail the exporter's UTF-8


async def test_resource_uri_attribute_has_no_credentials_query_values_or_controls():
    recorded = Recorded()
    async with client(notes_app(recorded).build_app()) as http:
        await rpc(http, "resources/read", {"uri": "https://user:p4ss@w0rd@example.com/a?token=s3cret&x=1#frag"})
        await rpc(http, "resources/read", {"uri": "https://user:p4ssw0rd@example.com/\n" + "B" * 100_000})
        await rpc(http, "resources/read", {"uri": "file:///readme.txt"})
    uris = [s.attributes["mcp.resource.uri"] for s in recorded.requests("resources/read")]
    assert uris[0] == "https://REDACTED:REDACTED@example.com/a?token=REDACTED&x=REDACTED#REDACTED"
    assert uris[1].startswith("https://REDACTED:REDACTED@example.com/BBB") and len(uris[1]) == 256
    assert uris[2] == "file:///readme.txt"
    assert all("p4ss" not in uri and "s3cret" not in uri for uri in uris)
    assert clean_uri("mailto:ana@example.com") == "mailto:ana@example.com"  # no authority: no userinfo


def failing_app(recorded: Recorded) -> Any:
    vault = Tool("vault")

    @vault.action(destructive=True)
    async def missing(value: str) -> str:
        """Raises a 404."""
        raise HTTPException(404, detail="no such record")

    @vault.action(destructive=True)
    async def down(value: str) -> str:
        """Raises a 503."""
        raise HTTPException(503, detail="backend down")

    @vault.action(destructive=True, scopes=["vault:write"])
    async def store(value: str) -> str:
        """Needs a scope."""
        return "stored"

    async def authenticate(request: Any) -> dict[str, str]:
        return {"sub": "reader", "scope": "vault:read"}

    resource = ProtectedResource(authorization_servers=["https://auth.example.test"], authenticate=authenticate)
    return MCPFusion("vault", tools=[vault], telemetry=recorded.telemetry, authorization=resource).build_app()


async def test_http_exceptions_are_recorded_by_code_not_as_a_crash():
    recorded = Recorded()
    async with client(failing_app(recorded)) as http:
        for action in ("missing", "down"):
            await http.post(f"/api/vault/{action}", json={"value": "x"}, headers={"authorization": "Bearer t"})
            await rpc(http, "tools/call", {"name": "vault", "arguments": {"action": action, "value": "x"}}, "t")
        refused = await http.post("/api/vault/store", json={"value": "x"}, headers={"authorization": "Bearer t"})
    assert refused.status_code == 403
    expected = [("down", "mcp", "INTERNAL_ERROR"), ("down", "rest", "INTERNAL_ERROR"),
                ("missing", "mcp", "NOT_FOUND"), ("missing", "rest", "NOT_FOUND"), ("store", "rest", "FORBIDDEN")]
    assert recorded.errors() == expected
    spans = sorted((s.attributes["mcpfusion.action"], s.attributes["mcpfusion.transport"], s.attributes["error.type"])
                   for s in recorded.named("execute_tool"))
    assert spans == expected


async def test_a_cancelled_call_is_not_a_crash():
    recorded = Recorded()
    slow = Tool("slow")
    started = asyncio.Event()

    @slow.action(readonly=True)
    async def wait() -> str:
        """Waits."""
        started.set()
        await asyncio.sleep(10)
        return "done"

    app = MCPFusion("slow", tools=[slow], telemetry=recorded.telemetry).build_app()
    async with client(app) as http:
        call = asyncio.ensure_future(http.post("/api/slow/wait", json={}))
        await asyncio.wait_for(started.wait(), 5)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
    assert recorded.errors() == [("wait", "rest", "cancelled")]


async def test_rest_get_query_values_are_redacted_in_the_server_span():
    recorded = Recorded()
    customers = Tool("customers")

    @customers.action(readonly=True)
    async def search(q: str, limit: int = 10) -> list[str]:
        """Search customers."""
        return [q]

    app = MCPFusion("crm", tools=[customers], telemetry=recorded.telemetry).build_app()
    async with client(app) as http:
        r = await http.get("/api/customers/search", params={"q": "ana.lima@northwind.example", "limit": 3})
    assert r.status_code == 200 and r.json() == ["ana.lima@northwind.example"]  # the call itself got the value
    (server,) = [s for s in recorded.spans.get_finished_spans() if s.attributes.get("url.path")]
    assert server.attributes["url.query"] == "q=REDACTED&limit=REDACTED"
    assert "northwind" not in str(dict(server.attributes))
