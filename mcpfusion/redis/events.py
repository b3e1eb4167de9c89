"""Resumable SSE streams in Redis Streams: one stream key per SSE stream, any replica can replay it.

Redis gives every entry a unique, increasing id `ms-seq`; the event id sent to the client is
`{stream}#{ms * 10**6 + seq}`, the integer form the transport expects (`stream_of`, ordering by the
number after `#`). Retention is bounded twice: `MAXLEN ~ max_events` entries per stream, and the whole
stream expires `retention` seconds after its last event.
"""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from mcpfusion.mcp.events import stream_of

_SEQ = 10**6  # entries per millisecond one Redis stream can hold in this encoding (far above reality)
_MAX_NUMBER = 2**64 * _SEQ


def _event_number(entry_id: str) -> int:
    ms, _, seq = entry_id.partition("-")
    return int(ms) * _SEQ + int(seq or 0)


def _entry_id(number: int) -> str:
    return f"{number // _SEQ}-{number % _SEQ}"


class RedisEventStore:
    """`EventStore` on Redis Streams (XADD to store, XRANGE to replay)."""

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = "mcpf:", max_events: int = 1000, retention: float = 1800.0
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_events = max_events
        self.retention = max(1, int(retention))

    def _key(self, stream_id: str) -> str:
        return f"{self.prefix}events:{stream_id}"

    async def store_event(self, stream_id: str, message: dict[str, Any] | None) -> str:
        key = self._key(stream_id)
        data = "" if message is None else json.dumps(message, separators=(",", ":"))
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xadd(key, {"m": data}, maxlen=self.max_events, approximate=True)
            pipe.expire(key, self.retention)
            entry_id, _ = await pipe.execute()
        return f"{stream_id}#{_event_number(entry_id)}"

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
        stream_id = stream_of(last_event_id)
        if stream_id is None:
            return None
        number = int(last_event_id.rpartition("#")[2][:40])
        if number >= _MAX_NUMBER:  # not an id this store issued (Redis would reject it as an entry id)
            return None
        key = self._key(stream_id)
        after = _entry_id(number)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.exists(key)
            pipe.xrange(key, min=f"({after}", max="+")
            exists, entries = await pipe.execute()
        if not exists:
            return None
        events = [
            (f"{stream_id}#{_event_number(entry_id)}", json.loads(fields["m"]))
            for entry_id, fields in entries
            if fields.get("m")  # priming events are stored empty and never replayed
        ]
        return stream_id, events
