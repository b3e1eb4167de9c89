"""Resumable SSE streams in Redis Streams: one stream key per SSE stream, any replica can replay it.

Redis gives every entry a unique, increasing id `ms-seq`; the event id sent to the client is
`{stream}#{ms * 10**6 + seq}`, the integer form the transport expects (`parse_event_id`, ordering by the
number after `#`). Retention is bounded twice: `MAXLEN ~ max_events` entries per stream, and the whole
stream expires `retention` seconds after its last event, or `finished_retention` seconds after the
event that answers its request (a client resumes a finished call within its `retry` delay, not half an
hour later; at 1000 calls/s that is the difference between ~60k and ~2M keys in Redis).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from mcpfusion.mcp.events import NotIssued, StoreRefused, event_id, parse_event_id
from mcpfusion.serializer import json_bytes

from .coalesce import Coalescer

_SEQ = 10**6  # entries per millisecond one Redis stream can hold in this encoding (far above reality)
_MAX_NUMBER = 2**64 * _SEQ


T = TypeVar("T")


async def _refusable(write: Awaitable[T]) -> T:
    """`await write`, with Redis's refusal of it (out of memory under `noeviction`, a read-only replica) told
    as `StoreRefused`: nobody should wait for it to pass."""
    try:
        return await write
    except ResponseError as exc:
        raise StoreRefused(str(exc)) from exc


def _event_number(entry_id: str) -> int:
    ms, _, seq = entry_id.partition("-")
    return int(ms) * _SEQ + int(seq or 0)


def _entry_id(number: int) -> str:
    return f"{number // _SEQ}-{number % _SEQ}"


# The appends of one event-loop turn, as one script call (see `coalesce`). ARGV: max_events, retention,
# then per stream key its data (`_STORE_ALL`) or its data, channel, event-id prefix and retention
# (`_PUBLISH_ALL`).
_STORE_ALL = """
local ids = {}
for i, key in ipairs(KEYS) do
  ids[i] = redis.call('XADD', key, 'MAXLEN', '~', ARGV[1], '*', 'm', ARGV[2 + i])
  redis.call('EXPIRE', key, ARGV[2])
end
return ids
"""

# XADD + EXPIRE + PUBLISH per event, each atomic: subscribers see events in stream order even when several
# replicas append to one stream. The published payload is the broker's JSON encoding of
# `[event_id, message]`; Lua numbers are doubles, so the event number is built as a string (`ms` followed
# by `seq` padded to 6 digits == ms * 10**6 + seq).
_PUBLISH_ALL = """
local out = {}
for i, key in ipairs(KEYS) do
  local at = 2 + (i - 1) * 4
  local data = ARGV[at + 1]
  local id = redis.call('XADD', key, 'MAXLEN', '~', ARGV[1], '*', 'm', data)
  redis.call('EXPIRE', key, ARGV[at + 4])
  local dash = string.find(id, '-', 1, true)
  local seq = string.sub(id, dash + 1)
  local num = string.sub(id, 1, dash - 1) .. string.rep('0', 6 - string.len(seq)) .. seq
  local receivers = redis.call('PUBLISH', ARGV[at + 2], '[' .. ARGV[at + 3] .. num .. '",' .. data .. ']')
  out[i] = {num, receivers}
end
return out
"""


class RedisEventStore:
    """`EventStore` on Redis Streams (XADD to store, XRANGE to replay)."""

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = "mcpf:", max_events: int = 1000, retention: float = 1800.0,
        finished_retention: float = 60.0,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_events = max_events
        self.retention = max(1, int(retention))
        self.finished_retention = max(1, int(min(finished_retention, retention)))

        shared = [self.max_events, self.retention]
        self._stores = Coalescer(client.register_script(_STORE_ALL), shared, arity=1)
        self._publishes = Coalescer(client.register_script(_PUBLISH_ALL), shared, arity=4)

    def _key(self, stream_id: str) -> str:
        return f"{self.prefix}events:{stream_id}"

    async def store_and_publish(self, stream_id: str, message: dict[str, Any], channel: str) -> tuple[str, int]:
        """Store `message` and publish `[event_id, message]` (JSON) on the Redis `channel`, atomically;
        returns the event id and how many subscribers got it."""
        data = json_bytes(message)
        id_prefix = json.dumps(f"{stream_id}#")[:-1]  # the opening quote and escaped text, no closing quote
        # A response ends its request's stream (never the session's GET stream, which holds no responses).
        finished = "method" not in message
        retention = self.finished_retention if finished else self.retention
        number, receivers = await _refusable(
            self._publishes.call(self._key(stream_id), data, channel, id_prefix, retention))
        return event_id(stream_id, int(number)), int(receivers)

    async def store_event(self, stream_id: str, message: dict[str, Any] | None) -> str:
        data = b"" if message is None else json_bytes(message)
        entry_id = await _refusable(self._stores.call(self._key(stream_id), data))
        return event_id(stream_id, _event_number(entry_id))

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            return None
        stream_id, number = parsed
        key = self._key(stream_id)
        if number >= _MAX_NUMBER:  # past any entry id (Redis would reject it as one), so past the stream's last
            if await self.client.exists(key):
                raise NotIssued(last_event_id)
            return None
        after = _entry_id(number)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xrevrange(key, max="+", min="-", count=1)  # the last entry: trimming drops the oldest only
            pipe.xrange(key, min=f"({after}", max="+")
            newest, entries = await pipe.execute()
        if not newest:  # (a stream key never stays empty: gone, so expired or never issued)
            return None
        if number > _event_number(newest[0][0]):
            raise NotIssued(last_event_id)
        events = [
            (event_id(stream_id, _event_number(entry_id)), json.loads(fields["m"]))
            for entry_id, fields in entries
            if fields.get("m")  # priming events are stored empty and never replayed
        ]
        return stream_id, events
