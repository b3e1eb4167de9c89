"""Token buckets in Redis (`RateLimit`'s state shared by every replica); chosen by `MCPFusion` when the
app runs with `MCPFUSION_REDIS_URL`.

A bucket's key names its caller (a subject, a tenant, often an e-mail address, as long as the token that
carried it): Redis holds it as a digest only, as it holds session quota indexes and spent confirmations, so
every key has one short size and no name is written in clear.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from .client import UNAVAILABLE

logger = logging.getLogger("mcpfusion.ratelimit")

# One round trip, atomic: refill from the time elapsed (Redis's own clock, the same for every replica),
# take a token if there is one, and expire the key once the bucket would be full again.
_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) / rate) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate) + 1000)
return wait
"""


class RedisBuckets:
    """Token buckets in Redis, shared by every replica. When Redis cannot be reached the call is let
    through (logged): an outage of the limiter must not take the service down with it."""

    def __init__(self, client: Any, prefix: str = "mcpf:rl:") -> None:
        self.client = client
        self.prefix = prefix
        self.script = client.register_script(_TAKE)

    def _name(self, key: str) -> str:
        # "surrogatepass": a name read from JSON claims may hold a lone surrogate, which plain UTF-8 refuses.
        return self.prefix + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    async def take(self, key: str, capacity: float, refill_per_second: float) -> float:
        try:
            wait_ms = await self.script(keys=[self._name(key)], args=[capacity, refill_per_second / 1000])
        except UNAVAILABLE:
            logger.warning("rate limit not applied: Redis is unreachable")
            return 0.0
        return int(wait_ms) / 1000
