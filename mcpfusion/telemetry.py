"""OpenTelemetry traces and metrics (the optional extra `mcpfusion[telemetry]`).

Nothing here runs unless a server is given a `Telemetry` (`MCPFusion(..., telemetry=Telemetry())`): the
engine and the core call path only check for `None`, so an app without it pays nothing.

Spans, after the OpenTelemetry conventions for MCP and GenAI tool execution:

- `{mcp.method.name} {target}` (SERVER): one per MCP request, on both wires and stdio; its parent is the
  W3C trace context of the request's `_meta` (`traceparent`), else of the HTTP headers.
- `{METHOD} /api/{tool}/{action}` (SERVER): one per REST call, made by FastAPI's own telemetry
  (`build_app()` configures it with the same providers; see `fastapi_config()` for `mount()`).
- `execute_tool {tool}.{action}` (INTERNAL): one per action call, a child of either server span, with
  children `mcpfusion.dependencies` (when the action has dependencies), `mcpfusion.handler` and
  `mcpfusion.present`. A call whose trace is not sampled skips the children (nothing would record them).

Metrics: `mcp.server.operation.duration` (histogram, by method and error type); per action (attributes
`mcpfusion.tool`, `mcpfusion.action`, `mcpfusion.transport`) `mcpfusion.action.duration` (histogram),
`mcpfusion.action.calls`, `mcpfusion.action.errors` (by `error.type`, the tool error code),
`mcpfusion.presenter.render.duration`, `mcpfusion.response.size` (bytes of text sent) and, with
`count_tokens=True`, `mcpfusion.response.tokens` (o200k). The counters are kept in plain per-process dicts
and read by OpenTelemetry when it collects (observable counters), so a call pays for three histogram records.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
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
            from opentelemetry import metrics, propagate, trace
        except ImportError as exc:  # pragma: no cover - the extra is installed in the test environment
            raise ImportError("Telemetry needs OpenTelemetry: pip install 'mcpfusion[telemetry]'") from exc
        from .version import __version__

        self._extract = propagate.extract
        self._server = trace.SpanKind.SERVER
        self._error = trace.Status(trace.StatusCode.ERROR)
        self.prometheus = prometheus
        if prometheus and meter_provider is None:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from opentelemetry.sdk.metrics import MeterProvider

            meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
        self.tracer_provider = tracer_provider or trace.get_tracer_provider()
        self.meter_provider = meter_provider or metrics.get_meter_provider()
        self.tracer = self.tracer_provider.get_tracer("mcpfusion", __version__)
        meter = self.meter_provider.get_meter("mcpfusion", __version__)
        self.operation_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", description="MCP request duration on the server")
        self.duration = meter.create_histogram(
            "mcpfusion.action.duration", unit="s", description="Action call duration, presenter included")
        self.render_duration = meter.create_histogram(
            "mcpfusion.presenter.render.duration", unit="s", description="Time spent presenting a result")
        self.calls: defaultdict[ActionKey, int] = defaultdict(int)
        self.errors: defaultdict[tuple[ActionKey, str], int] = defaultdict(int)
        self.bytes_out: defaultdict[ActionKey, int] = defaultdict(int)
        self.tokens_out: defaultdict[ActionKey, int] = defaultdict(int)
        metric = metrics.Observation
        meter.create_observable_counter(
            "mcpfusion.action.calls", [_observe(self.calls, metric)], unit="{call}", description="Action calls")
        meter.create_observable_counter(
            "mcpfusion.action.errors", [_observe_errors(self.errors, metric)], unit="{error}",
            description="Action calls answered with a tool error, by code")
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

    # -- MCP requests (the engine's observer) -----------------------------------------------------------

    async def observe_request(self, call: Call, run: Callable[[Call], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run one MCP request inside its SERVER span and record `mcp.server.operation.duration`."""
        method = call.method
        params = call.params
        scope = call.request.scope
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            "mcp.protocol.version": call.protocol_version,
            "network.transport": "pipe" if scope.get(TRANSPORT_SCOPE_KEY) == "stdio" else "tcp",
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
        meta = params.get("_meta")
        if isinstance(meta, dict) and "traceparent" in meta:
            parent = self._extract({k: meta[k] for k in _META_TRACE_KEYS if isinstance(meta.get(k), str)})
        else:
            parent = self._extract(call.request.headers)
        start = time.perf_counter()
        error_type: str | None = None
        with self.tracer.start_as_current_span(
            name, context=parent, kind=self._server, attributes=attributes,
            record_exception=False, set_status_on_exception=False,
        ) as span:
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
                metric = {"mcp.method.name": method}
                if error_type is not None:
                    span.set_attribute("error.type", error_type)
                    span.set_status(self._error)
                    metric["error.type"] = error_type
                self.operation_duration.record(time.perf_counter() - start, metric)

    # -- actions (the core call path) -------------------------------------------------------------------

    def action(self, action: Action, request: Request) -> ActionTrace:
        return ActionTrace(self, action, request)


class ActionTrace:
    """One action call: its `execute_tool` span, the phases inside it, and its metrics when it ends."""

    __slots__ = ("_telemetry", "_key", "_label", "_scope", "_span", "_start", "_render", "_recording")

    def __init__(self, telemetry: Telemetry, action: Action, request: Request) -> None:
        self._telemetry = telemetry
        scope = request.scope
        transport = scope.get(TRANSPORT_SCOPE_KEY) or ("mcp" if scope.get(CONTEXT_SCOPE_KEY) else "rest")
        self._key: ActionKey = (action.tool.name, action.name, transport)
        self._label = f"{action.tool.name}.{action.name}"
        self._render = 0.0

    def start(self) -> ActionTrace:
        tool, action, transport = self._key
        self._scope = self._telemetry.tracer.start_as_current_span(
            f"execute_tool {self._label}",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self._label,
                        "mcpfusion.tool": tool, "mcpfusion.action": action, "mcpfusion.transport": transport},
            record_exception=False, set_status_on_exception=False,
        )
        self._span = self._scope.__enter__()
        self._recording = self._span.is_recording()
        self._start = time.perf_counter()
        return self

    def phase(self, name: str) -> AbstractContextManager[Any]:
        """A child span of the action (`dependencies`, `handler`, `present`); the present phase is timed."""
        if name == "present":
            return self._presenting()
        if not self._recording:
            return _SKIP
        return self._telemetry.tracer.start_as_current_span(f"mcpfusion.{name}")

    @contextmanager
    def _presenting(self) -> Iterator[None]:
        start = time.perf_counter()
        if self._recording:
            with self._telemetry.tracer.start_as_current_span("mcpfusion.present"):
                yield
        else:
            yield
        self._render = time.perf_counter() - start

    def finish(self, response: ToolResponse | None) -> None:
        """Record the outcome (`None` when the call raised) and end the span."""
        telemetry = self._telemetry
        key = self._key
        tool, action, transport = key
        attributes: dict[str, Any] = {"mcpfusion.tool": tool, "mcpfusion.action": action,
                                      "mcpfusion.transport": transport}
        telemetry.calls[key] += 1
        if response is not None:
            texts = response.texts
            telemetry.bytes_out[key] += sum(len(t.encode()) for t in texts)
            count = telemetry._count
            if count is not None:
                telemetry.tokens_out[key] += sum(count(t) for t in texts)
            if self._render:
                telemetry.render_duration.record(self._render, attributes)
        error_type = "exception" if response is None else (response.error_code or "ERROR") if response.is_error \
            else None
        if error_type is not None:
            telemetry.errors[key, error_type] += 1
            attributes["error.type"] = error_type
            self._span.set_attribute("error.type", error_type)
            self._span.set_status(telemetry._error)
        telemetry.duration.record(time.perf_counter() - self._start, attributes)
        self._scope.__exit__(None, None, None)


def _key_attributes(key: ActionKey) -> dict[str, str]:
    return {"mcpfusion.tool": key[0], "mcpfusion.action": key[1], "mcpfusion.transport": key[2]}


def _observe(values: Mapping[ActionKey, int], observation: Any) -> Callable[[Any], Iterable[Any]]:
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
