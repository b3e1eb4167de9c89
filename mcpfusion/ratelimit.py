"""Rate limits per principal or tenant: a token bucket per caller.

    MCPFusion("billing", middleware=[RateLimit(120, per=60)])             # 120 calls a minute per principal
    Tool("exports", middleware=[RateLimit(10, per=60, key="tenant")])      # 10 a minute per tenant

Buckets live in memory (one process), or in Redis when the app runs with `MCPFUSION_REDIS_URL`, so that
replicas share them: a caller gets the same allowance whichever replica answers. Over the limit, MCP
answers a self-healing `RATE_LIMITED` error saying how long to wait, REST a 429 with `Retry-After`.
A call refused before the middleware run (arguments that do not validate) counts too (`charge_refused`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import Any

from .confirm import called_as
from .errors import RATE_LIMITED, ToolError
from .middleware import ActionCall, CallNext
from .response import ToolResponse

KeyFunction = Callable[[ActionCall], str]
logger = logging.getLogger("mcpfusion")


class RateLimit:
    """At most `calls` per `per` seconds for each caller, with bursts up to `burst` (default `calls`).

    `key` says who "each caller" is: "principal" (default: `ActionCall.caller_key`, the principal within
    its tenant and issuer), "tenant" (the principal's tenant), or a function of the `ActionCall`. Declared on
    the app or a tool, one bucket per caller covers all of its actions; give two limits with the same numbers
    distinct `name`s to keep their buckets apart."""

    def __init__(
        self,
        calls: int,
        per: float = 60.0,
        *,
        burst: int | None = None,
        key: str | KeyFunction = "principal",
        name: str | None = None,
    ) -> None:
        if calls < 1 or per <= 0:
            raise ValueError("RateLimit needs calls >= 1 and a positive period")
        if isinstance(key, str) and key not in ("principal", "tenant"):
            raise ValueError('RateLimit key must be "principal", "tenant" or a function of the call')
        self.calls = calls
        self.per = per
        self.capacity = float(burst if burst is not None else calls)
        self.refill = calls / per
        self.key = key
        kind = key if isinstance(key, str) else getattr(key, "__name__", "key")
        self.name = name or f"{calls}/{per:g}s:{kind}"

    def subject(self, call: ActionCall) -> str:
        if callable(self.key):
            return str(self.key(call))
        if self.key == "tenant":
            return call.tenant or call.caller_key  # (no tenant: the caller's own bucket, issuer-bound)
        return call.caller_key

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        # (`charge`, inline: one coroutine less on every call)
        wait = await call.guards.buckets.take(f"{self.name}:{self.subject(call)}", self.capacity, self.refill)
        if wait > 0:
            raise self._limited(call, wait)
        return await call_next(call)

    async def charge(self, call: ActionCall) -> None:
        """Count `call` against its caller's allowance; `RATE_LIMITED` when none is left."""
        wait = await call.guards.buckets.take(f"{self.name}:{self.subject(call)}", self.capacity, self.refill)
        if wait > 0:
            raise self._limited(call, wait)

    def _limited(self, call: ActionCall, wait: float) -> ToolError:
        seconds = max(1, math.ceil(wait))
        who = "tenant" if self.key == "tenant" else "caller"
        return ToolError(
            RATE_LIMITED,
            f"Rate limit reached: at most {self.calls} calls per {self.per:g} s for each {who}.",
            recovery=f"Wait {seconds} s, then call {called_as(call)} again.",
            retry_after=seconds,
        )

    def describe(self) -> str:
        who = self.key if isinstance(self.key, str) else "custom key"
        return f"rate limit: {self.calls} calls per {self.per:g} s per {who}"


async def charge_refused(call: ActionCall, layers: Iterable[Any]) -> None:
    """Count a call refused before its middleware ran (its arguments did not validate) against the rate
    limits among `layers`, as if it had reached them: invalid calls are calls too, and must not buy a caller
    free CPU past its limit. `RATE_LIMITED` when one of them has no allowance left. `call.arguments` is
    empty (none validated): a `key` function that needs them fails, and that call is not counted."""
    for layer in layers:
        if isinstance(layer, RateLimit):
            try:
                await layer.charge(call)
            except ToolError:
                raise
            except Exception:  # the refusal is still answered; this limit just does not see it
                logger.warning("%s: a refused call of %s was not counted", layer.name, call.action.label,
                               exc_info=True)
