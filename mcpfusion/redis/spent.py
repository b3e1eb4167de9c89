"""Spent confirmations in Redis (`mcpfusion.spent` shared by every replica); chosen by `MCPFusion` when the
app runs with `MCPFUSION_REDIS_URL`."""

from __future__ import annotations

import hashlib
import logging
import math
from typing import Any

from ..spent import SpentUnavailable
from .client import UNAVAILABLE

logger = logging.getLogger("mcpfusion.confirm")

# Compare-and-delete: the key goes only while it still holds the spend being given back (its expiry).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisSpent:
    """One key per spent confirmation (`SET NX` with the confirmation's expiry): the first replica to use it
    wins, every later use on any replica is a replay. When Redis cannot be reached the confirmation is not
    used (fail closed): a destructive action waits for the store rather than risk running twice.

    The key's value is its expiry in milliseconds: `release` deletes it only while it still holds that value,
    never a later spend of the same confirmation (made once this one expired, so with a later expiry)."""

    def __init__(self, client: Any, prefix: str = "mcpf:spent:") -> None:
        self.client = client
        self.prefix = prefix
        self.release_script = client.register_script(_RELEASE)

    def _name(self, key: str) -> str:
        # The key is a digest: a confirmation is a bearer secret, never written to Redis as it is.
        return self.prefix + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    async def spend(self, key: str, expires: float) -> bool:
        at = math.ceil(expires * 1000)
        try:
            return bool(await self.client.set(self._name(key), str(at), nx=True, pxat=at))
        except UNAVAILABLE:
            logger.warning("a confirmation was not used: Redis is unreachable")
            raise SpentUnavailable from None

    async def release(self, key: str, expires: float) -> None:
        try:
            await self.release_script(keys=[self._name(key)], args=[str(math.ceil(expires * 1000))])
        except UNAVAILABLE:
            logger.warning("a confirmation was not given back after a retryable failure: Redis is unreachable")
            raise SpentUnavailable from None
