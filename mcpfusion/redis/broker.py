"""Cross-replica publish/subscribe on Redis pub/sub.

Each process holds one pub/sub connection; local subscriptions fan out from it, so a topic costs one
SUBSCRIBE however many requests of this process listen to it. `subscribe` returns only once Redis has
confirmed the subscription: a reply published right after (e.g. the answer to an elicitation, posted
to another replica) cannot be missed. Messages travel as JSON (tuples arrive as lists).

The connection has one owner, the reader task: it alone connects, reconnects (after a Redis restart) and
reads, then subscribes again to every channel this process wants. Commands only write, and only while the
connection is up; redis-py's `PubSub` reconnects from whichever coroutine notices a failure, and two
coroutines reading one connection during a reconnection is an error.

Pub/sub keeps nothing: what is published while the connection is being re-made is lost. What must not be
(a client's answer to a server request, a cancellation) is published with `publish_kept`, which also keeps it,
in the hash of its session (`kept:{session}`), if something there waits for it: a server request sent and not
yet answered, a call running (`expect` writes those marks, with their deadlines). So a client keeps only answers
the server asked for and cancellations of its calls, bounded in size and number per session; `drop_kept` drops
the hash when the session is deleted, and it expires with the last mark. Once Redis has confirmed every channel
again after a reconnection, each subscription that `recovers` is told `RESUBSCRIBED` and takes what it missed
with `collect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection

from ..mcp.broker import KEPT, REFUSED, RESUBSCRIBED, UNEXPECTED, QueueSubscription
from ..serializer import json_bytes
from .client import UNAVAILABLE
from .events import RedisEventStore

logger = logging.getLogger("mcpfusion.redis")

CONFIRM_TIMEOUT = 5.0
IDLE_PING = 30.0  # seconds without traffic before the reader checks the connection with a PING


RedisSubscription = QueueSubscription  # what `subscribe` yields: messages of its topics in arrival order

MAX_KEPT = 16
"""Messages one session may have kept at a time (answers and cancellations waiting to be collected)."""
MAX_KEPT_BYTES = 1024 * 1024
"""Bytes (JSON) one session may have kept at a time: a larger answer is only published (a waiter between two
connections misses it, and its client is told 503 to send it again)."""
MAX_MARKS = 256
"""Boxes one session may have expected at a time (server requests awaiting answers, calls running); past that a
call is not marked, and a cancellation of it is only published."""

# A session's hash holds `w:{box}` (its deadline, ms since the epoch: something waits on the box until then) and
# `k:{box}` (a message kept for it). Marks past their deadline count for nothing and are dropped when the hash
# is full; the hash itself expires with its last deadline.
_LUA_HELPERS = """
local function prune(key, now)
  for _, name in ipairs(redis.call('HKEYS', key)) do
    local box = string.sub(name, 3)
    if string.sub(name, 1, 2) == 'w:' then
      if tonumber(redis.call('HGET', key, name)) <= now then redis.call('HDEL', key, name, 'k:' .. box) end
    elseif redis.call('HEXISTS', key, 'w:' .. box) == 0 then
      redis.call('HDEL', key, name)
    end
  end
end
"""

# Expect a message in box ARGV[2 + 2i] of the session hash KEYS[i] until ARGV[3 + 2i] (ms), for at most ARGV[2]
# boxes a session (ARGV[1]: now, ms; ARGV[#ARGV]: '1' to drop what an earlier use of the box left). Returns, per
# entry, 1 if expected, 0 if the session has too many.
_EXPECT = _LUA_HELPERS + """
local now, cap, fresh = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[#ARGV] == '1'
local done = {}
for i, key in ipairs(KEYS) do
  local box, deadline = ARGV[1 + 2 * i], tonumber(ARGV[2 + 2 * i])
  local field = 'w:' .. box
  if redis.call('HEXISTS', key, field) == 0 and redis.call('HLEN', key) >= cap then prune(key, now) end
  if redis.call('HEXISTS', key, field) == 1 or redis.call('HLEN', key) < cap then
    redis.call('HSET', key, field, deadline)
    if fresh then redis.call('HDEL', key, 'k:' .. box) end
    if redis.call('PTTL', key) < deadline - now then redis.call('PEXPIRE', key, deadline - now) end
    done[i] = 1
  else
    done[i] = 0
  end
end
return done
"""

# Publish ARGV[2] on channel ARGV[6] and keep it as box ARGV[1] of the session hash KEYS[1] if that box is
# expected (ARGV[3]: now, ms) and the session's kept messages stay within ARGV[5] in number and ARGV[4] in bytes;
# a box kept already keeps its first message. A Redis out of memory refuses the HSET, not the PUBLISH.
# Returns {receivers, 'kept' | 'unexpected' | 'refused'}.
_KEEP_AND_PUBLISH = """
local key, box, data = KEYS[1], ARGV[1], ARGV[2]
local status = 'unexpected'
local deadline = tonumber(redis.call('HGET', key, 'w:' .. box) or '0')
if deadline > tonumber(ARGV[3]) then
  if redis.call('HEXISTS', key, 'k:' .. box) == 1 then
    status = 'kept'
  else
    local count, size = 0, #data
    for _, name in ipairs(redis.call('HKEYS', key)) do
      if string.sub(name, 1, 2) == 'k:' then
        count = count + 1
        size = size + redis.call('HSTRLEN', key, name)
      end
    end
    status = 'refused'
    if count < tonumber(ARGV[5]) and size <= tonumber(ARGV[4]) then
      local kept = redis.pcall('HSET', key, 'k:' .. box, data)
      if type(kept) == 'number' then status = 'kept' end
    end
  end
end
return {redis.call('PUBLISH', ARGV[6], data), status}
"""

# Take what is kept in box ARGV[1 + i] of the session hash KEYS[i] (`false` becomes a nil reply); ARGV[1] '1':
# and stop expecting it.
_TAKE = """
local found = {}
for i, key in ipairs(KEYS) do
  local box = ARGV[1 + i]
  local value = redis.call('HGET', key, 'k:' .. box)
  if ARGV[1] == '1' then
    redis.call('HDEL', key, 'k:' .. box, 'w:' .. box)
  elseif value then
    redis.call('HDEL', key, 'k:' .. box)
  end
  found[i] = value
end
return found
"""


class RedisBroker:
    """`Broker` on Redis pub/sub: what one replica publishes reaches subscribers on every replica."""

    distributed = True  # other processes publish too: the transport listens for cross-replica cancels

    def __init__(self, client: aioredis.Redis, *, prefix: str = "mcpf:") -> None:
        self.client = client
        self.prefix = prefix
        self._topics: dict[str, list[RedisSubscription]] = {}
        self._channels: set[str] = set()  # what this process wants subscribed in Redis
        self._conn: AbstractConnection | None = None
        self._ready = False  # connected and subscribed to `_channels` by the reader
        self.connections = 0  # connections the reader made so far (a cache trusts only the current one)
        self._reader: asyncio.Task[None] | None = None
        self._closing = False  # set by aclose(): the reader stops even if a read swallowed its cancellation
        # One SUBSCRIBE in flight at a time, so a confirmation is never mistaken for another's.
        self._lock = asyncio.Lock()
        self._pending: tuple[set[str], asyncio.Future[None]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # UNSUBSCRIBEs that outlive their cancelled caller
        self._rejoining: set[str] = set()  # channels a reconnection subscribed again, not yet confirmed
        self._expect = client.register_script(_EXPECT)
        self._keep = client.register_script(_KEEP_AND_PUBLISH)
        self._take = client.register_script(_TAKE)

    async def publish(self, topic: str, message: Any) -> int:
        data = json_bytes(message)
        return int(await self.client.publish(self.prefix + topic, data))

    async def expect(self, entries: list[tuple[str, str, float]], fresh: bool = True) -> list[bool]:
        """Expect a message in each `(session_id, box, seconds)` for `seconds` (see `publish_kept`); whether each
        is (False: its session has `MAX_MARKS` already). `fresh`: drop what an earlier use of the box left."""
        if not entries:
            return []
        now = _now_ms()
        args: list[Any] = [now, MAX_MARKS]
        for _, box, seconds in entries:
            args += [box, now + max(1, int(seconds * 1000))]
        done = await self._expect(keys=[self._kept(sid) for sid, _, _ in entries], args=[*args, int(fresh)])
        return [bool(flag) for flag in done]

    async def publish_kept(self, topic: str, message: Any, session_id: str, box: str) -> tuple[int, str]:
        """Publish `message` on `topic` and keep it in `box` of `session_id` if something expects it there (see
        `expect`); returns the receivers and `KEPT`, `UNEXPECTED` or `REFUSED` (too large, too many, Redis full).
        Raises when Redis is unreachable."""
        data = json_bytes(message)
        receivers, status = await self._keep(keys=[self._kept(session_id)], args=[
            box, data, _now_ms(), MAX_KEPT_BYTES, MAX_KEPT, self.prefix + topic])
        return int(receivers), {KEPT: KEPT, UNEXPECTED: UNEXPECTED}.get(status, REFUSED)

    async def collect(self, entries: list[tuple[str, str]], forget: bool = False) -> list[Any]:
        """Take the messages kept in each `(session_id, box)` (None where none is), in order: each is taken once.
        `forget`: stop expecting those boxes too (their wait is over)."""
        if not entries:
            return []
        found = await self._take(keys=[self._kept(sid) for sid, _ in entries],
                                 args=[int(forget), *(box for _, box in entries)])
        return [None if value is None else json.loads(value) for value in found]

    async def drop_kept(self, session_id: str) -> None:
        """Forget every box of `session_id` (deleted) and what is kept in them."""
        await self.client.delete(self._kept(session_id))

    def _kept(self, session_id: str) -> str:
        return f"{self.prefix}kept:{session_id}"

    async def publish_event(self, events: Any, stream_id: str, topic: str, message: dict[str, Any]) -> tuple[str, int]:
        """Store `message` in `events` under `stream_id`, then publish `(event_id, message)` on `topic`;
        returns `(event_id, receivers)`. With the Redis event store both happen in one atomic step, so
        every subscriber sees a stream's events in id order."""
        if isinstance(events, RedisEventStore):
            return await events.store_and_publish(stream_id, message, self.prefix + topic)
        event_id = await events.store_event(stream_id, message)
        return event_id, await self.publish(topic, (event_id, message))

    @contextlib.asynccontextmanager
    async def subscribe(self, *topics: str) -> AsyncIterator[RedisSubscription]:
        sub = RedisSubscription()
        fresh = []
        for topic in topics:
            subs = self._topics.setdefault(topic, [])
            if not subs:
                fresh.append(topic)
            subs.append(sub)
        try:
            if fresh:
                await self._confirm_subscribe(fresh)
            yield sub
        finally:
            if self._leave(sub, topics):
                # Shielded: an aborted stream is cancelled at every await (anyio cancel scopes), and a
                # cancelled UNSUBSCRIBE would leave the channel subscribed for the life of the process.
                await asyncio.shield(self._spawn(self._prune()))

    def _leave(self, sub: RedisSubscription, topics: tuple[str, ...]) -> bool:
        """Drop `sub` from `topics` (no await: a cancellation cannot stop half-way); whether a topic emptied."""
        emptied = False
        for topic in topics:
            subs = self._topics.get(topic)
            if subs is None:
                continue
            if sub in subs:
                subs.remove(sub)
            if not subs:
                del self._topics[topic]
                emptied = True
        return emptied

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)  # a strong reference: the loop keeps only weak ones
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def ready(self) -> bool:
        """Connected and subscribed: messages published now reach this process."""
        return self._ready

    def has_subscribers(self, topic: str) -> bool:
        """Whether this process listens to `topic` (other replicas are not asked)."""
        return bool(self._topics.get(topic))

    async def _prune(self) -> None:
        """UNSUBSCRIBE every channel no local topic uses any more, so `_channels` matches `_topics`."""
        async with self._lock:
            stale = [c for c in self._channels if c[len(self.prefix):] not in self._topics]
            if not stale:
                return
            # Unconfirmed on purpose: Redis answers in order, so a later SUBSCRIBE's confirmation
            # still means "subscribed", whatever happened to this UNSUBSCRIBE.
            self._channels.difference_update(stale)
            await self._send("UNSUBSCRIBE", stale)

    async def _send(self, command: str, channels: list[str]) -> None:
        """Write `command` if connected; otherwise the reader's next (re)connection applies `_channels`."""
        conn = self._conn
        if self._ready and conn is not None and conn.is_connected:  # never connects (the reader does)
            try:
                await conn.send_command(command, *channels)
            except UNAVAILABLE:
                self._ready = False  # the reader reconnects and subscribes to `_channels`

    async def _confirm_subscribe(self, topics: list[str]) -> None:
        """SUBSCRIBE to `topics` and wait for Redis to confirm it."""
        async with self._lock:
            channels = [self.prefix + t for t in topics]
            self._channels.update(channels)
            future = asyncio.get_running_loop().create_future()
            self._pending = (set(channels), future)
            try:
                await self._send("SUBSCRIBE", channels)
                if self._reader is None or self._reader.done():
                    self._reader = asyncio.create_task(self._read(), name="mcpfusion-redis-broker")
                # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that comes
                # with the confirmation, and the cancelled subscriber then waits for messages forever.
                async with asyncio.timeout(CONFIRM_TIMEOUT):
                    await asyncio.shield(future)
            finally:
                self._pending = None

    async def _connect(self) -> AbstractConnection:
        conn = self._conn
        if conn is None:
            conn = self._conn = self.client.connection_pool.make_connection()  # type: ignore[no-untyped-call]
            # The reader PINGs this connection itself; redis-py's health check would read a pub/sub message
            # as the PING's answer.
            conn.health_check_interval = 0
        else:
            await conn.disconnect()
        await conn.connect()
        self._rejoining = set(self._channels)  # (read by `_dispatch`, in this task, after this returns)
        if self._channels:
            await conn.send_command("SUBSCRIBE", *self._channels)
        self.connections += 1
        self._ready = True
        return conn

    async def _read(self) -> None:
        """Deliver messages to subscriptions and confirmations to `_confirm_subscribe`; (re)connect when needed."""
        healthy, pinged = True, False
        while not self._closing:
            try:
                conn = self._conn
                if not self._ready or conn is None or not conn.is_connected:
                    self._ready = False
                    conn = await self._connect()
                    if not healthy:
                        logger.warning("redis pub/sub connection restored")
                    healthy, pinged = True, False
                response = await conn.read_response(timeout=IDLE_PING, disconnect_on_error=False,
                                                    push_request=True)
                if response is None:  # nothing for IDLE_PING seconds
                    if pinged:
                        raise ConnectionError("no answer to PING")
                    pinged = True  # a live server answers it (a half-open connection does not)
                    await conn.send_command("PING")
                    continue
                pinged = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the one reader die: every GET stream depends on it
                if healthy:
                    logger.warning("redis pub/sub connection lost (%s); reconnecting", exc)
                healthy, self._ready = False, False
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        await self._conn.disconnect()
                await asyncio.sleep(0.1)
                continue
            if isinstance(response, list) and len(response) >= 3:
                self._dispatch(str(response[0]).lower(), response[1], response[2])

    def _dispatch(self, kind: str, channel: Any, data: Any) -> None:
        channel = channel.decode() if isinstance(channel, bytes) else str(channel)
        if kind == "message":
            subs = self._topics.get(channel[len(self.prefix):])
            if subs:
                payload = json.loads(data)
                for sub in subs:
                    sub.queue.put_nowait(payload)
        elif kind == "subscribe":
            if self._pending is not None:
                waiting, future = self._pending
                waiting.discard(channel)
                if not waiting and not future.done():
                    future.set_result(None)
            if self._rejoining:
                self._rejoining.discard(channel)
                if not self._rejoining:
                    self._tell_resubscribed()

    def _tell_resubscribed(self) -> None:
        """Every channel is subscribed again after a reconnection: what was published meanwhile is lost, so
        each subscription that `recovers` is told, once, to collect what was kept for it."""
        told: set[int] = set()
        for subs in self._topics.values():
            for sub in subs:
                if sub.recovers and id(sub) not in told:
                    told.add(id(sub))
                    sub.queue.put_nowait(RESUBSCRIBED, 0)

    async def aclose(self) -> None:
        self._closing = True
        if self._reader is not None:
            reader = self._reader
            reader.cancel()
            # A read in flight may swallow the cancellation: wait a bounded time, never forever.
            await asyncio.wait({reader}, timeout=2.0)
            if reader.done() and not reader.cancelled():
                with contextlib.suppress(Exception):
                    reader.result()
            self._reader = None
        if self._conn is not None:
            with contextlib.suppress(*UNAVAILABLE):
                await self._conn.disconnect()
            self._conn = None
        self._ready = False


def _now_ms() -> int:
    """Now, in ms since the epoch: the clock of the deadlines in a session's hash, shared by the replicas."""
    return int(time.time() * 1000)
