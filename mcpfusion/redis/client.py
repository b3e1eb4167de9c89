"""The one place a Redis client is configured: short timeouts and a short retry budget.

redis-py's default retry policy backs off for seconds when Redis is down, which turns an outage into
hanging MCP requests; here a request fails fast (or reconnects within ~0.5 s after a restart), and pooled
connections are health-checked so a restart does not surface as errors on the first requests after it.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry  # the asyncio one: the sync class never awaits, so never retries
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

# What a dead or restarting server raises, and what one that answers but refuses the command raises
# (`ResponseError`: out of memory under `noeviction`, a read-only replica, a database index it does not
# have); stores turn these into clear protocol answers (503, retry later), never a 500.
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError, ResponseError)


def connect(url: str, **kwargs: Any) -> aioredis.Redis:
    """An asyncio client for `url` (`redis://host:port/db`), decoding responses to str."""
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_connect_timeout": 1.0,
        "socket_timeout": 5.0,
        "retry": Retry(ExponentialBackoff(cap=0.2, base=0.02), 3),
        # A pooled connection left dead by a Redis restart fails with a reset or broken pipe: reconnect and
        # retry rather than answer 503.
        "retry_on_error": [RedisConnectionError, RedisTimeoutError, ConnectionResetError, BrokenPipeError],
        # PING a connection idle for more than a second before reusing it (free under load, where none idles),
        # so the first burst after a restart does not meet stale connections.
        "health_check_interval": 1,
    }
    options.update(kwargs)
    return aioredis.Redis.from_url(url, **options)
