"""Rate limits per principal or tenant: a token bucket per caller.

    MCPFusion("billing", middleware=[RateLimit(120, per=60)])             # 120 calls a minute per principal
    Tool("exports", middleware=[RateLimit(10, per=60, key="tenant")])      # 10 a minute per tenant

Buckets live in memory (one process), or in Redis when the app runs with `MCPFUSION_REDIS_URL`, so that
replicas share them: a caller gets the same allowance whichever replica answers. Over the limit, MCP
answers a self-healing `RATE_LIMITED` error saying how long to wait, REST a 429 with `Retry-After`.
A call refused before the middleware run (arguments that do not validate) counts too (`charge_refused`), and
so do the MCP requests that run the app's code without being action calls (`resources/read`,
`resources/subscribe`, `prompts/get`, `completion/complete`: `charge_request`), against the app's limits only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import Any

from starlette.requests import Request

from .buckets import MemoryBuckets
from .confirm import called_as
from .dispatch import no_phase
from .errors import RATE_LIMITED, ToolError
from .identity import caller_key_of
from .mcp import jsonrpc
from .mcp.jsonrpc import McpError
from .middleware import ActionCall, CallNext, GuardState
from .response import ToolResponse

KeyFunction = Callable[[ActionCall], str]
logger = logging.getLogger("mcpfusion")


class RateLimit:
    """At most `calls` per `per` seconds for each caller, with bursts up to `burst` (default `calls`).

    `key` says who "each caller" is: "principal" (default: `ActionCall.caller_key`, the principal within
    its tenant and issuer), "tenant" (the principal's tenant), or a function of the `ActionCall`. Declared on
    the app or a tool, one bucket per caller covers all of its actions (the app's, its resource reads, prompts
    and completions too: `charge_request`); give two limits with the same numbers distinct `name`s to keep
    their buckets apart."""

    def __init__(
        self,
        calls: int,
        per: float = 60.0,
        *,
        burst: int | None = None,
        key: str | KeyFunction = "principal",
        name: str | None = None,
    ) -> None:
        calls = _whole("calls", calls)
        if burst is not None:
            burst = _whole("burst", burst)
        if isinstance(per, bool) or not isinstance(per, (int, float)):
            raise TypeError(f"RateLimit per= takes a number of seconds, not {per!r}")
        if not (math.isfinite(per) and per > 0):  # (NaN would disable the limit, infinity never refill it)
            raise ValueError(f"RateLimit per= must be a finite number of seconds above 0, not {per!r}")
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
            # Two parts, a caller key three or four (`caller_key_of`): no tenant name can pose as a caller.
            tenant = call.tenant
            return caller_key_of("tenant", tenant) if tenant else call.caller_key  # (no tenant: the caller's own)
        return call.caller_key

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        # (`charge`, inline: one coroutine less on every call; none at all for the in-process buckets)
        buckets = call.guards.buckets
        key = f"{self.name}:{self.subject(call)}"
        wait = buckets.take_now(key, self.capacity, self.refill) if buckets.__class__ is MemoryBuckets \
            else await buckets.take(key, self.capacity, self.refill)
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


def _whole(name: str, value: Any) -> int:
    """`value` of the argument `name` (`calls=`, `burst=`): a whole number of calls, at least 1 (0 or fewer
    would refuse every call forever)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"RateLimit {name}= takes a whole number of calls, not {value!r}")
    if value < 1:
        raise ValueError(f"RateLimit {name}= must be at least 1, not {value!r}: with none the first call, and "
                         "every one after it, would be refused")
    return value


async def charge_refused(call: ActionCall, layers: Iterable[Any]) -> None:
    """Count a call refused before its middleware ran (its arguments did not validate) against the rate
    limits among `layers`, as if it had reached them: invalid calls are calls too, and must not buy a caller
    free CPU past its limit. `RATE_LIMITED` when one of them has no allowance left. `call.arguments` is
    empty (none validated): a `key` function that needs them fails, and that call is not counted."""
    await _charge(call, layers, "a refused call")


async def _charge(call: ActionCall, layers: Iterable[Any], what: str) -> None:
    for layer in layers:
        if isinstance(layer, RateLimit):
            try:
                await layer.charge(call)
            except ToolError:
                raise
            except Exception:  # the request is still answered; this limit just does not see it
                logger.warning("%s: %s of %s was not counted", layer.name, what, call.action.label, exc_info=True)


async def charge_request(request: Request, method: str, layers: Iterable[Any], guards: GuardState) -> None:
    """Count one MCP request that runs the app's code without being an action call (`resources/read`,
    `resources/subscribe`, `prompts/get`, `completion/complete`) against the `RateLimit`s among `layers` (the
    app's: a tool's or an action's limit covers its actions only), in the buckets the caller's action calls
    take from: one allowance per caller, whichever way it reads the data. `call.action` is a stand-in naming `method`.

    Over the limit: JSON-RPC -32010 with `data` `{"status": 429, "code": "RATE_LIMITED", "retry_after"}`, as
    an `HTTPException(429)` of a resource's dependency is answered (never an HTTP error status: a refused tool
    call is a result too)."""
    limits = [layer for layer in layers if isinstance(layer, RateLimit)]
    if not limits:
        return
    call = ActionCall(_stand_in(method), {}, {}, request, "mcp", guards, no_phase)
    try:
        await _charge(call, limits, "a request")
    except ToolError as limited:
        detail = f"{limited.message} {limited.recovery}"
        raise McpError(jsonrpc.HTTP_ERROR, f"HTTP 429: {detail}", {
            "status": 429, "detail": detail, "code": RATE_LIMITED, "retry_after": limited.retry_after}) from None


class _Request:
    """What a rate limit sees of an MCP request that is no action call (`call.action` and `call.tool`): the
    method, e.g. `resources/read` (so "call resources/read again")."""

    description = ""
    readonly = True  # (reads: a prompt or completion writes nothing either)
    destructive = idempotent = open_world = confirm = False
    paginate = None
    middleware: tuple[Any, ...] = ()
    scopes: frozenset[str] = frozenset()
    actions: dict[str, Any] = {}

    def __init__(self, method: str) -> None:
        self.name = self.qualified_name = self.label = method

    @property
    def tool(self) -> _Request:
        return self


_STAND_INS: dict[str, Any] = {}


def _stand_in(method: str) -> Any:
    """One stand-in action per method (duck-typed: what a rate limit reads of an action)."""
    found = _STAND_INS.get(method)
    if found is None:
        found = _STAND_INS[method] = _Request(method)
    return found
