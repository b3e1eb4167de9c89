"""Handshake-era sessions in Redis: one JSON value per session whose TTL is the idle timeout.

Every `get` refreshes the TTL, so a session lives while it is used on any replica. A sorted set
of ids scored by expiry time enforces `max_sessions` across replicas (approximately: replicas may race
on the last free slots, never by more than their number).
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

logger = logging.getLogger("mcpfusion.redis")
_FIELDS = frozenset(f.name for f in dataclasses.fields(Session)) - {"last_seen"}


# Read a session and renew its idle timeout (key TTL and index score) in one command: on the hot path a
# script is cheaper than a redis-py pipeline, and it is one round trip either way.
_TOUCH = """
local value = redis.call('GET', KEYS[1])
if value then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[3])
end
return value
"""


class SessionStoreUnavailable(SessionLimitError):
    """Redis cannot be reached; the transport answers 503 (retry later) like a full store."""


class RedisSessionStore:
    """`SessionStore` on Redis. Unreachable Redis: `get` answers "unknown session" (the client gets 404 and
    re-initializes, as after a restart that lost the data), `create` raises (503)."""

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = "mcpf:", idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.index = f"{prefix}sessions"
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._ttl_ms = max(1, int(idle_timeout * 1000))
        self._touch = client.register_script(_TOUCH)

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    @staticmethod
    def _dump(session: Session) -> str:
        data = session.to_dict()
        data.pop("last_seen", None)  # a per-process monotonic clock; Redis's TTL is the idle clock
        return json.dumps(data, separators=(",", ":"))

    def _expiry(self) -> float:
        return time.time() + self.idle_timeout

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
        except UNAVAILABLE as exc:
            logger.warning("session store unavailable: %s", exc)
            raise SessionStoreUnavailable("the session store is unavailable") from None

    async def get(self, session_id: str) -> Session | None:
        try:
            raw = await self._touch(keys=[self._key(session_id), self.index],
                                    args=[self._ttl_ms, self._expiry(), session_id])
        except UNAVAILABLE as exc:
            logger.warning("session store unavailable: %s", exc)
            return None
        if raw is None:
            return None
        data: dict[str, Any] = json.loads(raw)
        # Tolerate sessions written by another version of the server (rolling deploys): unknown fields
        # are dropped, missing ones take their defaults.
        return Session.from_dict({k: v for k, v in data.items() if k in _FIELDS})

    async def save(self, session: Session) -> None:
        # XX: a session deleted or expired meanwhile stays gone, as in the in-memory store.
        await self.client.set(self._key(session.id), self._dump(session), px=self._ttl_ms, xx=True)

    async def delete(self, session_id: str) -> bool:
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.delete(self._key(session_id))
            pipe.zrem(self.index, session_id)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def count(self) -> int:
        """Live sessions (after dropping expired ids from the index)."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(self.index, "-inf", time.time())
            pipe.zcard(self.index)
            _, count = await pipe.execute()
        return int(count)
