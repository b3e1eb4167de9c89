"""Cross-replica publish/subscribe on Redis pub/sub.

Each process holds one pub/sub connection; local subscriptions fan out from it, so a topic costs one
SUBSCRIBE however many requests of this process listen to it. `subscribe` returns only once Redis has
confirmed the subscription: a reply published right after (e.g. the answer to an elicitation, posted
to another replica) cannot be missed. Messages travel as JSON (tuples arrive as lists).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub

from .client import UNAVAILABLE
from .events import RedisEventStore

logger = logging.getLogger("mcpfusion.redis")

CONFIRM_TIMEOUT = 5.0


class RedisSubscription:
    """What `subscribe` yields: messages of its topics in arrival order."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def get(self) -> Any:
        return await self.queue.get()

    async def __aiter__(self) -> AsyncIterator[Any]:
        while True:
            yield await self.queue.get()


class RedisBroker:
    """`Broker` on Redis pub/sub: what one replica publishes reaches subscribers on every replica."""

    distributed = True  # other processes publish too: the transport listens for cross-replica cancels

    def __init__(self, client: aioredis.Redis, *, prefix: str = "mcpf:") -> None:
        self.client = client
        self.prefix = prefix
        self._topics: dict[str, list[RedisSubscription]] = {}
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        # One SUBSCRIBE/UNSUBSCRIBE in flight at a time, so a confirmation is never mistaken for another's.
        self._lock = asyncio.Lock()
        self._pending: tuple[str, set[str], asyncio.Future[None]] | None = None

    async def publish(self, topic: str, message: Any) -> int:
        data = json.dumps(message, separators=(",", ":"))
        return int(await self.client.publish(self.prefix + topic, data))

    async def publish_event(self, events: Any, stream_id: str, topic: str, message: dict[str, Any]) -> tuple[str, int]:
        """Store `message` in `events` under `stream_id`, then publish `(event_id, message)` on `topic`;
        returns `(event_id, receivers)`. With the Redis event store both happen in one atomic round trip,
        so every subscriber sees a stream's events in id order."""
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
                await self._command("subscribe", fresh)
            yield sub
        finally:
            gone = []
            for topic in topics:
                subs = self._topics.get(topic, [])
                if sub in subs:
                    subs.remove(sub)
                if not subs and self._topics.pop(topic, None) is not None:
                    gone.append(topic)
            if gone:
                with contextlib.suppress(*UNAVAILABLE, asyncio.TimeoutError):
                    await self._command("unsubscribe", gone)

    async def _command(self, kind: str, topics: list[str]) -> None:
        async with self._lock:
            if kind == "unsubscribe":
                # A topic re-subscribed locally while we waited for the lock must stay subscribed.
                topics = [t for t in topics if t not in self._topics]
                if not topics:
                    return
            pubsub = self._pubsub
            if pubsub is None:
                pubsub = self._pubsub = self.client.pubsub()
            channels = [self.prefix + t for t in topics]
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._pending = (kind, set(channels), future)
            try:
                if kind == "subscribe":
                    await pubsub.subscribe(*channels)
                else:
                    await pubsub.unsubscribe(*channels)
                if self._reader is None or self._reader.done():
                    self._reader = asyncio.create_task(self._read(pubsub), name="mcpfusion-redis-broker")
                await asyncio.wait_for(asyncio.shield(future), CONFIRM_TIMEOUT)
            finally:
                self._pending = None

    async def _read(self, pubsub: PubSub) -> None:
        """Deliver messages to local subscriptions and confirmations to `_command`, reconnecting (and so
        re-subscribing, which redis-py does on connect) after Redis went away."""
        healthy = True
        while True:
            try:
                message = await pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the one reader die: every GET stream depends on it
                if healthy:
                    logger.warning("redis pub/sub connection lost (%s); reconnecting", exc)
                healthy = False
                # Drop the dead socket: the next read connects again, and redis-py's connect callback
                # re-subscribes every channel of this process.
                if pubsub.connection is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.connection.disconnect()
                await asyncio.sleep(0.1)
                continue
            if not healthy:
                logger.warning("redis pub/sub connection restored")
                healthy = True
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        channel = message["channel"]
        if kind == "message":
            subs = self._topics.get(channel[len(self.prefix):])
            if subs:
                payload = json.loads(message["data"])
                for sub in subs:
                    sub.queue.put_nowait(payload)
            return
        pending = self._pending
        if pending is not None and pending[0] == kind:
            pending[1].discard(channel)
            if not pending[1] and not pending[2].done():
                pending[2].set_result(None)

    def has_subscribers(self, topic: str) -> bool:
        """Whether this process listens to `topic` (other replicas are not asked)."""
        return bool(self._topics.get(topic))

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, *UNAVAILABLE):
                await self._reader
            self._reader = None
        if self._pubsub is not None:
            with contextlib.suppress(*UNAVAILABLE):
                await self._pubsub.aclose()
            self._pubsub = None
