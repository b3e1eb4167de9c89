"""OpenTelemetry traces and metrics (the optional extra `mcpfusion[telemetry]`).

Nothing here runs unless a server is given a `Telemetry` (`MCPFusion(..., telemetry=Telemetry())`): the
engine and the core call path only check for `None`, so an app without it pays nothing.

Spans, after the OpenTelemetry conventions for MCP and GenAI tool execution:

- `{mcp.method.name} {target}` (SERVER): one per MCP request, on both wires and stdio; its parent is the
  W3C trace context of the request's `_meta` (`traceparent`), else of the HTTP headers.
- `{METHOD} /api/{tool}/{action}` (SERVER): one per REST call, made by FastAPI's own telemetry
  (`build_app()` configures it with the same providers; see `fastapi_config()` for `mount()`).
- `execute_tool {tool}.{action}` (INTERNAL): one per action call, a child of either server span (current
  while the action runs), with children `mcpfusion.dependencies` (when the action has dependencies),
  `mcpfusion.handler` and `mcpfusion.present`. The phases are only timed while the call runs; their spans
  are made when the action ends (handed finished to the SDK's span processors: they share the action
  span's sampling decision). Under a parent that is not sampled, no action span is made at all.

The W3C context is only extracted when the request carries a field of the global propagator, and each
action's attribute dicts are built once: what a call pays is OpenTelemetry's own price of its spans and
histogram records (BENCHMARKS.md, Observability).

Metrics: `mcp.server.operation.duration` (histogram, by method and error type); per action (attributes
`mcpfusion.tool`, `mcpfusion.action`, `mcpfusion.transport`) `mcpfusion.action.duration` (histogram),
`mcpfusion.action.calls`, `mcpfusion.action.errors` (by `error.type`, the tool error code),
`mcpfusion.presenter.render.time` (seconds spent presenting; over the calls, the mean),
`mcpfusion.response.size` (bytes of text sent) and, with `count_tokens=True`, `mcpfusion.response.tokens`
(o200k). The counters are kept in plain per-process dicts and read by OpenTelemetry when it collects
(observable counters), so a tools/call pays for two histogram records (the SDK's record costs about as much
as an unsampled span).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from .dependencies import CONTEXT_SCOPE_KEY
from .mcp.jsonrpc import McpError
from .mcp.wire import TRANSPORT_SCOPE_KEY

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.requests import Request

    from .mcp.engine import Call
    from .response import ToolResponse
    from .tool import Action

_TARGETS = {"tools/call": "name", "prompts/get": "name"}
_META_TRACE_KEYS = ("traceparent", "tracestate")
_SKIP = nullcontext()
ActionKey = tuple[str, str, str]  # tool, action, transport


class Telemetry:
    """Traces and metrics of one server.

    `tracer_provider` / `meter_provider` default to OpenTelemetry's global ones (what `opentelemetry-instrument`
    or your own set-up configured). `count_tokens` counts the o200k tokens of every answer (exact, and about
    as costly as encoding the answer again; off by default). `prometheus` serves `/metrics`: with no
    `meter_provider` one is made with a Prometheus reader; with your own, add a `PrometheusMetricReader` to it.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        count_tokens: bool = False,
        prometheus: bool = False,
    ) -> None:
        try:
            from opentelemetry import context, metrics, propagate, trace
        except ImportError as exc:  # pragma: no cover - the extra is installed in the test environment
            raise ImportError("Telemetry needs OpenTelemetry: pip install 'mcpfusion[telemetry]'") from exc
        from .version import __version__

        self._extract = propagate.extract
        self._textmap = propagate.get_global_textmap
        self._propagator: Any = None
        self._fields: tuple[str, ...] = ()
        self._attach = context.attach
        self._detach = context.detach
        self._in_context = trace.set_span_in_context
        self._current_span = trace.get_current_span
        self._server = trace.SpanKind.SERVER
        self._error = trace.Status(trace.StatusCode.ERROR)
        self._method_metric: dict[str, dict[str, str]] = {}
        self._labels: dict[tuple[Action, str], _Labels] = {}
        self.prometheus = prometheus
        if prometheus and meter_provider is None:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from opentelemetry.sdk.metrics import MeterProvider

            meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
        self.tracer_provider = tracer_provider or trace.get_tracer_provider()
        self.meter_provider = meter_provider or metrics.get_meter_provider()
        self.tracer = self.tracer_provider.get_tracer("mcpfusion", __version__)
        self._emit_phase = _phase_emitter(self.tracer, __version__)
        meter = self.meter_provider.get_meter("mcpfusion", __version__)
        self.operation_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", description="MCP request duration on the server")
        self.duration = meter.create_histogram(
            "mcpfusion.action.duration", unit="s", description="Action call duration, presenter included")
        self.calls: defaultdict[ActionKey, int] = defaultdict(int)
        self.errors: defaultdict[tuple[ActionKey, str], int] = defaultdict(int)
        self.bytes_out: defaultdict[ActionKey, int] = defaultdict(int)
        self.tokens_out: defaultdict[ActionKey, int] = defaultdict(int)
        self.render_time: defaultdict[ActionKey, float] = defaultdict(float)
        metric = metrics.Observation
        meter.create_observable_counter(
            "mcpfusion.action.calls", [_observe(self.calls, metric)], unit="{call}", description="Action calls")
        meter.create_observable_counter(
            "mcpfusion.action.errors", [_observe_errors(self.errors, metric)], unit="{error}",
            description="Action calls answered with a tool error, by code")
        meter.create_observable_counter(
            "mcpfusion.presenter.render.time", [_observe(self.render_time, metric)], unit="s",
            description="Time spent presenting results (divide by the calls for the mean)")
        meter.create_observable_counter(
            "mcpfusion.response.size", [_observe(self.bytes_out, metric)], unit="By",
            description="Bytes of text content sent to the agent")
        self._count: Callable[[str], int] | None = None
        if count_tokens:
            from .tokens import count

            self._count = count
            meter.create_observable_counter(
                "mcpfusion.response.tokens", [_observe(self.tokens_out, metric)], unit="{token}",
                description="o200k tokens of text content sent to the agent")

    def fastapi_config(self, mcp_path: str = "/mcp") -> dict[str, Any]:
        """`FastAPI(telemetry=...)` for REST server spans on these providers (`build_app()` uses it). Requests
        to `mcp_path` are left to the MCP spans, which read the same W3C headers; the action spans stand for
        FastAPI's per-operation spans."""

        def is_mcp(scope: Any) -> bool:
            return bool(scope.get("path") == mcp_path)

        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider,
                "operation_spans": False, "exclude": is_mcp}

    def install(self, app: FastAPI) -> None:
        """Serve `/metrics` when `prometheus=True`."""
        if self.prometheus:
            app.add_api_route("/metrics", _metrics, methods=["GET"], tags=["health"], summary="Prometheus metrics")

    def flush(self) -> None:
        """Export what the providers hold (before reading an exporter in a test, for example)."""
        for provider in (self.tracer_provider, self.meter_provider):
            force_flush = getattr(provider, "force_flush", None)  # the API's no-op providers have none
            if force_flush is not None:
                force_flush()

    def shutdown(self) -> None:
        """Flush and stop the providers (at application shutdown)."""
        for provider in (self.tracer_provider, self.meter_provider):
            stop = getattr(provider, "shutdown", None)
            if stop is not None:
                stop()

    def _emit_phases(self, parent: Any, phases: list[tuple[str, int, int, str | None]]) -> None:
        """The child spans of a recorded action's phases, from their timings."""
        emit = self._emit_phase
        for name, start, end, error in phases:
            emit(parent, f"mcpfusion.{name}", start, end, error)

    # -- MCP requests (the engine's observer) -----------------------------------------------------------

    def _parent(self, call: Call) -> Any:
        """The W3C trace context of a request: its `_meta` if it carries a `traceparent`, else its HTTP headers
        when they carry a field of the global propagator, else None (the current context)."""
        meta = call.params.get("_meta")
        if isinstance(meta, dict) and "traceparent" in meta:
            return self._extract({k: meta[k] for k in _META_TRACE_KEYS if isinstance(meta.get(k), str)})
        textmap = self._textmap()
        if textmap is not self._propagator:  # the global propagator changed (or first call): its header names
            self._propagator, self._fields = textmap, tuple(textmap.fields)
        headers = call.request.headers
        for field in self._fields:
            if field in headers:
                return self._extract(headers)
        return None

    async def observe_request(self, call: Call, run: Callable[[Call], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run one MCP request inside its SERVER span and record `mcp.server.operation.duration`."""
        method = call.method
        params = call.params
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            "mcp.protocol.version": call.protocol_version,
            "network.transport": "pipe" if call.request.scope.get(TRANSPORT_SCOPE_KEY) == "stdio" else "tcp",
        }
        if call.id is not None:
            attributes["jsonrpc.request.id"] = str(call.id)
        if call.session is not None:
            attributes["mcp.session.id"] = call.session.id
        name = method
        target_key = _TARGETS.get(method)
        target = params.get(target_key) if target_key else None
        if isinstance(target, str):
            name = f"{method} {target}"
            if method == "tools/call":
                attributes["gen_ai.tool.name"] = target
                attributes["gen_ai.operation.name"] = "execute_tool"
            else:
                attributes["gen_ai.prompt.name"] = target
        elif method == "resources/read" and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = params["uri"]
        parent = self._parent(call)
        start = time.perf_counter()
        span = self.tracer.start_span(name, context=parent, kind=self._server, attributes=attributes,
                                      record_exception=False, set_status_on_exception=False)
        token = self._attach(self._in_context(span, parent))
        error_type: str | None = None
        try:
            result = await run(call)
        except McpError as exc:
            error_type = str(exc.code)
            span.set_attribute("rpc.response.status_code", error_type)
            raise
        except BaseException as exc:
            error_type = type(exc).__qualname__
            raise
        else:
            if result.get("isError") is True:
                error_type = "tool_error"
            return result
        finally:
            self._detach(token)
            if error_type is None:
                metric = self._method_metric.get(method)
                if metric is None:
                    metric = self._method_metric.setdefault(method, {"mcp.method.name": method})
            else:
                metric = {"mcp.method.name": method, "error.type": error_type}
                span.set_attribute("error.type", error_type)
                span.set_status(self._error)
            self.operation_duration.record(time.perf_counter() - start, metric)
            span.end()

    # -- actions (the core call path) -------------------------------------------------------------------

    def action(self, action: Action, request: Request) -> ActionTrace:
        scope = request.scope
        transport = scope.get(TRANSPORT_SCOPE_KEY) or ("mcp" if scope.get(CONTEXT_SCOPE_KEY) else "rest")
        labels = self._labels.get((action, transport))
        if labels is None:
            labels = self._labels.setdefault((action, transport), _Labels(action.tool.name, action.name, transport))
        return ActionTrace(self, labels)


class _Labels:
    """What every call of one action on one transport shares: its key, span name and attribute dicts
    (built once; OpenTelemetry copies what it keeps)."""

    __slots__ = ("key", "span_name", "span_attributes", "metric_attributes")

    def __init__(self, tool: str, action: str, transport: str) -> None:
        self.key: ActionKey = (tool, action, transport)
        label = f"{tool}.{action}"
        self.span_name = f"execute_tool {label}"
        self.metric_attributes = {"mcpfusion.tool": tool, "mcpfusion.action": action, "mcpfusion.transport": transport}
        self.span_attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": label,
                                **self.metric_attributes}


class _Phase:
    """Times one step of an action (epoch nanoseconds, as spans want them); the span, if any, is made
    when the action ends."""

    __slots__ = ("_phases", "_name", "_start")

    def __init__(self, phases: list[tuple[str, int, int, str | None]], name: str) -> None:
        self._phases = phases
        self._name = name

    def __enter__(self) -> None:
        self._start = time.time_ns()

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self._phases.append((self._name, self._start, time.time_ns(),
                             None if exc_type is None else exc_type.__qualname__))


class ActionTrace:
    """One action call: its `execute_tool` span (current while the action runs), the timings of the phases
    inside it (their child spans are emitted when it ends, if it is recorded), and its metrics."""

    __slots__ = ("_telemetry", "_labels", "_span", "_token", "_start", "_phases", "_recording")

    def __init__(self, telemetry: Telemetry, labels: _Labels) -> None:
        self._telemetry = telemetry
        self._labels = labels
        self._phases: list[tuple[str, int, int, str | None]] = []

    def start(self) -> ActionTrace:
        telemetry = self._telemetry
        parent = telemetry._current_span().get_span_context()
        if parent.is_valid and not parent.trace_flags.sampled:
            # Under a trace that is not sampled the action span would not be recorded either (what the
            # SDK's parent-based samplers decide): skip it, the metrics are still kept.
            self._span = None
            self._recording = False
        else:
            labels = self._labels
            span = telemetry.tracer.start_span(labels.span_name, attributes=labels.span_attributes,
                                               record_exception=False, set_status_on_exception=False)
            self._span = span
            self._token = telemetry._attach(telemetry._in_context(span))
            self._recording = span.is_recording()
        self._start = time.perf_counter()
        return self

    def phase(self, name: str) -> AbstractContextManager[Any]:
        """A step of the action (`dependencies`, `handler`, `present`), timed when the call is recorded; the
        present step is always timed (the render metric)."""
        if self._recording or name == "present":
            return _Phase(self._phases, name)
        return _SKIP

    def finish(self, response: ToolResponse | None) -> None:
        """Record the outcome (`None` when the call raised) and end the span."""
        duration = time.perf_counter() - self._start
        telemetry = self._telemetry
        labels = self._labels
        key = labels.key
        span = self._span
        if span is not None:
            telemetry._detach(self._token)
        telemetry.calls[key] += 1
        phases = self._phases
        if response is not None:
            texts = response.texts
            telemetry.bytes_out[key] += sum(len(t.encode()) for t in texts)
            count = telemetry._count
            if count is not None:
                telemetry.tokens_out[key] += sum(count(t) for t in texts)
            for name, start, end, _ in phases:
                if name == "present":
                    telemetry.render_time[key] += (end - start) / 1e9
        error_type = "exception" if response is None else (response.error_code or "ERROR") if response.is_error \
            else None
        if error_type is None:
            attributes = labels.metric_attributes
        else:
            telemetry.errors[key, error_type] += 1
            attributes = {**labels.metric_attributes, "error.type": error_type}
        telemetry.duration.record(duration, attributes)
        if span is not None:
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                span.set_status(telemetry._error)
            if self._recording and phases:
                telemetry._emit_phases(span, phases)
            span.end()


def _phase_emitter(tracer: Any, version: str) -> Callable[[Any, str, int, int, str | None], None]:
    """How a finished phase becomes a span under its action's span.

    With the OpenTelemetry SDK's tracer the span is handed, finished, straight to the tracer's span
    processors (what `Span.end()` does; about a sixth of the cost of starting and ending a span: no sampler,
    as it shares its recorded parent's decision, and processors see no `on_start`). Any other tracer gets
    `start_span(start_time=...)` and `end(end_time=...)`."""
    from opentelemetry import trace

    try:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.trace import Tracer as SdkTracer
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        sdk = isinstance(tracer, SdkTracer)
    except ImportError:  # pragma: no cover - the SDK comes with the extra
        sdk = False

    if not sdk:
        def start_and_end(parent: Any, name: str, start: int, end: int, error: str | None) -> None:
            span = tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=start)
            if error is not None:
                span.set_status(trace.Status(trace.StatusCode.ERROR, error))
            span.end(end_time=end)

        return start_and_end

    span_context = trace.SpanContext
    unset = trace.Status(trace.StatusCode.UNSET)
    scope = InstrumentationScope("mcpfusion", version)

    def finished(parent: Any, name: str, start: int, end: int, error: str | None) -> None:
        up = parent.get_span_context()
        context = span_context(up.trace_id, tracer.id_generator.generate_span_id(), False, up.trace_flags,
                               up.trace_state)
        status = unset if error is None else trace.Status(trace.StatusCode.ERROR, error)
        tracer.span_processor.on_end(ReadableSpan(
            name, context, up, tracer.resource, {}, status=status, start_time=start, end_time=end,
            instrumentation_scope=scope))

    return finished


def _key_attributes(key: ActionKey) -> dict[str, str]:
    return {"mcpfusion.tool": key[0], "mcpfusion.action": key[1], "mcpfusion.transport": key[2]}


def _observe(values: Mapping[ActionKey, float], observation: Any) -> Callable[[Any], Iterable[Any]]:
    def callback(options: Any) -> Iterable[Any]:
        return [observation(value, _key_attributes(key)) for key, value in list(values.items())]

    return callback


def _observe_errors(values: Mapping[tuple[ActionKey, str], int], observation: Any) -> Callable[[Any], Iterable[Any]]:
    def callback(options: Any) -> Iterable[Any]:
        return [observation(value, {**_key_attributes(key), "error.type": code})
                for (key, code), value in list(values.items())]

    return callback


async def _metrics() -> Response:
    """The Prometheus exposition of the process's registry."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


__all__ = ["ActionTrace", "Telemetry"]
