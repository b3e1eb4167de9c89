"""Handshake-era sessions in Redis: one JSON value per session whose TTL is the idle timeout.

Every `get` refreshes the TTL (GET + PEXPIRE in a script shared by the reads of one event-loop turn,
see `coalesce`; the one round trip of a call in JSON mode), so a session lives
while it is used on any replica. A sorted set of ids scored by expiry time enforces `max_sessions`
across replicas (approximately: replicas may race on the last free slots, never by more than their
number; an idle session may hold its slot up to a quarter of the idle timeout longer).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

import redis.asyncio as aioredis

from mcpfusion.mcp.sessions import Session, SessionLimitError, SessionLimits

from .client import UNAVAILABLE
from .coalesce import Coalescer
from .session_cache import SessionCache

logger = logging.getLogger("mcpfusion.redis")
_FIELDS = frozenset(Session._fields) - {"last_seen"}


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
    """Redis cannot be reached; the transport answers 503 with Retry-After (never 404: the session may
    well exist, and a 404 would make the client re-initialize and lose its state)."""


class RedisSessionStore:
    """`SessionStore` on Redis. Unreachable Redis: every operation raises `SessionStoreUnavailable`."""

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = "mcpf:", idle_timeout: float = 1800.0,
        max_sessions: int = 10_000, limits: SessionLimits | None = None, cache: SessionCache | None = None,
    ) -> None:
        self.client = client
        self.cache = cache  # recently read sessions, invalidated over the broker (`session_cache`)
        self.prefix = prefix
        self.index = f"{prefix}sessions"
        self.idle_timeout = idle_timeout
        self.limits = limits or SessionLimits(total=max_sessions)
        self.max_sessions = self.limits.total
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

    def _indexes(self, session: Session) -> list[str]:
        """The global index, then one per principal and per tenant the session has (for the quotas)."""
        keys = [self.index]
        for kind, value in (("p", session.principal), ("t", session.tenant)):
            if value:
                keys.append(f"{self.index}:{kind}:{hashlib.sha256(value.encode()).hexdigest()[:32]}")
        return keys

    async def create(self, session: Session) -> None:
        indexes = self._indexes(session)
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                now = time.time()
                for index in indexes:
                    pipe.zremrangebyscore(index, "-inf", now)
                    pipe.zcard(index)
                counts = iter((await pipe.execute())[1::2])  # in `_indexes` order
                total = next(counts)
                principal = next(counts) if session.principal else 0
                tenant = next(counts) if session.tenant else 0
                refusal = self.limits.refuse(total, principal, tenant)
                if refusal is not None:
                    raise refusal
                pipe.set(self._key(session.id), self._dump(session), px=self._ttl_ms, nx=True)
                expiry = self._expiry()
                for index in indexes:
                    pipe.zadd(index, {session.id: expiry})
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
            session = self._load(raw)
            # The hot path is the one GETEX above. The index entries (for the caps) are renewed at most every
            # quarter of the idle timeout per process; their score reaches a quarter past the key's expiry
            # to cover that lag, so a live session is never counted out.
            now = time.monotonic()
            if now - self._indexed.get(session_id, -self.idle_timeout) > self.idle_timeout / 4:
                self._remember(session_id, now)
                expiry = self._expiry()
                async with self.client.pipeline(transaction=False) as pipe:
                    for index in self._indexes(session):
                        pipe.zadd(index, {session_id: expiry}, xx=True)
                    await pipe.execute()
        except UNAVAILABLE as exc:
            logger.warning("session store unavailable: %s", exc)
            raise SessionStoreUnavailable("the session store is unavailable") from None
        if cache is not None:
            cache.put(session, epoch)
        return session

    @staticmethod
    def _load(raw: str | bytes) -> Session:
        data: dict[str, Any] = json.loads(raw)
        # Tolerate sessions written by another version of the server (rolling deploys): unknown fields
        # are dropped, missing ones take their defaults.
        return Session.from_dict({k: v for k, v in data.items() if k in _FIELDS})

    async def save(self, session: Session) -> None:
        # XX: a session deleted or expired meanwhile stays gone, as in the in-memory store.
        try:
            await self.client.set(self._key(session.id), self._dump(session), px=self._ttl_ms, xx=True)
        except UNAVAILABLE as exc:
            raise SessionStoreUnavailable("the session store is unavailable") from exc
        if self.cache is not None:
            await self.cache.changed(session.id)

    async def delete(self, session_id: str) -> bool:
        self._indexed.pop(session_id, None)
        try:
            raw = await self.client.get(self._key(session_id))
            indexes = self._indexes(self._load(raw)) if raw else [self.index]
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.delete(self._key(session_id))
                for index in indexes:
                    pipe.zrem(index, session_id)
                deleted = (await pipe.execute())[0]
        except UNAVAILABLE as exc:
            raise SessionStoreUnavailable("the session store is unavailable") from exc
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
