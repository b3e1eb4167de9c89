"""mcpfusion's own span path (mcpfusion/tracing.py) against the OpenTelemetry SDK's: the same spans, the
user's spans nested under the action span, a sampler that drops, a processor that wants `on_start`, a tracer
that is not the SDK's, and the tracing/metrics switches. A change of the SDK internals the path relies on
fails here."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from mcpfusion import MCPFusion, Presenter, Tool
from mcpfusion.telemetry import Telemetry
from mcpfusion.tracing import DroppedSpan, LightSpan, Tracing

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
           "mcp-method": "tools/call", "mcp-name": "billing"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class Invoice(BaseModel):
    id: str
    amount_cents: int


class Starts(SpanProcessor):
    """A processor that acts when spans start: the SDK's own `start_span` must run for it."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.name)


def app_with(provider: Any, *, metrics: Any = None, user_provider: Any = None, **telemetry: Any) -> Any:
    """An app whose handler makes a span of its own (on `user_provider`, default `provider`) and annotates
    the current (action) span."""
    billing = Tool("billing", description="Invoices")
    user_tracer = trace.get_tracer("user-code", tracer_provider=user_provider or provider)

    @billing.action(readonly=True, returns=Presenter("invoice").schema(Invoice))
    async def get_invoice(id: str):
        """Fetch one invoice."""
        current = trace.get_current_span()
        current.set_attribute("invoice.id", id)
        current.add_event("looked up", {"cache": "miss"})
        with user_tracer.start_as_current_span("db.query") as query:
            query.set_attribute("db.system", "sqlite")
        return {"id": id, "amount_cents": 1250}

    meter_provider = MeterProvider(metric_readers=[metrics]) if metrics is not None else MeterProvider()
    return MCPFusion("traced", tools=[billing], telemetry=Telemetry(
        tracer_provider=provider, meter_provider=meter_provider, **telemetry)).build_app()


async def call(app: Any, traceparent: str | None = None) -> None:
    headers = dict(HEADERS)
    if traceparent is not None:
        headers["traceparent"] = traceparent
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        r = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"}, "_meta": META}})
    assert r.json()["result"]["isError"] is False


def traced(*processors: Any, sampler: Any = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    for processor in processors:
        provider.add_span_processor(processor)
    return provider, spans


def shape(spans: InMemorySpanExporter) -> list[tuple[Any, ...]]:
    """Everything of the finished spans but their ids and times: name, kind, parent's name, attributes,
    status, events, scope, resource, sampled flag, and that each span lies within its parent."""
    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    out = []
    for span in finished:
        parent = by_id.get(span.parent.span_id) if span.parent is not None else None
        if parent is not None:
            assert parent.start_time <= span.start_time <= span.end_time <= parent.end_time, span.name
            assert span.context.trace_id == parent.context.trace_id
        out.append((span.name, span.kind, parent.name if parent is not None else None,
                    format(span.context.trace_id, "032x"), dict(span.attributes), span.status.status_code,
                    [(e.name, dict(e.attributes or {})) for e in span.events], span.instrumentation_scope,
                    span.resource, span.context.trace_flags, span.dropped_attributes, isinstance(span, ReadableSpan)))
    return sorted(out, key=lambda row: row[0])


async def test_light_spans_are_the_sdks_spans():
    """The same request on the light path and on the SDK's own `start_span` (forced by a processor that
    wants `on_start`) exports the same spans, the user's span nested under the action span."""
    light_provider, light = traced()
    starts = Starts()
    sdk_provider, sdk = traced(starts)
    parent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    light_app, sdk_app = app_with(light_provider), app_with(sdk_provider)
    await call(light_app, parent)
    await call(sdk_app, parent)
    assert light_app.state.mcpfusion.telemetry._tracing.light() is True
    assert sdk_app.state.mcpfusion.telemetry._tracing.light() is False
    assert shape(light) == shape(sdk)
    found = {span.name: span for span in light.get_finished_spans()}
    server, action = found["tools/call billing"], found["execute_tool billing.get_invoice"]
    assert format(server.parent.span_id, "016x") == PARENT_ID and server.parent.is_remote
    assert action.parent.span_id == server.context.span_id
    assert found["db.query"].parent.span_id == action.context.span_id  # the user's span, under the action
    assert found["mcpfusion.handler"].parent.span_id == action.context.span_id
    assert action.attributes["invoice.id"] == "inv_1"  # set by the handler on get_current_span()
    assert [e.name for e in action.events] == ["looked up"]
    # The processor that wants on_start saw every span start, through the SDK's start_span.
    assert {"tools/call billing", "execute_tool billing.get_invoice", "db.query"} <= set(starts.started)


async def test_a_root_request_gets_a_new_trace_and_the_same_tree():
    provider, spans = traced()
    await call(app_with(provider))
    found = {span.name: span for span in spans.get_finished_spans()}
    server = found["tools/call billing"]
    assert server.parent is None and server.kind is SpanKind.SERVER and server.context.trace_flags.sampled
    assert len({span.context.trace_id for span in found.values()}) == 1
    assert found["db.query"].parent.span_id == found["execute_tool billing.get_invoice"].context.span_id


@pytest.mark.parametrize("sampler", [ALWAYS_OFF, ParentBased(TraceIdRatioBased(0.0))])
async def test_a_sampler_that_drops_makes_no_span_and_keeps_the_metrics(sampler):
    provider, spans = traced(sampler=sampler)
    metrics = InMemoryMetricReader()
    app = app_with(provider, metrics=metrics)
    seen: list[Any] = []
    telemetry = app.state.mcpfusion.telemetry
    action = telemetry.action
    telemetry.action = lambda *args: seen.append(trace.get_current_span()) or action(*args)
    await call(app)
    assert spans.get_finished_spans() == ()  # the user's span under the dropped request is dropped too
    assert type(seen[0]) is DroppedSpan and not seen[0].get_span_context().trace_flags.sampled
    assert seen[0].get_span_context().is_valid  # a trace id to propagate, marked not sampled
    names = {m.name for rm in metrics.get_metrics_data().resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert {"mcpfusion.action.calls", "mcpfusion.action.duration", "mcp.server.operation.duration"} <= names


async def test_a_caller_that_does_not_sample_is_followed():
    provider, spans = traced(sampler=ParentBased(TraceIdRatioBased(1.0)))
    await call(app_with(provider), f"00-{TRACE_ID}-{PARENT_ID}-00")
    assert spans.get_finished_spans() == ()


class _ForeignTracer:
    """A tracer that is not the SDK's (a vendor wrapper, say): every span goes through its `start_span`."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer
        self.started: list[str] = []

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.started.append(name)
        return self._tracer.start_span(name, *args, **kwargs)


class _ForeignProvider:
    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider
        self.tracers: list[_ForeignTracer] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> _ForeignTracer:
        self.tracers.append(_ForeignTracer(self._provider.get_tracer(*args, **kwargs)))
        return self.tracers[-1]


async def test_a_tracer_that_is_not_the_sdks_makes_every_span():
    provider, spans = traced()
    foreign = _ForeignProvider(provider)
    await call(app_with(foreign, user_provider=provider))
    mcpfusion_tracer = foreign.tracers[0]
    assert mcpfusion_tracer.started == ["tools/call billing", "execute_tool billing.get_invoice",
                                        "mcpfusion.handler", "mcpfusion.present"]
    found = {span.name: span for span in spans.get_finished_spans()}
    assert all(type(span) is ReadableSpan for span in found.values())
    assert found["db.query"].parent.span_id == found["execute_tool billing.get_invoice"].context.span_id


async def test_tracing_and_metrics_switch_separately():
    provider, spans = traced()
    metrics = InMemoryMetricReader()
    await call(app_with(provider, metrics=metrics, tracing=False))
    assert [span.name for span in spans.get_finished_spans()] == ["db.query"]  # the handler's own span only
    assert metrics.get_metrics_data().resource_metrics  # the metrics alone

    untraced = Telemetry(tracer_provider=provider, meter_provider=MeterProvider(), tracing=False)
    assert untraced.tracer is None and untraced.fastapi_config()["tracing"] is False
    unmetered = Telemetry(tracer_provider=provider, meter_provider=MeterProvider(), metrics=False)
    assert unmetered.duration is None and unmetered.fastapi_config()["metrics"] is False
    with pytest.raises(ValueError, match="metrics=True"):
        Telemetry(prometheus=True, metrics=False)


async def test_tracing_alone_records_no_metric():
    provider, spans = traced()
    metrics = InMemoryMetricReader()
    billing = Tool("billing", description="Invoices")

    @billing.action(readonly=True)
    async def get_invoice(id: str) -> str:
        """Fetch one invoice."""
        return id

    app = MCPFusion("t", tools=[billing], telemetry=Telemetry(
        tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[metrics]), metrics=False)).build_app()
    await call(app)
    assert {span.name for span in spans.get_finished_spans()} >= {"tools/call billing",
                                                                "execute_tool billing.get_invoice"}
    assert metrics.get_metrics_data() is None or not metrics.get_metrics_data().resource_metrics


async def test_histograms_keep_no_exemplar_of_mcpfusions_spans():
    """Recorded outside the spans: the SDK's default trace-based exemplar filter keeps nothing (and the
    record costs a third less)."""
    provider, _ = traced()
    metrics = InMemoryMetricReader()
    await call(app_with(provider, metrics=metrics))
    points = [p for rm in metrics.get_metrics_data().resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name.endswith("duration") for p in m.data.data_points]
    assert points and all(not p.exemplars for p in points)


def test_light_span_has_the_sdk_spans_fields():
    """`LightSpan` sets the SDK `Span`'s fields itself, and its snapshot is the SDK's: a new field of the SDK
    fails here instead of breaking its methods on a light span."""
    provider, _ = traced()
    tracer = provider.get_tracer("t")
    sdk_span = tracer.start_span("s", attributes={"a": "b"})
    tracing = Tracing(tracer)
    assert tracing.light()
    light = tracing.start("s", {"a": "b"})
    assert isinstance(light, LightSpan)
    # Its own fields in slots, the tracer's on its class: every SDK field, nothing else.
    fields = set(LightSpan.__slots__) | {name for kind in type(light).__mro__[:2] for name in vars(kind)
                                         if name.startswith("_") and not name.startswith("__")
                                         and not callable(vars(kind)[name])}
    assert fields - {"_abc_impl"} == set(vars(sdk_span))
    assert all(hasattr(light, name) for name in vars(sdk_span))
    sdk_span.end()
    light.end()
    assert set(vars(light._readable_span())) == set(vars(sdk_span._readable_span()))
    light.set_attribute("late", 1)  # ignored after end, as by the SDK
    assert "late" not in light.attributes


def test_light_span_takes_the_users_attributes_under_the_sdks_limits():
    """What a user's code sets on a light span is cleaned and bounded as the SDK's own span does it."""
    from opentelemetry.sdk.trace import SpanLimits

    spans = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=4, max_span_attributes=70))
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("t")
    tracing = Tracing(tracer)
    for span in (tracing.start("light", {"gen_ai.tool.name": "billing"}),
                 tracer.start_span("sdk", attributes={"gen_ai.tool.name": "billing"})):
        span.set_attributes({f"k{i}": i for i in range(80)})  # past the count limit
        span.set_attribute("note", "truncated")
        span.set_attribute("bad", object())  # dropped by the SDK's validation
        span.add_event("e", {"x": "long value"})
        span.set_status(trace.Status(StatusCode.ERROR, "why"))
        span.end()
    light, sdk = spans.get_finished_spans()
    assert isinstance(tracing.start("x", {}), LightSpan)
    assert dict(light.attributes) == dict(sdk.attributes) and light.attributes["note"] == "trun"
    assert light.dropped_attributes == sdk.dropped_attributes > 0
    assert [(e.name, dict(e.attributes)) for e in light.events] == [(e.name, dict(e.attributes)) for e in sdk.events]
    assert light.status.description == sdk.status.description == "why"


def test_light_span_takes_links_and_ignores_events_after_end_as_the_sdk_does(caplog):
    """Links and events land on a light span exactly as on the SDK's; after `end()` both are refused with
    the SDK's warning."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("t")
    tracing = Tracing(tracer)
    other = tracer.start_span("other").get_span_context()
    for span in (tracing.start("light", {}), tracer.start_span("sdk")):
        span.add_link(other, {"why": "follows"})
        span.end()
        span.add_event("late")
        span.add_link(other)
    light, sdk = spans.get_finished_spans()
    assert [(li.context.span_id, dict(li.attributes)) for li in light.links] == \
        [(li.context.span_id, dict(li.attributes)) for li in sdk.links] == [(other.span_id, {"why": "follows"})]
    assert light.events == sdk.events == ()
    refused = [r.getMessage() for r in caplog.records if "ended span" in r.getMessage()]
    assert refused.count("Tried calling _add_event on an ended span.") == 2
    assert refused.count("Tried calling _add_link on an ended span.") == 2

def test_sdk_processors_do_nothing_on_start():
    """The light path skips `on_start` and `_on_ending` for the SDK's batch and simple processors: their
    bodies must stay empty."""
    for kind in (BatchSpanProcessor, SimpleSpanProcessor):
        for method in (kind.on_start, kind._on_ending):
            (node,) = ast.parse(textwrap.dedent(inspect.getsource(method))).body
            assert isinstance(node, ast.FunctionDef)
            body = [stmt for stmt in node.body if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))]
            assert all(isinstance(stmt, ast.Pass) for stmt in body), f"{kind.__name__}.{method.__name__}"


def test_a_processor_added_later_switches_the_path():
    provider, _ = traced()
    tracing = Tracing(provider.get_tracer("t"))
    assert tracing.light()
    provider.add_span_processor(Starts())
    assert not tracing.light()
    assert not isinstance(tracing.start("s", {}), LightSpan)


def test_an_sdk_whose_internals_moved_gets_its_own_start_span(caplog):
    """Should a future SDK (inside the pinned range) rename what the light path reads, spans go through
    `start_span` with a warning instead of breaking."""
    provider, spans = traced()
    tracer = provider.get_tracer("t")
    tracing = Tracing(tracer)
    del tracer._span_limits
    assert tracing.light() is False
    assert "internals changed" in caplog.text
    tracer._span_limits = provider._span_limits
    span = tracing.start("s", {"a": "b"})
    assert not isinstance(span, LightSpan)
    span.end()
    assert [s.name for s in spans.get_finished_spans()] == ["s"]


async def test_rest_and_stdio_calls_nest_the_users_span_under_the_action():
    from mcpfusion.mcp.stdio import StdioBridge

    provider, spans = traced()
    app = app_with(provider)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        r = await http.post("/api/billing/get_invoice", json={"id": "inv_1"})
    assert r.status_code == 200
    lines: list[str] = []
    bridge = StdioBridge(app, lines.append, headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "billing", "arguments": {"action": "get_invoice", "id": "inv_1"}, "_meta": META}}))
    await bridge.close()
    assert '"isError":false' in lines[-1].replace(" ", "")
    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    actions = [span for span in finished if span.name == "execute_tool billing.get_invoice"]
    assert sorted(by_id[a.parent.span_id].name for a in actions) == ["POST /api/billing/get_invoice",
                                                                     "tools/call billing"]
    queries = [span for span in finished if span.name == "db.query"]
    assert len(queries) == 2 and all(by_id[q.parent.span_id].name == "execute_tool billing.get_invoice"
                                     for q in queries)
    # The processors got a ReadableSpan that nothing changes any more (a light span hands itself once ended).
    assert all(isinstance(a, ReadableSpan) for a in actions)
    for action in actions:
        before = dict(action.attributes)
        if isinstance(action, LightSpan):
            action.set_attribute("late", "x")
            action.put("later", "y")
        assert dict(action.attributes) == before


async def test_a_handler_that_ends_the_action_span_itself():
    """As with the SDK's spans: it ends there (exported once, unchanged after), and the call still answers."""
    provider, spans = traced()
    billing = Tool("billing", description="Invoices")

    @billing.action(readonly=True)
    async def get_invoice(id: str) -> str:
        """Fetch one invoice."""
        trace.get_current_span().end()
        raise ValueError("after the end")

    app = MCPFusion("t", tools=[billing], telemetry=Telemetry(tracer_provider=provider,
                                                              meter_provider=MeterProvider())).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        r = await http.post("/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                            "params": {"name": "billing", "arguments": {
                                                                "action": "get_invoice", "id": "x"}, "_meta": META}})
    assert r.json()["result"]["isError"] is True
    actions = [s for s in spans.get_finished_spans() if s.name == "execute_tool billing.get_invoice"]
    assert len(actions) == 1 and "error.type" not in actions[0].attributes


@pytest.mark.parametrize("sampler", [
    ALWAYS_ON, ALWAYS_OFF, ParentBased(ALWAYS_ON), ParentBased(ALWAYS_OFF),
    ParentBased(ALWAYS_OFF, remote_parent_not_sampled=ALWAYS_ON, local_parent_sampled=ALWAYS_OFF),
    ParentBased(TraceIdRatioBased(0.5)),  # not fixed: asked every time
])
def test_a_fixed_sampler_decides_as_it_would_itself(sampler):
    """For the SDK's static samplers (and a parent-based one made of them) the light path answers without
    asking: the same decision and trace state as the sampler's own `should_sample`, for every kind of parent."""
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

    provider, _ = traced(sampler=sampler)
    tracing = Tracing(provider.get_tracer("t"))
    assert tracing.light()
    state = TraceState([("vendor", "x")])
    parents = [None] + [trace.set_span_in_context(NonRecordingSpan(SpanContext(
        int(TRACE_ID, 16), int(PARENT_ID, 16), remote, TraceFlags(flags), state)))
        for remote in (True, False) for flags in (0, 1)]
    for parent in parents:
        for _ in range(20):  # (a ratio sampler's answer depends on the trace id: many roots)
            span = tracing.start("s", {"a": "b"}, parent)
            context = span.get_span_context()
            expected = sampler.should_sample(parent, context.trace_id, "s", SpanKind.INTERNAL, {"a": "b"})
            assert span.is_recording() == expected.decision.is_recording()
            assert context.trace_flags.sampled == expected.decision.is_sampled()
            assert context.trace_state == (expected.trace_state or TraceState())
            assert isinstance(span, LightSpan) == expected.decision.is_recording()
            if span.is_recording():
                assert dict(span.attributes) == {"a": "b"}
                span.end()


def test_an_actions_spans_enter_the_batch_queue_as_the_sdks_on_end_puts_them():
    """`Sinks` puts a sampled action's spans into a `BatchSpanProcessor`'s queue at once, in the order its
    own `on_end` would, one by one; near a full queue or after shutdown it leaves each span to the
    processor's own `emit` (its warnings and drop counts)."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from mcpfusion.tracing import Sinks

    class Keep(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    def batch() -> BatchSpanProcessor:
        return BatchSpanProcessor(Keep(), max_queue_size=16, max_export_batch_size=16, schedule_delay_millis=60_000)

    ours, theirs = batch(), batch()
    emitted: list[str] = []
    own_emit = ours._batch_processor.emit
    ours._batch_processor.emit = lambda span: emitted.append(span.name) or own_emit(span)
    provider, _ = traced()
    tracing = Tracing(provider.get_tracer("t"))
    assert tracing.light()
    spans = [tracing.start(f"s{i}", {}) for i in range(5)]
    for span in spans:
        span._finish()
    sinks = Sinks([ours])
    sinks.take(spans[:3])
    for span in spans[:3]:
        theirs.on_end(span)
    assert list(ours._batch_processor._queue) == list(theirs._batch_processor._queue)
    assert [s.name for s in ours._batch_processor._queue] == ["s2", "s1", "s0"]  # oldest at the back
    assert emitted == []  # the common case: no call per span
    ours._batch_processor._queue.extendleft(spans[:1] * 11)  # 14 of 16: three more would not fit
    sinks.take(spans[2:5])
    assert emitted == ["s2", "s3", "s4"]  # the processor's own emit, span by span
    ours.shutdown()
    theirs.shutdown()
    emitted.clear()
    sinks.take(spans[:2])
    assert emitted == ["s0", "s1"]  # refused by the processor itself, as after its shutdown


async def test_mcp_requests_skip_fastapis_own_telemetry_and_rest_calls_keep_it():
    """`build_app()`'s app marks MCP requests before FastAPI's telemetry looks (no stack walk, no context
    switch per request); a REST call still gets FastAPI's server span."""
    provider, spans = traced()
    app = app_with(provider)
    seen: list[str] = []
    native = app._native_telemetry
    original = type(native).__call__

    async def observing(self: Any, **kwargs: Any) -> None:
        seen.append(kwargs["scope"]["path"])
        await original(self, **kwargs)

    type(native).__call__ = observing
    try:
        await call(app)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            assert (await http.post("/api/billing/get_invoice", json={"id": "inv_1"})).status_code == 200
    finally:
        type(native).__call__ = original
    assert seen == ["/api/billing/get_invoice"]
    names = {span.name for span in spans.get_finished_spans()}
    assert {"tools/call billing", "POST /api/billing/get_invoice"} <= names and "POST /mcp" not in names


async def test_an_action_span_shares_its_attributes_until_it_sets_its_own():
    """The action span starts on the action's read-only attributes: the error a failed call records and what the
    handler sets land on that call's span alone, never on the next call's."""
    provider, spans = traced()
    billing = Tool("billing", description="Invoices")

    @billing.action(readonly=True)
    async def get_invoice(id: str) -> str:
        """Fetch one invoice."""
        if id == "bad":
            raise ValueError("no such invoice")
        trace.get_current_span().set_attribute("invoice.id", id)
        return id

    app = MCPFusion("t", tools=[billing], telemetry=Telemetry(tracer_provider=provider,
                                                              meter_provider=MeterProvider())).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        for request_id, invoice in enumerate(("bad", "inv_1", "inv_2")):
            r = await http.post("/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                                                "params": {"name": "billing", "arguments": {
                                                                    "action": "get_invoice", "id": invoice},
                                                                    "_meta": META}})
            assert r.json()["result"]["isError"] is (invoice == "bad")
    actions = [dict(s.attributes) for s in spans.get_finished_spans() if s.name == "execute_tool billing.get_invoice"]
    common = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "billing.get_invoice",
              "mcpfusion.tool": "billing", "mcpfusion.action": "get_invoice", "mcpfusion.transport": "mcp"}
    assert actions[0] == {**common, "error.type": actions[0]["error.type"]}
    assert actions[1:] == [{**common, "invoice.id": "inv_1"}, {**common, "invoice.id": "inv_2"}]


def test_a_tracer_its_configurator_disables_makes_no_light_span():
    """The tracer's own enabled flag is read on every request: disabled, spans go through its `start_span`
    (which makes none); enabled again, the light path is back."""
    from opentelemetry.sdk.trace import _TracerConfig

    provider, _ = traced()
    tracer = provider.get_tracer("t")
    tracing = Tracing(tracer)
    assert tracing.light()
    tracer._set_tracer_config(_TracerConfig(is_enabled=False))
    assert not tracing.light()
    assert not tracing.start("s", {}).is_recording()
    tracer._set_tracer_config(_TracerConfig(is_enabled=True))
    assert isinstance(tracing.start("s", {}), LightSpan)
