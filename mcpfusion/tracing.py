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
attribute, its event and link lists are made on first use), which, once ended, is handed itself (a
`ReadableSpan` nothing changes any more) to the tracer's span processors.
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
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, StaticSampler
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace.propagation import _SPAN_KEY

logger = logging.getLogger(__name__)

_SAMPLED = trace.TraceFlags.SAMPLED
_RANDOM = trace.TraceFlags.RANDOM_TRACE_ID
_UNSET = trace.Status(trace.StatusCode.UNSET)
_get_current_span = trace.get_current_span
_SpanContext = trace.SpanContext
_INTERNAL = trace.SpanKind.INTERNAL
_new_context = tuple.__new__
_getrandbits = random.getrandbits
_RECORD_AND_SAMPLE = Decision.RECORD_AND_SAMPLE
_RECORD_ONLY = Decision.RECORD_ONLY
_NO_STATE = trace.DEFAULT_TRACE_STATE
_NO_PARENT = trace.INVALID_SPAN_CONTEXT
_set_item = dict.__setitem__
_new = object.__new__
_time_ns = time.time_ns
_Shared = MappingProxyType  # an action's span attributes, shared by its calls until one sets its own
_FLAGS = {flags: trace.TraceFlags(flags) for flags in (0, _SAMPLED, _RANDOM, _SAMPLED | _RANDOM)}


# The SDK's processors whose `on_start` and `_on_ending` do nothing (tests/test_tracing.py reads their code).
_END_ONLY = (SpanProcessor, BatchSpanProcessor, SimpleSpanProcessor)
_NO_START = frozenset(kind.on_start for kind in _END_ONLY)
_NO_ENDING = frozenset(kind._on_ending for kind in _END_ONLY)


def _acts_only_on_end(processor: Any) -> bool:
    """A span processor that needs nothing before a span ends: the SDK's batch and simple processors, and
    any processor that inherits their (or the base class's) `on_start` and `_on_ending`."""
    kind = type(processor)
    return kind.on_start in _NO_START and kind._on_ending in _NO_ENDING



class CurrentSpan:
    """The current span of OpenTelemetry's context: `enter(span, context)` makes `span` current (under
    `context`, None: the current one) and returns the token `leave` takes back.

    With the API's default runtime (a `ContextVar`) this is the API's own `attach(set_span_in_context(...))`
    and `detach` done on the variable at once, a third of their calls; with any other runtime, the API's
    functions themselves."""

    def __init__(self) -> None:
        runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
        self._var: Any = runtime._current_context if type(runtime) is ContextVarsRuntimeContext else None

    def enter(self, span: Any, context: Any = None) -> Any:
        var = self._var
        if var is None:
            return otel_context.attach(trace.set_span_in_context(span, context))
        values = Context(var.get() if context is None else context)  # one copy (a Context refuses item setting)
        _set_item(values, _SPAN_KEY, span)
        return var.set(values)

    def leave(self, token: Any) -> None:
        var = self._var
        if var is None:
            otel_context.detach(token)
            return
        try:
            var.reset(token)
        except Exception:  # as the API's detach: a token of another context is logged, never raised
            logger.exception("Failed to detach context")

    def get(self) -> Any:
        """`trace.get_current_span()`."""
        var = self._var
        if var is None:
            return _get_current_span()
        span = var.get().get(_SPAN_KEY)
        if span is None:
            return trace.INVALID_SPAN
        return span if type(span) in LIGHT or isinstance(span, trace.Span) else trace.INVALID_SPAN


def _context(trace_id: int, span_id: int, flags: Any, state: Any) -> Any:
    """A local span context of valid ids (the SDK's `SpanContext`, without re-checking ids made valid here)."""
    return _new_context(_SpanContext, (trace_id, span_id, False, flags, state, True))


def _fixed_decisions(sampler: Any) -> tuple[Any, ...] | None:
    """What a sampler whose answer depends on nothing but the parent decides: for no parent, a remote
    sampled, a remote unsampled, a local sampled and a local unsampled parent (the SDK's `StaticSampler`,
    `ALWAYS_ON` and `ALWAYS_OFF`, alone or as every delegate of its `ParentBased`, the SDK's default); None
    for any other sampler (it is asked every time)."""
    kind = type(sampler)
    if kind is StaticSampler:
        return (sampler._decision,) * 5
    if kind is ParentBased:
        delegates = (sampler._root, sampler._remote_parent_sampled, sampler._remote_parent_not_sampled,
                     sampler._local_parent_sampled, sampler._local_parent_not_sampled)
        if all(type(delegate) is StaticSampler for delegate in delegates):
            return tuple(delegate._decision for delegate in delegates)
    return None


def _failed(error: str) -> Any:
    """The status of a phase that raised `error` (its exception's type)."""
    return trace.Status(trace.StatusCode.ERROR, error)


def _random_span_id() -> int:
    """`RandomIdGenerator.generate_span_id`: 64 random bits, never the invalid id 0 (drawn again after a
    draw of `_random_bits` gave 0)."""
    span_id = _getrandbits(64)
    while not span_id:
        span_id = _getrandbits(64)
    return span_id


_random_bits = partial(_getrandbits, 64)  # (a call without a Python frame: `_random_bits() or _random_span_id()`)


def _no_id() -> int:
    """A generator's own span id of 0 (invalid) kept as it is, as the SDK keeps it."""
    return 0


def _each(on_end: Callable[[Any], None]) -> Callable[[list[Any]], None]:
    def take(spans: list[Any]) -> None:
        for span in spans:
            on_end(span)

    return take


def _all(sinks: list[Callable[[list[Any]], None]]) -> Callable[[list[Any]], None]:
    """One call handing spans to every sink (the sink itself when there is one, the usual case)."""
    if len(sinks) == 1:
        return sinks[0]

    def take(spans: list[Any]) -> None:
        for sink in sinks:
            sink(spans)

    return take


def _queued(processor: BatchSpanProcessor) -> Callable[[list[Any]], None]:
    """Sampled spans into a batch processor's queue at once: what its `on_end` does with each of them, one
    after the other (`emit`), whenever nothing is out of the ordinary; otherwise its own `emit`, span by span
    (shut down, forked, a queue that would overflow: its warnings and drop counts)."""
    batch: Any = processor._batch_processor
    queue = batch._queue
    room = batch._max_queue_size
    batch_size = batch._max_export_batch_size
    awaken = batch._worker_awaken
    emit = batch.emit
    getpid = os.getpid

    def take(spans: list[Any]) -> None:
        if batch._shutdown or batch._pid != getpid() or len(queue) + len(spans) > room:
            for span in spans:
                emit(span)
            return
        queue.extendleft(spans)
        if len(queue) >= batch_size and not awaken.is_set():
            awaken.set()

    return take


class Sinks:
    """A tracer's span processors, as finished light spans reach them: a sampled span goes straight into each
    batch processor's queue (what `BatchSpanProcessor.on_end` does with it) and to every other processor's
    `on_end`; an unsampled (record-only) one only to processors that are neither the SDK's batch nor its simple
    processor (those two drop it). `take` hands over the spans of one action together (`sampled` and
    `unsampled` too, for spans known to be either). It stands in the light spans' `_span_processor` field."""

    def __init__(self, processors: Any) -> None:
        sampled: list[Callable[[list[Any]], None]] = []
        unsampled: list[Callable[[list[Any]], None]] = []
        for processor in processors:
            on_end = type(processor).on_end
            if on_end is BatchSpanProcessor.on_end:
                sampled.append(_queued(processor))
            elif on_end is SimpleSpanProcessor.on_end:
                sampled.append(_each(processor.on_end))
            else:
                sampled.append(_each(processor.on_end))
                unsampled.append(_each(processor.on_end))
        self.sampled = _all(sampled)
        self.unsampled = _all(unsampled)

    def take(self, spans: list[Any]) -> None:
        """Finished spans of one trace (they share its sampled flag)."""
        (self.sampled if spans[0]._context[3] & _SAMPLED else self.unsampled)(spans)

    def on_end(self, span: ReadableSpan) -> None:
        self.take([span])

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        """Light spans are only made when no processor acts on start."""

    def _on_ending(self, span: Any) -> None:
        """Nor before a span ends."""


class LightSpan(SdkSpan):
    """A recorded span of the SDK, started without the SDK's per-span set-up.

    The fields are the SDK `Span`'s own (tests/test_tracing.py checks they are the same set), so the
    SDK's methods work on it unchanged: a span's own in slots, those every span of a tracer shares on a
    subclass made for the tracer (`Tracing`), and those a span rarely changes (its status, events and links)
    as defaults on the class until it does (then in the span's own `__dict__`, which every SDK span has). Five
    differ: the attributes stay a plain dict (or an action's shared, read-only one) until the user's code sets
    one (then they become the SDK's `BoundedAttributes`, with the tracer's limits), the event and link lists
    are made on first use, the lock is one for all light spans (its holders never take another span's),
    `_span_processor` is the tracer's `Sinks`, and `end()` hands the span itself to them without the
    `_on_ending` round (light spans are only made when no processor has one). Made by `Tracing`
    (`Tracing.start`, `Tracing.request`, `Tracing.action`)."""

    __slots__ = ("_name", "_context", "_kind", "_parent", "_start_time", "_end_time", "_attributes")
    _attributes: Any  # a plain dict or a shared read-only one until the user's code sets one, then BoundedAttributes
    _span_processor: Any  # the tracer's `Sinks`
    _trace_config = None
    _record_exception = False
    _set_status_on_exception = False
    _record_end_metrics = None
    _lock = threading.Lock()
    _status = _UNSET
    _events: Any = ()
    _links: Any = ()

    def _bounded(self) -> Any:
        """The attributes as the SDK keeps them (made on the first attribute a user's code sets)."""
        attributes = self._attributes
        if type(attributes) is not BoundedAttributes:
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
        handler may end the current span itself, and the processors then hold it)."""
        if self._end_time is None:
            attributes = self._attributes
            if type(attributes) is _Shared:  # an action's attributes, shared: its own copy first
                attributes = self._attributes = dict(attributes)
            attributes[key] = value

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

    def _finish(self, end_time: int | None = None) -> bool:
        """End the span (False, with the SDK's warning, when it had ended already)."""
        with self._lock:
            if self._end_time is not None:
                logger.warning("Calling end() on an ended span.")
                return False
            self._end_time = end_time if end_time is not None else _time_ns()
            if type(self._attributes) is BoundedAttributes:
                self._attributes._immutable = True
        return True

    def end(self, end_time: int | None = None) -> None:
        """End the span and hand it to the processors: the span itself, a `ReadableSpan` that nothing changes
        any more once ended (the SDK hands a copy)."""
        if self._finish(end_time):
            self._span_processor.on_end(self)


# The light span classes of every tracer (a set lookup: `isinstance` on the SDK's abstract span is slow).
LIGHT: set[type] = {LightSpan}


class FinishedSpan(ReadableSpan):
    """A phase of an action, finished when it is made: the SDK's `ReadableSpan` with its own fields in slots,
    those every phase span of a tracer shares on a subclass made for the tracer (`Tracing`), and its status a
    default on the class unless it failed. Made by `Tracing.close`."""

    __slots__ = ("_name", "_context", "_parent", "_start_time", "_end_time")
    _kind = _INTERNAL
    _events = ()
    _links = ()
    _attributes = MappingProxyType({})
    _status = _UNSET


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
        self._span: type[LightSpan] = LightSpan
        self._phase: type[FinishedSpan] = FinishedSpan
        self._limits: Any = None
        self._decisions: tuple[Any, ...] | None = None
        self._sinks: Sinks | None = None
        self._span_id: Callable[[], int] = _random_bits  # a span id, or 0: then `_id_again()`'s
        self._id_again: Callable[[], int] = _random_span_id

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
        return self._light and tracer._tracer_config.is_enabled  # (`tracer._is_enabled()`, without its call)

    def _decide(self, tracer: Any, processors: Any) -> None:
        limits = tracer._span_limits
        self._light = (processors is not None and all(_acts_only_on_end(p) for p in processors)
                       and isinstance(tracer._tracer_metrics, NoOpTracerMetrics)
                       and isinstance(tracer._tracer_config.is_enabled, bool))  # (what `light()` reads per request)
        if not self._light:
            return
        # mcpfusion's attributes are valid strings: a plain dict keeps them as the SDK would unless its
        # limits could cut them.
        self._plain = limits.max_span_attribute_length is None and (
            limits.max_span_attributes is None or limits.max_span_attributes >= 64)
        ids = tracer.id_generator
        random_ids = type(ids) is RandomIdGenerator
        self._span_id = _random_bits if random_ids else ids.generate_span_id
        self._id_again = _random_span_id if random_ids else _no_id
        self._sinks = Sinks(processors)
        self._limits = limits
        self._decisions = _fixed_decisions(tracer.sampler)
        # What every span of the tracer shares, on a class of its own (the spans keep only their own fields).
        tracer_fields = {"__slots__": (), "__module__": __name__, "_instrumentation_info": tracer.instrumentation_info,
                         "_instrumentation_scope": tracer._instrumentation_scope, "_resource": tracer.resource}
        self._span = type("LightSpan", (LightSpan,), {
            **tracer_fields, "_sampler": tracer.sampler, "_span_processor": self._sinks, "_limits": limits})
        self._phase = type("FinishedSpan", (FinishedSpan,), tracer_fields)
        LIGHT.add(self._span)

    def _made(self, name: str, context: Any, parent: Any, kind: Any, attributes: Any) -> LightSpan:
        """A started `LightSpan` of the tracer: it keeps `attributes` (a dict of its own or an action's shared
        read-only one) unless the tracer's limits could cut them."""
        if not self._plain:
            limits = self._limits
            attributes = BoundedAttributes(limits.max_span_attributes, attributes, immutable=False,
                                           max_value_len=limits.max_span_attribute_length)
        span: LightSpan = _new(self._span)
        span._name = name
        span._context = context
        span._kind = kind
        span._parent = parent
        span._attributes = attributes
        span._end_time = None
        span._start_time = _time_ns()
        return span

    def start(self, name: str, attributes: Mapping[str, Any], context: Any = None, kind: Any = _INTERNAL) -> Any:
        """A started span under `context` (None: the current one), not made current: a `LightSpan`, a
        `DroppedSpan` when the sampler drops it, or the tracer's own span."""
        if not self.light():
            return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes,
                                          record_exception=False, set_status_on_exception=False)
        current = CURRENT.get() if context is None else _get_current_span(context)
        return self._sampled(name, dict(attributes), current, context, kind)

    def request(self, name: str, attributes: dict[str, Any], context: Any, kind: Any) -> tuple[Any, Any]:
        """`start(name, attributes, context, kind)` made current at once: the span and the token `finish`
        takes. The span may keep `attributes` (a dict made for it)."""
        var = CURRENT._var
        if var is None or not self.light():
            span = self.start(name, attributes, context, kind)
            return span, CURRENT.enter(span, context)
        values = var.get() if context is None else context
        current = values.get(_SPAN_KEY)  # (as `trace.get_current_span` reads it)
        if current is not None and type(current) not in LIGHT and not isinstance(current, trace.Span):
            current = None
        span = self._sampled(name, attributes, current, context, kind)
        values = Context(values)  # one copy (a Context refuses item setting)
        _set_item(values, _SPAN_KEY, span)
        return span, var.set(values)

    def _sampled(self, name: str, attributes: dict[str, Any], current: Any, context: Any, kind: Any) -> Any:
        """The light path of `start`: a span under the span `current` (None or the invalid span: a root),
        sampled as the SDK's tracer samples (`context`, the parent's, is what an asked sampler is given)."""
        tracer = self.tracer
        parent: Any = _NO_PARENT if current is None or current is trace.INVALID_SPAN else current.get_span_context()
        if parent[5]:  # is_valid
            trace_id = parent[0]
            random = parent[3] & _RANDOM
        else:
            parent = None
            ids = tracer.id_generator
            if self._span_id is _random_bits:  # RandomIdGenerator's trace id: 128 random bits, never 0
                trace_id = _getrandbits(128) or ids.generate_trace_id()
                random = True
            else:
                trace_id = ids.generate_trace_id()
                random = ids.is_trace_id_random()
        decisions = self._decisions
        if decisions is None:
            result = tracer.sampler.should_sample(context, trace_id, name, kind, attributes, ())
            decision, state, attributes = result.decision, result.trace_state, dict(result.attributes)
        elif parent is None:  # the sampler's answer, without asking (see `_fixed_decisions`)
            decision, state = decisions[0], None
        else:
            decision, state = decisions[(1 if parent[2] else 3) + (0 if parent[3] & _SAMPLED else 1)], parent[4]
        if state is None:  # (as the SDK's SpanContext makes it)
            state = _NO_STATE
        if decision is _RECORD_AND_SAMPLE:
            flags = _FLAGS[_SAMPLED | _RANDOM if random else _SAMPLED]
        elif decision is _RECORD_ONLY or decision.is_recording():
            flags = _FLAGS[_RANDOM if random else 0]
        else:
            return DroppedSpan(_context(trace_id, self._span_id() or self._id_again(), _FLAGS[_RANDOM if random else 0],
                                        state))
        return self._made(name, _context(trace_id, self._span_id() or self._id_again(), flags, state), parent, kind,
                          attributes)

    def child(self, name: str, attributes: Mapping[str, Any]) -> Any:
        """The span of an action, under the current span; None when there is nothing to make.

        Under a request span made here it shares that span's sampling decision, as the SDK's parent-based
        samplers decide: recorded under a recorded parent, nothing at all under a dropped one. Under any
        other parent (FastAPI's REST span, a span of the caller's code, none) the sampler decides."""
        current = CURRENT.get()
        if type(current) in LIGHT:
            up: Any = current._context
            context = _new_context(_SpanContext, (up[0], self._span_id() or self._id_again(), False, up[3], up[4],
                                                  True))
            return self._made(name, context, up, _INTERNAL, attributes)
        if type(current) is DroppedSpan:
            return None
        span = self.start(name, attributes)
        return None if type(span) is DroppedSpan else span

    def action(self, name: str, attributes: Mapping[str, Any]) -> tuple[Any, Any]:
        """`child(name, attributes)` made current: the span and the token `close` takes, or (None, None).
        The span may keep `attributes` (an action's shared read-only mapping)."""
        var = CURRENT._var
        if var is not None:
            values = var.get()
            current = values.get(_SPAN_KEY)
            if type(current) in LIGHT:  # (`child`'s first case, without its calls)
                up: Any = current._context
                span = self._made(name, _new_context(_SpanContext, (
                    up[0], self._span_id() or self._id_again(), False, up[3], up[4], True)), up, _INTERNAL, attributes)
                values = Context(values)
                _set_item(values, _SPAN_KEY, span)
                return span, var.set(values)
        span = self.child(name, attributes)
        return (None, None) if span is None else (span, CURRENT.enter(span))

    def _emit(self, parent: Any, name: str, start: int, end: int, error: str | None) -> None:
        """A finished child span of `parent`, a span of the tracer's own `start_span` (a phase of an action,
        timed while it ran)."""
        span = self.tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=start)
        if error is not None:
            span.set_status(_failed(error))
        span.end(end_time=end)

    def end(self, span: Any) -> None:
        """`span.end()` (a request's span: a light one straight to the processors)."""
        if type(span) in LIGHT:
            if span._finish():
                sinks = span._span_processor
                (sinks.sampled if span._context[3] & _SAMPLED else sinks.unsampled)([span])
        else:
            span.end()

    def finish(self, span: Any, token: Any) -> None:
        """Leave a request's span (`token`: from `request`) and end it."""
        CURRENT.leave(token)
        self.end(span)

    def close(self, span: Any, token: Any, phases: list[tuple[str, int, int, str | None]] | None) -> None:
        """Leave an action's span (`token`: from `action`) and end it with the finished spans of its phases
        (name, start, end, error type; None: the span records nothing): on the light path all handed to the
        processors together."""
        CURRENT.leave(token)
        if type(span) not in LIGHT:
            for name, start, end, error in phases or ():
                self._emit(span, name, start, end, error)
            span.end()
            return
        # The phases share their parent's sampling decision (a parent-based sampler's answer for a recorded one).
        up: Any = span._context
        trace_id, flags, state = up[0], up[3], up[4]
        span_id, again, kind = self._span_id, self._id_again, self._phase
        spans: list[Any] = []
        for name, start, end, error in phases or ():  # (each made as `FinishedSpan`'s fields say, without a call)
            phase = _new(kind)
            phase._name = name
            phase._context = _new_context(_SpanContext, (trace_id, span_id() or again(), False, flags, state, True))
            phase._parent = up
            phase._start_time = start
            phase._end_time = end
            if error is not None:
                phase._status = _failed(error)
            spans.append(phase)
        if span._finish():  # (unless the handler ended it itself)
            spans.append(span)
        if spans:
            sinks = span._span_processor
            (sinks.sampled if flags & _SAMPLED else sinks.unsampled)(spans)


class AttributeScrubbing(trace.TracerProvider):
    """`provider` as FastAPI's REST telemetry is given it: a span started with one of the attributes of `scrubs`
    (FastAPI's server span: its `url.query`, a REST GET's arguments; its `url.path`, which any client chooses,
    matched by a route or not) gets that attribute's `scrub(value)` instead, since FastAPI offers no hook of
    its own. Everything else is `provider`'s."""

    def __init__(self, provider: Any, scrubs: dict[str, Callable[[str], str]]) -> None:
        self._provider = provider
        self._scrubs = scrubs

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _ScrubbingTracer(self._provider.get_tracer(*args, **kwargs), self._scrubs)

    def __getattr__(self, name: str) -> Any:  # force_flush, shutdown, ...
        return getattr(self._provider, name)


class _ScrubbingTracer(trace.Tracer):
    """A tracer whose spans' attributes of `scrubs` are scrubbed before the tracer (its sampler, its processors)
    sees them."""

    def __init__(self, tracer: trace.Tracer, scrubs: dict[str, Callable[[str], str]]) -> None:
        self._tracer = tracer
        self._scrubs = scrubs

    def _scrubbed(self, attributes: Any) -> Any:
        if not attributes:
            return attributes
        found = {name: scrub(value) for name, scrub in self._scrubs.items()
                 if isinstance(value := attributes.get(name), str)}
        return {**attributes, **found} if found else attributes

    def start_span(self, name: str, context: Any = None, kind: Any = _INTERNAL, attributes: Any = None,
                   links: Any = None, start_time: int | None = None, record_exception: bool = True,
                   set_status_on_exception: bool = True) -> trace.Span:
        return self._tracer.start_span(name, context, kind, self._scrubbed(attributes), links, start_time,
                                       record_exception, set_status_on_exception)

    def start_as_current_span(self, name: str, context: Any = None, kind: Any = _INTERNAL, attributes: Any = None,
                              links: Any = None, start_time: int | None = None, record_exception: bool = True,
                              set_status_on_exception: bool = True, end_on_exit: bool = True) -> Any:
        return self._tracer.start_as_current_span(name, context, kind, self._scrubbed(attributes), links, start_time,
                                                  record_exception, set_status_on_exception, end_on_exit)


CURRENT = CurrentSpan()

__all__ = ["CURRENT", "LIGHT", "AttributeScrubbing", "CurrentSpan", "DroppedSpan", "FinishedSpan", "LightSpan",
           "Sinks", "Tracing"]
