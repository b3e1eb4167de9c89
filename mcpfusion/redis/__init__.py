"""Redis implementations of the transport's pluggable stores, for running several replicas without
sticky sessions: sessions, resumable SSE streams (Redis Streams) and cross-replica pub/sub.

Switched on by `MCPFUSION_REDIS_URL` (or `TransportSettings(redis_url=...)`); explicit
`session_store=` / `event_store=` / `broker=` settings still win. Or build them yourself:

    stores = from_url("redis://localhost:6379/0")
    fusion = MCPFusion("billing", session_store=stores.sessions, event_store=stores.events,
                       broker=stores.broker)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfusion.extras import require

require("redis", extra="redis", feature="mcpfusion.redis (sessions and streams shared by replicas)")

import redis.asyncio as aioredis  # noqa: E402 - after the check, so a missing extra says which one

from mcpfusion.mcp.sessions import SessionLimits  # noqa: E402

from .broker import RedisBroker  # noqa: E402
from .client import connect  # noqa: E402
from .events import RedisEventStore  # noqa: E402
from .session_cache import SessionCache  # noqa: E402
from .sessions import RedisSessionStore, SessionStoreUnavailable  # noqa: E402

__all__ = [
    "RedisBroker",
    "RedisEventStore",
    "RedisSessionStore",
    "RedisStores",
    "SessionStoreUnavailable",
    "connect",
    "from_url",
]


@dataclass
class RedisStores:
    """The three stores of one process, sharing one client (one connection pool)."""

    client: aioredis.Redis
    sessions: RedisSessionStore
    events: RedisEventStore
    broker: RedisBroker

    async def aclose(self) -> None:
        if self.sessions.cache is not None:
            await self.sessions.cache.aclose()
        await self.broker.aclose()
        await self.client.aclose()

    async def ping(self) -> bool:
        """Readiness: one round trip to Redis that writes, as every new session does: raises while Redis is
        unreachable or refuses writes (out of memory under `noeviction`, a read-only replica)."""
        return bool(await self.client.set(f"{self.sessions.prefix}ready", "1", px=10_000))


def from_url(
    url: str,
    *,
    prefix: str = "mcpf:",
    idle_timeout: float = 1800.0,
    max_sessions: int = 10_000,
    limits: SessionLimits | None = None,
    max_events: int = 1000,
    retention: float | None = None,
    finished_retention: float = 60.0,
    session_cache_seconds: float = 1.0,
    **client_options: Any,
) -> RedisStores:
    """Stores on the Redis at `url`. Keys and channels start with `prefix` (several servers may share
    one Redis with different prefixes). Streams expire `retention` seconds (default: the session idle
    timeout) after their last event, `finished_retention` seconds after the response that ends a request's
    stream, and keep at most ~`max_events` events each. A session read on a replica is served from its
    memory for `session_cache_seconds` (0: never), dropped everywhere when any replica changes or deletes
    it (see `session_cache`)."""
    client = connect(url, **client_options)
    broker = RedisBroker(client, prefix=prefix)
    cache = SessionCache(broker, session_cache_seconds) if session_cache_seconds > 0 else None
    return RedisStores(
        client=client,
        sessions=RedisSessionStore(client, prefix=prefix, idle_timeout=idle_timeout, max_sessions=max_sessions,
                                   limits=limits, cache=cache),
        events=RedisEventStore(client, prefix=prefix, max_events=max_events,
                               retention=idle_timeout if retention is None else retention,
                               finished_retention=finished_retention),
        broker=broker,
    )
