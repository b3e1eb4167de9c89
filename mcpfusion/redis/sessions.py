"""Handshake-era sessions in Redis: one JSON value per session whose TTL is the idle timeout.

Every `get` refreshes the TTL (GET + PEXPIRE in a script shared by the reads of one event-loop turn,
see `coalesce`; the one round trip of a call in JSON mode), so a session lives
while it is used on any replica. A sorted set of ids scored by expiry time enforces `max_sessions`
across replicas (approximately: replicas may race on the last free slots, never by more than their
number; an idle session may hold its slot up to a quarter of the idle timeout longer).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any

import redis.asyncio as aioredis

from mcpfusion.mcp.sessions import Session, SessionLimitError

from .client import UNAVAILABLE
from .coalesce import Coalescer
from .session_cache import SessionCache

logger = logging.getLogger("mcpfusion.redis")
_FIELDS = frozenset(f.name for f in dataclasses.fields(Session)) - {"last_seen"}


# GET + PEXPIRE (= GETEX) of every session read in one event-loop turn; `false` becomes a nil reply.
_TOUCH_ALL = """
local values = {}
for i, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if value then redis.call('PEXPIRE', key, ARGV[1]) end
  values[i] = value or false
end
return values
"""


class SessionStoreUnavailable(SessionLimitError):
    """Redis cannot be reached; the transport answers 503 (retry later) like a full store."""


class RedisSessionStore:
    """`SessionStore` on Redis. Unreachable Redis: `get` answers "unknown session" (the client gets 404 and
    re-initializes, as after a restart that lost the data), `create` raises (503)."""

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = "mcpf:", idle_timeout: float = 1800.0,
        max_sessions: int = 10_000, cache: SessionCache | None = None,
    ) -> None:
        self.client = client
        self.cache = cache  # recently read sessions, invalidated over the broker (`session_cache`)
        self.prefix = prefix
        self.index = f"{prefix}sessions"
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._ttl_ms = max(1, int(idle_timeout * 1000))
        self._reads = Coalescer(client.register_script(_TOUCH_ALL), [self._ttl_ms])
        # session id -> when this process last renewed its index entry (bounded; see `get`)
        self._indexed: dict[str, float] = {}

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    @staticmethod
    def _dump(session: Session) -> str:
        data = session.to_dict()
        data.pop("last_seen", None)  # a per-process monotonic clock; Redis's TTL is the idle clock
        return json.dumps(data, separators=(",", ":"))

    def _expiry(self) -> float:
        return time.time() + self.idle_timeout * 1.25

    def _remember(self, session_id: str, now: float) -> None:
        if len(self._indexed) >= 2 * self.max_sessions:
            self._indexed.clear()  # forgetting only costs one extra ZADD per session
        self._indexed[session_id] = now

    async def create(self, session: Session) -> None:
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.zremrangebyscore(self.index, "-inf", time.time())
                pipe.zcard(self.index)
                _, count = await pipe.execute()
                if count >= self.max_sessions:
                    raise SessionLimitError(f"too many sessions (max {self.max_sessions})")
                pipe.set(self._key(session.id), self._dump(session), px=self._ttl_ms, nx=True)
                pipe.zadd(self.index, {session.id: self._expiry()})
                await pipe.execute()
            self._remember(session.id, time.monotonic())
        except UNAVAILABLE as exc:
            logger.warning("session store unavailable: %s", exc)
            raise SessionStoreUnavailable("the session store is unavailable") from None

    async def get(self, session_id: str) -> Session | None:
        cache = self.cache
        epoch = 0
        if cache is not None:
            cached = cache.get(session_id)
            if cached is not None:
                return cached
            epoch = cache.epoch
        try:
            raw = await self._reads.call(self._key(session_id))
            if raw is None:
                self._indexed.pop(session_id, None)
                return None
            # The hot path is the one GETEX above. The index entry (for the cap) is renewed at most every
            # quarter of the idle timeout per process; its score reaches a quarter past the key's expiry
            # to cover that lag, so a live session is never counted out.
            now = time.monotonic()
            if now - self._indexed.get(session_id, -self.idle_timeout) > self.idle_timeout / 4:
                self._remember(session_id, now)
                await self.client.zadd(self.index, {session_id: self._expiry()}, xx=True)
        except UNAVAILABLE as exc:
            logger.warning("session store unavailable: %s", exc)
            return None
        data: dict[str, Any] = json.loads(raw)
        # Tolerate sessions written by another version of the server (rolling deploys): unknown fields
        # are dropped, missing ones take their defaults.
        session = Session.from_dict({k: v for k, v in data.items() if k in _FIELDS})
        if cache is not None:
            cache.put(session, epoch)
        return session

    async def save(self, session: Session) -> None:
        # XX: a session deleted or expired meanwhile stays gone, as in the in-memory store.
        await self.client.set(self._key(session.id), self._dump(session), px=self._ttl_ms, xx=True)
        if self.cache is not None:
            await self.cache.changed(session.id)

    async def delete(self, session_id: str) -> bool:
        self._indexed.pop(session_id, None)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.delete(self._key(session_id))
            pipe.zrem(self.index, session_id)
            deleted, _ = await pipe.execute()
        if self.cache is not None:  # gone here at once, on the other replicas when they get the message
            await self.cache.changed(session_id)
        return bool(deleted)

    async def count(self) -> int:
        """Live sessions (after dropping expired ids from the index)."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(self.index, "-inf", time.time())
            pipe.zcard(self.index)
            _, count = await pipe.execute()
        return int(count)
