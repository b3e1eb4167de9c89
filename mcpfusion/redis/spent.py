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


class RedisSpent:
    """One key per spent confirmation (`SET NX` with the confirmation's expiry): the first replica to use it
    wins, every later use on any replica is a replay. When Redis cannot be reached the confirmation is not
    used (fail closed): a destructive action waits for the store rather than risk running twice."""

    def __init__(self, client: Any, prefix: str = "mcpf:spent:") -> None:
        self.client = client
        self.prefix = prefix

    async def spend(self, key: str, expires: float) -> bool:
        # The key is a digest: a confirmation is a bearer secret, never written to Redis as it is.
        name = self.prefix + hashlib.sha256(key.encode()).hexdigest()
        try:
            return bool(await self.client.set(name, "1", nx=True, pxat=math.ceil(expires * 1000)))
        except UNAVAILABLE:
            logger.warning("a confirmation was not used: Redis is unreachable")
            raise SpentUnavailable from None
