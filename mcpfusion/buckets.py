"""Token buckets, the state behind `RateLimit`: in memory here (one process); `mcpfusion.redis.buckets`
keeps them in Redis for every replica.

A bucket holds up to `capacity` tokens and refills at `refill_per_second`; a call takes one token or is
told how long until one is back.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Protocol

_MEMORY_KEYS = 100_000  # oldest buckets are forgotten beyond this many callers (a forgotten bucket is full)
_LONG_KEY = 256  # a longer key (claims of any size) is kept as its digest: memory stays bounded per bucket


class Buckets(Protocol):
    async def take(self, key: str, capacity: float, refill_per_second: float) -> float:
        """Take one token from bucket `key`: 0.0 when allowed, else the seconds until a token is back."""
        ...


class MemoryBuckets:
    """Token buckets of one process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}

    async def take(self, key: str, capacity: float, refill_per_second: float) -> float:
        return self.take_now(key, capacity, refill_per_second)

    def take_now(self, key: str, capacity: float, refill_per_second: float) -> float:
        """`take` without a coroutine (nothing here waits): what `RateLimit` calls on these buckets."""
        if len(key) > _LONG_KEY:
            key = "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        now = self.clock()
        tokens, last = self.buckets.pop(key, (capacity, now))  # re-inserted: the dict stays in LRU order
        tokens = min(capacity, tokens + (now - last) * refill_per_second)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / refill_per_second
        self.buckets[key] = (tokens, now)
        if len(self.buckets) > _MEMORY_KEYS:
            del self.buckets[next(iter(self.buckets))]
        return wait
