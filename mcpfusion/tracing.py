"""How mcpfusion's spans are made: with the tracer it is given, and with the OpenTelemetry SDK's tracer without
the SDK's per-span overhead.

`Tracer.start_span` of the SDK costs about 20 µs for a recorded span (bounded attribute dicts, locks, event and
link lists, the processors' `on_start`), a tenth of a whole tools/call. When the tracer is the SDK's and its span
processors only act when a span ends (the SDK's `BatchSpanProcessor` and `SimpleSpanProcessor`, and any
processor that overrides neither `on_start` nor `_on_ending`), a span is made here the way the SDK would make
it, decision for decision: the parent's span context, a new trace id from the tracer's id generator when there
is none, the tracer's sampler (honouring the parent's flags exactly as the SDK's samplers do), the flags and
trace state it returns, a new span id. The sampler decides once per request: the action span under a
request span made here shares its decision (as the SDK's parent-based samplers decide), and so do the phase
spans under the action span. A dropped span is a `DroppedSpan`, the SDK's `NonRecordingSpan` carrying that
span context (what the SDK returns); nothing is made under it. A recorded one is a `LightSpan`: an SDK
`Span` started without the SDK's per-span set-up (its attribute dict is plain until the user's code sets an
attribute, its event and link lists are made on first use), which ends the SDK's way (a `ReadableSpan`
snapshot handed to the tracer's span processors).
Everything else a user's code can call on it (`set_status`, `add_event`, `record_exception`, `update_name`,
...) is the SDK's own code.

With any other processor (one that wants `on_start`), with the SDK's own tracer metrics switched on, with a
tracer disabled by its configurator, or with a tracer that is not the SDK's, spans go through the tracer's
`start_span`. `opentelemetry-sdk>=1.45,<2` is pinned for the internals used here (should one move, spans go
through `start_span` with a warning), and tests/test_tracing.py compares both paths span for span, so a
change of the SDK fails a test instead of changing the spans.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.util import BoundedList

logger = logging.getLogger(__name__)

_SAMPLED = trace.TraceFlags.SAMPLED
_RANDOM = trace.TraceFlags.RANDOM_TRACE_ID
_UNSET = trace.Status(trace.StatusCode.UNSET)
_get_current_span = trace.get_current_span
_SpanContext = trace.SpanContext
_TraceFlags = trace.TraceFlags
_NonRecordingSpan = trace.NonRecordingSpan
_INTERNAL = trace.SpanKind.INTERNAL


# The SDK's processors whose `on_start` and `_on_ending` do nothing (tests/test_tracing.py reads their code).
_END_ONLY = (SpanProcessor, BatchSpanProcessor, SimpleSpanProcessor)
_NO_START = frozenset(kind.on_start for kind in _END_ONLY)
_NO_ENDING = frozenset(kind._on_ending for kind in _END_ONLY)


def _acts_only_on_end(processor: Any) -> bool:
    """A span processor that needs nothing before a span ends: the SDK's batch and simple processors, and
    any processor that inherits their (or the base class's) `on_start` and `_on_ending`."""
    kind = type(processor)
    return kind.on_start in _NO_START and kind._on_ending in _NO_ENDING


class LightSpan(SdkSpan):
    """A recorded span of the SDK, started without the SDK's per-span set-up.

    The fields are the SDK `Span`'s own (tests/test_tracing.py checks they are the same set), so the
    SDK's methods work on it unchanged. Three differ: the attributes stay a plain dict until the user's
    code sets one (then they become the SDK's `BoundedAttributes`, with the tracer's limits), the event
    and link lists are made on first use, and `end()` hands the snapshot to the processors without the
    `_on_ending` round (light spans are only made when no processor has one)."""

    def __init__(self, name: str, context: Any, parent: Any, kind: Any, attributes: Mapping[str, Any],
                 tracer: Any, shared: dict[str, Any], plain: bool) -> None:
        self.__dict__.update(shared)  # the fields every span of the tracer starts with (Tracing.light)
        self._name = name
        self._context = context
        self._kind = kind
        self._parent = parent
        self._resource = tracer.resource
        self._start_time = time.time_ns()
        self._lock = threading.Lock()
        if plain:
            self._attributes: Any = dict(attributes)
        else:
            limits = self._limits
            self._attributes = BoundedAttributes(limits.max_span_attributes, attributes, immutable=False,
                                                 max_value_len=limits.max_span_attribute_length)

    def _bounded(self) -> Any:
        """The attributes as the SDK keeps them (made on the first attribute a user's code sets)."""
        attributes = self._attributes
        if type(attributes) is dict:
            limits = self._limits
            attributes = self._attributes = BoundedAttributes(
                limits.max_span_attributes, attributes, immutable=False,
                max_value_len=limits.max_span_attribute_length)
        return attributes

    def set_attribute(self, key: str, value: Any) -> None:
        with self._lock:
            if self._end_time is not None:
                logger.warning("Setting attribute on ended span.")
                return
            self._bounded()[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        with self._lock:
            if self._end_time is not None:
                logger.warning("Setting attribute on ended span.")
                return
            self._bounded()._set_items(attributes)

    def put(self, key: str, value: str) -> None:
        """mcpfusion's own attribute (a valid string: no cleaning needed); none once the span has ended (the
        handler may end the current span itself: its snapshot shares this dict)."""
        if self._end_time is None:
            self._attributes[key] = value

    def _add_event(self, event: Any) -> None:
        self._append("_events", self._limits.max_events, event, "_add_event")

    def _add_link(self, link: Any) -> None:
        self._append("_links", self._limits.max_links, link, "_add_link")

    def _append(self, field: str, limit: int | None, item: Any, method: str) -> None:
        """Add an event or a link, making its bounded list on first use (the SDK's rules otherwise)."""
        with self._lock:
            if self._end_time is None:
                items: Any = getattr(self, field)
                if not items:
                    items = BoundedList(limit)
                    setattr(self, field, items)
                items.append(item)
                return
        logger.warning("Tried calling %s on an ended span.", method)

    def end(self, end_time: int | None = None) -> None:
        with self._lock:
            if self._end_time is not None:
                logger.warning("Calling end() on an ended span.")
                return
            self._end_time = end_time if end_time is not None else time.time_ns()
            if type(self._attributes) is not dict:
                self._attributes._immutable = True
        self._span_processor.on_end(self._readable_span())


class DroppedSpan(trace.NonRecordingSpan):
    """A request span the sampler dropped: the SDK's non-recording span, marked as made here (the action
    span under it is not made either)."""


class Tracing:
    """Starts and ends mcpfusion's spans on one tracer (see the module's docstring for the two paths)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self._sdk = isinstance(tracer, SdkTracer)
        self._checked: Any = None  # the processor tuple the fast path was last decided for
        self._light = False
        self._plain = False
        self._shared: dict[str, Any] = {}
        self._enabled: Any = None

    def light(self) -> bool:
        """Whether spans are made here (SDK tracer, processors acting only on end) rather than by the
        tracer's `start_span`. Decided again whenever the provider's processors change."""
        if not self._sdk:
            return False
        tracer = self.tracer
        processors = getattr(tracer.span_processor, "_span_processors", None)
        if processors is not self._checked:
            self._checked = processors
            try:
                self._decide(tracer, processors)
            except AttributeError:  # an SDK whose internals moved: its own start_span, never a broken span
                logger.warning("OpenTelemetry SDK internals changed: mcpfusion's spans go through start_span")
                self._light = False
        return self._light and self._enabled()

    def _decide(self, tracer: Any, processors: Any) -> None:
        limits = tracer._span_limits
        self._light = (processors is not None and all(_acts_only_on_end(p) for p in processors)
                       and isinstance(tracer._tracer_metrics, NoOpTracerMetrics))
        self._enabled = tracer._is_enabled
        # mcpfusion's attributes are valid strings: a plain dict keeps them as the SDK would unless its
        # limits could cut them.
        self._plain = limits.max_span_attribute_length is None and (
            limits.max_span_attributes is None or limits.max_span_attributes >= 64)
        self._shared = {
            "_instrumentation_info": tracer.instrumentation_info,
            "_instrumentation_scope": tracer._instrumentation_scope, "_end_time": None, "_events": (),
            "_links": (), "_status": _UNSET, "_sampler": tracer.sampler, "_trace_config": None,
            "_record_exception": False, "_set_status_on_exception": False,
            "_span_processor": tracer.span_processor, "_limits": limits, "_record_end_metrics": None}

    def start(self, name: str, attributes: Mapping[str, Any], context: Any = None, kind: Any = _INTERNAL) -> Any:
        """A started span under `context` (None: the current one), not made current: a `LightSpan`, a
        `DroppedSpan` when the sampler drops it, or the tracer's own span."""
        if not self.light():
            return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes,
                                          record_exception=False, set_status_on_exception=False)
        tracer = self.tracer
        ids = tracer.id_generator
        parent: Any = _get_current_span(context).get_span_context()
        if parent.is_valid:
            trace_id = parent.trace_id
            random = parent.trace_flags.random_trace_id
        else:
            parent = None
            trace_id = ids.generate_trace_id()
            random = ids.is_trace_id_random()
        result = tracer.sampler.should_sample(context, trace_id, name, kind, attributes, ())
        decision = result.decision
        flags = _SAMPLED if decision.is_sampled() else 0
        span_context = _SpanContext(trace_id, ids.generate_span_id(), False,
                                    _TraceFlags(flags | _RANDOM if random else flags), result.trace_state)
        if not decision.is_recording():
            return DroppedSpan(span_context)
        return LightSpan(name, span_context, parent, kind, result.attributes, tracer, self._shared, self._plain)

    def child(self, name: str, attributes: Mapping[str, Any]) -> Any:
        """The span of an action, under the current span; None when there is nothing to make.

        Under a request span made here it shares that span's sampling decision, as the SDK's parent-based
        samplers decide: recorded under a recorded parent, nothing at all under a dropped one. Under any
        other parent (FastAPI's REST span, a span of the caller's code, none) the sampler decides."""
        current = _get_current_span()
        made_here = type(current)
        if made_here is LightSpan:
            up: Any = current._context  # type: ignore[attr-defined]
            tracer = self.tracer
            return LightSpan(name, _SpanContext(up.trace_id, tracer.id_generator.generate_span_id(), False,
                                                up.trace_flags, up.trace_state),
                             up, _INTERNAL, attributes, tracer, self._shared, self._plain)
        if made_here is DroppedSpan:
            return None
        span = self.start(name, attributes)
        return None if type(span) is DroppedSpan else span

    def emit(self, parent: Any, name: str, start: int, end: int, error: str | None) -> None:
        """A finished child span of the recorded span `parent` (a phase of an action, timed while it ran)."""
        status = _UNSET if error is None else trace.Status(trace.StatusCode.ERROR, error)
        tracer = self.tracer
        if type(parent) is not LightSpan:
            span = tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=start)
            if error is not None:
                span.set_status(status)
            span.end(end_time=end)
            return
        # It shares its parent's sampling decision (a parent-based sampler's answer for a recorded parent).
        up: Any = parent._context
        context = _SpanContext(up.trace_id, tracer.id_generator.generate_span_id(), False, up.trace_flags,
                               up.trace_state)
        tracer.span_processor.on_end(ReadableSpan(
            name, context, up, parent._resource, {}, status=status, start_time=start, end_time=end,
            instrumentation_info=parent._instrumentation_info, instrumentation_scope=parent._instrumentation_scope))


__all__ = ["DroppedSpan", "LightSpan", "Tracing"]
