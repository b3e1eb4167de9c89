"""A short-lived per-process cache of Redis sessions, invalidated over the broker.

In JSON mode the session read is a call's only Redis round trip, and under load most of its cost is
redis-py's, on the client. A replica that read a session a moment ago serves the next calls of that
session from memory for `ttl` seconds. Correctness does not rest on the TTL:

- a replica that saves or deletes a session publishes its id on the broker; every replica drops its copy
  (the replica that deleted it first), so a session deleted anywhere is unknown everywhere (404);
- entries are trusted only while this process's broker connection is up and has not reconnected since they
  were cached (messages published meanwhile may be lost): a Redis outage or restart empties the cache at
  once, and the calls go to Redis (unknown session: 404, as without a cache);
- a read that overlaps an invalidation is not cached (it may have read the value before the change).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcpfusion.mcp.sessions import Session

    from .broker import RedisBroker

TOPIC = "sessions:changed"


class SessionCache:
    def __init__(self, broker: RedisBroker, ttl: float = 1.0, max_entries: int = 10_000) -> None:
        self.broker = broker
        self.ttl = ttl
        self.max_entries = max_entries
        self.epoch = 0  # invalidations seen so far (a read started before one is not cached)
        self._entries: dict[str, tuple[Session, float, int]] = {}  # id -> (session, cached at, connection)
        self._listening = False
        self._listener: asyncio.Task[None] | None = None

    def get(self, session_id: str) -> Session | None:
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        session, cached_at, connection = entry
        if time.monotonic() - cached_at > self.ttl or not self._trusted(connection):
            del self._entries[session_id]
            return None
        return session

    def put(self, session: Session, epoch: int) -> None:
        """Keep `session`, read from Redis by a read that started at `epoch`."""
        self._listen()
        if epoch != self.epoch or not self._trusted(self.broker.connections):
            return
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[session.id] = (session, time.monotonic(), self.broker.connections)

    async def changed(self, session_id: str) -> None:
        """`session_id` was saved or deleted here: drop it here, then on every other replica."""
        self._drop(session_id)
        await self.broker.publish(TOPIC, session_id)

    def _drop(self, session_id: str) -> None:
        self.epoch += 1
        self._entries.pop(session_id, None)

    def _trusted(self, connection: int) -> bool:
        return self._listening and self.broker.ready and connection == self.broker.connections

    def _listen(self) -> None:
        if self._listener is None or self._listener.done():
            task = self._listener = asyncio.create_task(self._follow(), name="mcpfusion-session-cache")
            # A broker outage ends the listener (nothing is cached meanwhile); the next read starts a new one.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _follow(self) -> None:
        try:
            async with self.broker.subscribe(TOPIC) as sub:
                self._listening = True
                while True:
                    self._drop(str(await sub.get()))
        finally:
            self._listening = False
            self._entries.clear()

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
