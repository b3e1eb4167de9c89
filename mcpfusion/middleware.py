"""Middleware: async functions wrapped around every action call, on every transport.

    async def timing(call: ActionCall, call_next: CallNext) -> ToolResponse:
        started = time.perf_counter()
        response = await call_next(call)          # change call.arguments before, the response after
        logger.info("%s took %.1f ms", call.action.qualified_name, (time.perf_counter() - started) * 1000)
        return response

    MCPFusion("billing", middleware=[timing])     # every action of the app
    Tool("billing", middleware=[...])             # every action of the tool
    @billing.action(middleware=[...])             # one action

Order: the app's middleware wrap the tool's, which wrap the action's; within one list the first is the
outermost. They run after the arguments validated and before dependencies resolve, so raising `ToolError`
(or returning a response without calling `call_next`) short-circuits the call: no dependency, no handler.
A response a middleware gives in place of call_next's (one it built, or kept from an earlier call) passes the
checks a handler's answer does for this caller, on a copy (the one it gave is never changed); call_next's,
changed in place, is not checked again.
An exception raised inside reaches the outer middleware as the error response it becomes (once a write
ran, `call.done`: one saying it was done and not to call it again, `details.completed`). Guards
(`Timeout`, `Concurrency`, `RateLimit`, `EgressLimit`, `Audit`) are middleware too.

A middleware object with an `applies_to(action) -> bool` method is left out of the chain of the actions it
says False for (`Audit` of mutations only, around a read): decided once per action, nothing left to pass
through on each call.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import json
import logging
import secrets
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from .buckets import Buckets, MemoryBuckets
from .context import Context
from .dependencies import current_context
from .identity import (  # (no JWT loaded)
    AUTH_SCOPE_KEY,
    ISSUER_NAMES,
    caller_key_of,
    credential_digest,
    field_of,
    subject_of,
    tenant_of,
    unnamed_identity_of,
)
from .memo import by_identity
from .response import ToolResponse
from .spent import MemorySpent, Spent

if TYPE_CHECKING:
    from .tool import Action, Tool

_logger = logging.getLogger("mcpfusion.confirm")

CallNext = Callable[["ActionCall"], Awaitable[ToolResponse]]
Middleware = Callable[["ActionCall", CallNext], Awaitable[ToolResponse]]

# Set by the stdio bridge on the requests it makes in-process.
_STDIO_SCOPE_KEY = "mcpfusion.trusted_headers"
# `call.state` key: what stops while a write whose handler returned closes its yield dependencies (a `Timeout`'s
# clock: cutting a commit halfway would leave unknown whether what the handler did was kept). Each has
# `stop()` and `async resume(answered)`, as a `mcpfusion.pauses.Pause`.
CLOSING_KEY = "mcpfusion.guards.closing"


@by_identity
def _named_key(principal: Any) -> str | None:
    """`ActionCall.caller_key` of a principal naming its subject (None: it names none, and its key depends on
    the request). The same caller on every call it authenticates (a token's claims are not changed once
    verified): remembered by identity, as a rate-limited call reads it on every call."""
    subject = subject_of(principal)
    if subject is None:
        return None
    return caller_key_of(field_of(principal, ISSUER_NAMES), tenant_of(principal), subject)


class GuardState:
    """What the guards of one app keep between calls (buckets, bulkheads, the signing key).

    It lives beside the configuration (the registry), never inside a guard, so a tool shared by two apps
    shares no counters between them."""

    def __init__(self, signing_key: bytes | str | None = None) -> None:
        key = signing_key if signing_key is not None else secrets.token_bytes(32)
        self.signing_key = key.encode() if isinstance(key, str) else key
        self.semaphores: dict[int, asyncio.Semaphore] = {}
        self.buckets: Buckets = MemoryBuckets()  # `mcpfusion.redis.buckets.RedisBuckets` for replicas
        self.spent: Spent = MemorySpent()  # `mcpfusion.redis.spent.RedisSpent` for replicas

    async def epoch(self) -> str:
        """The spent confirmations' epoch, bound into each confirmation issued (see `mcpfusion.spent`); "0" for
        an app's own store without one. `SpentUnavailable` when the shared store cannot be reached."""
        current = _epoch_of(self.spent)
        if current is None:
            return "0"
        found = current()
        if inspect.isawaitable(found):  # (`async def epoch`, as `Spent` says; a plain `def` is read as well)
            found = await found
        if not (isinstance(found, str) and 0 < len(found) <= 32 and found.isascii() and found.isalnum()):
            raise TypeError(f"{type(self.spent).__name__}.epoch() returned {found!r}: an epoch is 1 to 32 ASCII "
                            "letters and digits")
        return found

    async def spend(self, confirmation: str, expires: float, epoch: str | None = None) -> bool:
        """Use a confirmation once: True the first time, False for a replay before it expires (on any
        replica when they share Redis) and for one issued in another `epoch` than the store's (it may have
        forgotten that spend); `SpentUnavailable` when the shared store cannot be reached."""
        if epoch is None or _epoch_of(self.spent) is None:  # (an app's own store written before epochs)
            return await self.spent.spend(confirmation, expires)
        return await self.spent.spend(confirmation, expires, epoch)

    def semaphore(self, owner: object, limit: int) -> asyncio.Semaphore:
        found = self.semaphores.get(id(owner))
        if found is None:
            found = self.semaphores[id(owner)] = asyncio.Semaphore(limit)
        return found


def _epoch_of(store: Any) -> Callable[[], Any] | None:
    """The `epoch` of an app's own spent store when its `spend` takes the epoch too; None otherwise: a store
    written before epochs, or half-way (an `epoch` beside a `spend(key, expires)`), is used as one without
    (its confirmations run once; one it forgot is not caught), said once in the log, never a failure after
    the user confirmed."""
    epoch = getattr(store, "epoch", None)
    if epoch is None:
        return None
    kind = type(store)
    known = _EPOCHS.get(kind)
    if known is None:
        try:
            inspect.signature(store.spend).bind("key", 0.0, "epoch")
            known = True
        except TypeError:  # (no epoch argument; or a signature not readable: a builtin, as without one)
            known = False
            _logger.warning("%s has an epoch() but its spend() takes no epoch: a confirmation it forgot is not "
                            "refused (see mcpfusion.spent.Spent)", kind.__qualname__)
        except ValueError:
            known = False
        _EPOCHS[kind] = known
    return epoch if known else None


_EPOCHS: dict[type, bool] = {}  # spent stores' classes: whether their spend takes an epoch


class ActionCall:
    """One action call as middleware see it.

    - `action` / `tool`: what is called; `arguments`: the validated keyword arguments of the handler
      (change them before `call_next`); `raw_arguments`: the arguments as the caller sent them.
    - `transport`: "mcp", "stdio", "rest" or "tester"; `context`: the MCP `Context` (detached elsewhere);
      `request`: the HTTP request (headers, scope, app).
    - `principal`: what the app's authentication stored in `scope["mcpfusion.auth"]` (e.g. by
      `RequireBearer`), else None; `principal_id` and `tenant` are read from it.
    - `state`: a dict for middleware to pass values to each other during this call.
    - `done`: True once a write (an action not `readonly`) has run to its end: its handler returned and its
      yield dependencies closed without failing (a session committed). What fails after that (a middleware
      raising after `call_next`, a `Timeout`) cannot undo it: the error says the action was done and not to
      call it again (`details.completed`). Set by the framework; always False for a read.
    """

    __slots__ = ("action", "arguments", "raw_arguments", "request", "transport", "state", "guards",
                 "select", "cursor", "confirmation", "raise_http", "phase", "done", "answered", "_request_id")

    def __init__(
        self,
        action: Action,
        arguments: dict[str, Any],
        raw_arguments: dict[str, Any],
        request: Request,
        transport: str,
        guards: GuardState,
        phase: Callable[[str], AbstractContextManager[Any]],
    ) -> None:
        self.action = action
        self.arguments = arguments
        self.raw_arguments = raw_arguments
        self.request = request
        self.transport = "stdio" if transport == "mcp" and request.scope.get(_STDIO_SCOPE_KEY) else transport
        self.guards = guards
        self.state: dict[str, Any] = {}
        self.select: list[str] | None = None
        self.cursor: str | None = None  # the page cursor of a paginated action
        self.confirmation: str | None = None  # the `_confirm` token sent with the call
        self.raise_http = True
        self.phase = phase  # telemetry's timer of the dependency, handler and present steps
        self.done = False  # a write's effect happened (see the class docstring): set once, by `_endpoint`
        # The response the innermost step gave last, or one a middleware gave already checked (see `chain`):
        # a middleware returning it as it is costs no second check. Set by the framework.
        self.answered: ToolResponse | None = None
        self._request_id: str | None = None

    @property
    def tool(self) -> Tool:
        return self.action.tool

    @property
    def context(self) -> Context:
        return current_context(self.request)

    @property
    def principal(self) -> Any:
        return self.request.scope.get(AUTH_SCOPE_KEY)

    @property
    def principal_id(self) -> str:
        """Who calls: the principal's subject (`SUBJECT_NAMES`), else a digest of the credentials of the
        Authorization header (however its scheme is spelled), else a digest of the principal's fields, else
        (no principal at all) the client address; never a credential in clear."""
        found = subject_of(self.principal)  # (the names MCP sessions read: `identity_of`)
        return found if found is not None else self._unnamed_id()

    def _unnamed_id(self) -> str:
        """`principal_id` of a caller whose principal names no subject: bound as its MCP sessions are
        (`mcpfusion.mcp.wire.default_principal`), so two such callers behind one address, told apart there,
        share no rate-limit bucket or confirmation here either."""
        auth = self.request.headers.get("authorization")
        if auth:
            return "token:" + credential_digest(auth, self.guards.signing_key)  # keyed: it is logged
        unnamed = unnamed_identity_of(self.principal)
        client = self.request.client
        address = client.host if client else "-"
        if unnamed is None:  # no principal, or one naming nobody (`ANONYMOUS`): who calls is where from
            return f"anonymous:{address}"
        digest = unnamed[0]
        if digest.startswith("unreadable:"):
            # Sessions refuse it (a value drawn per request); a bucket drawn per request would never fill:
            # counted by its address instead, as strict as no principal.
            return f"unreadable:{address}"
        # Keyed, as a credential's digest is: the audit logs it, and the fields may hold a secret.
        return "fields:" + hmac.new(self.guards.signing_key, b"principal|" + digest.encode(),
                                    hashlib.sha256).hexdigest()[:32]

    @property
    def tenant(self) -> str | None:
        return tenant_of(self.principal)  # (the one reading: MCP sessions are bound to the same tenant)

    @property
    def caller_key(self) -> str:
        """`principal_id` within its tenant and issuer: what per-caller state (rate-limit buckets, confirmation
        tokens) is keyed by, since two tenants, or two authorization servers, may each have a subject of the
        same name (MCP sessions are bound the same way, `mcpfusion.identity.identity_of`).

        One JSON array always (`caller_key_of`), so no name can pose as another: tenant "acme" with subject
        "x/y" is not tenant "acme/x" with subject "y", and a subject spelled like a credential digest
        ("token:...") or a client address is not the caller that digest or address stands for."""
        principal = self.request.scope.get(AUTH_SCOPE_KEY)
        named = _named_key(principal)
        if named is not None:
            return named
        # (four parts: never a subject's)
        return caller_key_of(field_of(principal, ISSUER_NAMES), tenant_of(principal), None, self._unnamed_id())

    @property
    def request_id(self) -> str:
        """`X-Request-ID` when the caller sent one, else a new id (stable for this call)."""
        if self._request_id is None:
            self._request_id = self.request.headers.get("x-request-id") or uuid.uuid4().hex
        return self._request_id

    def arguments_digest(self) -> str:
        """A keyed digest (HMAC-SHA256, the app's signing key) of the action and its arguments as sent:
        equal for equal calls, and no value can be read back or guessed from it."""
        canonical = json.dumps([self.action.qualified_name, self.raw_arguments], sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False, default=str)
        return hmac.new(self.guards.signing_key, canonical.encode(), hashlib.sha256).hexdigest()

    def __repr__(self) -> str:
        return f"ActionCall({self.action.qualified_name}, transport={self.transport!r})"


def applies(mw: Any, action: Action) -> bool:
    """Whether `mw` wraps `action`: unless it says otherwise (`applies_to`), every middleware does."""
    applies_to = getattr(mw, "applies_to", None)
    return applies_to is None or bool(applies_to(action))


def chain(middleware: Sequence[Middleware], endpoint: CallNext,
          on_error: Callable[[ActionCall, Exception], ToolResponse],
          on_answer: Callable[[ActionCall, ToolResponse], ToolResponse] | None = None) -> CallNext:
    """`endpoint` wrapped in `middleware` (first = outermost). What a middleware raises becomes, through
    `on_error`, the response its outer middleware see. `on_answer` checks a response a middleware gave in place
    of its call_next's (a cache's `success(...)` or kept answer) and returns the checked copy: any but
    `call.answered`, which `endpoint` sets to its own (checked already) and each layer to what it gave."""
    handler = endpoint
    for mw in reversed(middleware):
        handler = _bind(mw, handler, on_error, on_answer)
    return handler


def _bind(mw: Middleware, call_next: CallNext, on_error: Callable[[ActionCall, Exception], ToolResponse],
          on_answer: Callable[[ActionCall, ToolResponse], ToolResponse] | None) -> CallNext:
    async def run(call: ActionCall) -> ToolResponse:
        try:
            response = await mw(call, call_next)
            if response.__class__ is not ToolResponse and not isinstance(response, ToolResponse):
                # Its outer middleware and the transports read a response: the mistake is named here, once.
                name = getattr(mw, "__qualname__", type(mw).__qualname__)
                raise TypeError(f"middleware {name} of {call.action.label} returned a {type(response).__name__}, "
                                "not the ToolResponse of call_next (or one it built)")
            if response is call.answered:  # call_next's, as it was given (the usual case: one comparison)
                return response
            if on_answer is not None:  # its own answer: held to the contract the handler's is
                response = on_answer(call, response)
        except Exception as exc:
            response = on_error(call, exc)
        call.answered = response
        return response

    return run


def describe(mw: Any) -> str:
    """One line saying what a middleware does (the docs page lists them per action)."""
    explain = getattr(mw, "describe", None)
    if callable(explain):
        return str(explain())
    doc = (getattr(mw, "__doc__", None) or "").strip().split("\n", 1)[0]
    name = getattr(mw, "__name__", type(mw).__name__)
    return f"{name}: {doc}" if doc else name
