"""Resumable SSE streams: every event written to a stream is kept in an `EventStore` under a unique id,
so a client that lost the connection can send `Last-Event-ID` and get what it missed.

Event ids embed their stream id (`{stream}#{seq}`), so any replica can find the stream of a
`Last-Event-ID` without extra lookups. `mcpfusion.redis.RedisEventStore` keeps them in Redis Streams.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Protocol

from pydantic_core import from_json

from .jsonrpc import encode


class StoreRefused(Exception):
    """The event store answered but refused to store (full, read-only): unlike an unreachable store, retrying
    at once will not help, so a reply is sent unstored without waiting."""


class NotIssued(LookupError):
    """An event id names a stream the store knows, at a number past the last event it stored there: the
    store never issued it (forged or mangled), unlike an id that expired with its stream."""


class EventStore(Protocol):
    async def store_event(self, stream_id: str, message: dict[str, Any] | None) -> str:
        """Append `message` (None = priming event) to `stream_id`; return its event id."""
        ...

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
        """The stream of `last_event_id` and the (id, message) events stored after it, priming events
        excluded; None when the id is unknown or has expired. Raises `NotIssued` for a number past the
        stream's last event, which the transport refuses (a store that cannot tell returns no events)."""
        ...


def event_id(stream_id: str, number: int) -> str:
    """The id of event `number` of `stream_id`, as SSE `id:` and `Last-Event-ID` carry it."""
    return f"{stream_id}#{number}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """(stream id, event number) of an event id, or None when `value` is not one (the one parser)."""
    stream, sep, number = value.rpartition("#")
    # ASCII digits only (`str.isdigit` accepts "²", which `int` refuses); 40 digits bound any store's numbers.
    if not sep or not number.isascii() or not number.isdigit() or len(number) > 40:
        return None
    return stream, int(number)


class InMemoryEventStore:
    """Bounded in-process event store: `max_events` newest events per stream, at most `max_streams`
    streams, each forgotten `retention` seconds after it started (a client resumes within seconds), and
    the oldest streams forgotten while the stored messages exceed `max_bytes` of JSON (a few large replies
    would otherwise hold gigabytes within the other bounds); each kept as an exact-size copy of its JSON, so the
    bytes counted are the bytes held."""

    def __init__(self, max_events: int = 1000, max_streams: int = 2000, retention: float = 300.0,
                 max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_events = max_events
        self.max_streams = max_streams
        self.retention = retention
        self.max_bytes = max_bytes
        self._bytes = 0  # the JSON bytes of every stored message
        # Each stream's events as a list of (number, data) (data None: a priming event): an SSE reply stores
        # two events on a new stream, and under load every such call also drops the oldest stream, so both
        # are kept to a few allocations. Streams are dropped oldest first, found through `_order` (a plain
        # dict used as a queue slows down as deleted slots pile up at its front).
        # Messages are kept as their JSON bytes: thousands of kept reply dicts would be objects for the garbage
        # collector to walk again and again (its full collections then cost more than the replies themselves).
        self._streams: dict[str, list[tuple[int, bytes | None]]] = {}
        self._order: deque[tuple[float, str]] = deque()  # (start time, stream id), oldest first
        self._last: tuple[dict[str, Any], bytes] | None = None  # the message stored last, and its bytes

    def _forget_old(self, now: float) -> None:
        horizon = now - self.retention
        order = self._order
        while order and (len(order) >= self.max_streams or order[0][0] < horizon):
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        events = self._streams.pop(self._order.popleft()[1])
        self._bytes -= sum(len(data) for _, data in events if data is not None)

    async def store_event(self, stream_id: str, message: dict[str, Any] | None) -> str:
        events = self._streams.get(stream_id)
        if events is None:
            now = time.monotonic()
            self._forget_old(now)
            events = self._streams[stream_id] = []
            self._order.append((now, stream_id))
        # Numbered per stream (a counter shared by every stream told each client how many events the others'
        # streams had between two of its own), from the time it started in microseconds: a stream forgotten
        # and started again (a session's GET stream) goes on past every number it had before.
        seq = events[-1][0] + 1 if events else time.time_ns() // 1000
        if message is None:
            events.append((seq, None))
        else:
            # An exact-size copy: orjson's bytes keep the whole buffer it wrote them in (4 KiB for a progress
            # notification of 100 bytes, about 8 times the size of a large reply), which `max_bytes` would not
            # count; kept here for minutes, not for one response.
            data = bytes(memoryview(encode(message)))
            events.append((seq, data))
            self._last = (message, data)
            self._bytes += len(data)
        if len(events) > self.max_events:
            dropped = events.pop(0)[1]  # a list: most streams hold two events (a deque costs more for them)
            self._bytes -= len(dropped) if dropped is not None else 0
        while self._bytes > self.max_bytes and self._order:  # (this very stream too, when it alone is over)
            self._forget_oldest()
        return event_id(stream_id, seq)

    def encoded(self, message: dict[str, Any]) -> bytes | None:
        """The JSON bytes of `message` when it is the message stored last (None otherwise): the live SSE
        response sends the bytes just stored instead of encoding the reply a second time."""
        last = self._last
        return last[1] if last is not None and last[0] is message else None

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
        parsed = parse_event_id(last_event_id)
        if parsed is None or parsed[0] not in self._streams:
            return None
        stream_id, after = parsed
        stored = self._streams[stream_id]
        if stored and after > stored[-1][0]:  # (events are dropped oldest first: the last one is kept)
            raise NotIssued(last_event_id)
        events = [
            (event_id(stream_id, seq), from_json(data))
            for seq, data in stored if seq > after and data is not None
        ]
        return stream_id, events
