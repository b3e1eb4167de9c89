"""The one place a Redis client is configured: short timeouts and a short retry budget.

redis-py's default retry policy backs off for seconds when Redis is down, which turns an outage into
hanging MCP requests; here a request fails fast (or reconnects within ~0.5 s after a restart), and pooled
connections are health-checked so a restart does not surface as errors on the first requests after it.

A command that times out is not retried: a frozen server (stalled, overloaded, half-open) would otherwise
hold every request for a timeout per attempt. A request then waits at most `COMMAND_TIMEOUT` per command
(the readiness probe's own bound) before it is answered 503 with Retry-After.
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

CONNECT_TIMEOUT = 1.0
COMMAND_TIMEOUT = 2.0
RETRIES = 3
# A dropped connection (a restart) is worth another try on a new one; a timeout is not (see above).
_RETRIED = (RedisConnectionError, ConnectionResetError, BrokenPipeError)


def connect(url: str, **kwargs: Any) -> aioredis.Redis:
    """An asyncio client for `url` (`redis://host:port/db`), decoding responses to str."""
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": COMMAND_TIMEOUT,
        # A pooled connection left dead by a Redis restart fails with a reset or broken pipe: reconnect and
        # retry rather than answer 503. (redis-py's own default also retries timeouts.)
        "retry": Retry(ExponentialBackoff(cap=0.2, base=0.02), RETRIES, supported_errors=_RETRIED),
        "retry_on_error": list(_RETRIED),
        # PING a connection idle for more than a second before reusing it (free under load, where none idles),
        # so the first burst after a restart does not meet stale connections.
        "health_check_interval": 1,
    }
    options.update(kwargs)
    return aioredis.Redis.from_url(url, **options)
