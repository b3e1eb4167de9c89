"""Resumable SSE streams: every event written to a stream is kept in an `EventStore` under a unique id,
so a client that lost the connection can send `Last-Event-ID` and get what it missed.

Event ids embed their stream id (`{stream}#{seq}`), so any replica can find the stream of a
`Last-Event-ID` without extra lookups. Issue 6 adds a Redis Streams implementation.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol


class EventStore(Protocol):
    async def store_event(self, stream_id: str, message: dict[str, Any] | None) -> str:
        """Append `message` (None = priming event) to `stream_id`; return its event id."""
        ...

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
        """The stream of `last_event_id` and the (id, message) events stored after it, priming events
        excluded; None when the id is unknown or has expired."""
        ...


def stream_of(event_id: str) -> str | None:
    stream, sep, seq = event_id.rpartition("#")
    return stream if sep and seq.isdigit() else None


class InMemoryEventStore:
    """Bounded in-process event store: `max_events` newest events per stream, `max_streams` streams."""

    def __init__(self, max_events: int = 1000, max_streams: int = 10_000) -> None:
        self.max_events = max_events
        self.max_streams = max_streams
        self._streams: dict[str, deque[tuple[int, dict[str, Any] | None]]] = {}
        self._seq: dict[str, int] = {}

    async def store_event(self, stream_id: str, message: dict[str, Any] | None) -> str:
        events = self._streams.get(stream_id)
        if events is None:
            if len(self._streams) >= self.max_streams:
                # Forget the oldest stream: dicts keep insertion order.
                oldest = next(iter(self._streams))
                del self._streams[oldest]
                self._seq.pop(oldest, None)
            events = self._streams[stream_id] = deque(maxlen=self.max_events)
        seq = self._seq.get(stream_id, 0) + 1
        self._seq[stream_id] = seq
        events.append((seq, message))
        return f"{stream_id}#{seq}"

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
        stream_id = stream_of(last_event_id)
        if stream_id is None or stream_id not in self._streams:
            return None
        after = int(last_event_id.rpartition("#")[2])
        events = [
            (f"{stream_id}#{seq}", msg) for seq, msg in self._streams[stream_id] if seq > after and msg is not None
        ]
        return stream_id, events
