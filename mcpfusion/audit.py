"""Audit trail: one structured event per mutating call, to a pluggable sink (JSON log lines by default).

    MCPFusion("billing", middleware=[Audit()])                  # logger "mcpfusion.audit", one JSON line each
    MCPFusion("billing", middleware=[Audit(sink=events.append)])  # any callable (sync or async) of the event

An event names who (principal, tenant), what (`tool.action`, a keyed digest of the arguments and the names of
those the action declares - never their values; other names sent are only counted, `"undeclared": n`), how it
ended (outcome, error code), how long it took and the request id:

    {"event": "audit", "time": "2026-12-01T00:00:00.000+00:00", "request_id": "…", "transport": "mcp",
     "principal": "demo-admin", "tenant": "acme", "action": "billing.void_invoice",
     "arguments": {"digest": "hmac-sha256:…", "fields": ["id", "reason"]},
     "outcome": "ok", "error_code": null, "duration_ms": 3.2}

Read-only actions are not audited unless `mutations_only=False`. A call refused before the middleware ran is
an event too when it was refused for the caller's scopes (`FORBIDDEN`) or rate limit (`RATE_LIMITED`); raw
tools are audited unless their annotations say `readOnlyHint`. The principal of a caller without a subject and
the arguments' digest are keyed with the app's signing key (`MCPFUSION_SIGNING_KEY`: random per process when
unset, so set it to compare digests across workers, replicas and restarts). `request_id` is the caller's
`X-Request-ID` only when it is short printable ASCII.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import re
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException

from .confirm import CONFIRM_PARAM
from .mcp.jsonrpc import McpError, ProtocolSignal
from .middleware import ActionCall, CallNext
from .pagination import CURSOR_PARAM
from .response import ToolResponse
from .select import SELECT_PARAM

if TYPE_CHECKING:
    from .tool import Action

logger = logging.getLogger("mcpfusion.audit")
_DECLARED: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()  # see `declared_names`
Sink = Callable[[dict[str, Any]], Any]
# An `X-Request-ID` the event keeps: printable ASCII without spaces, at most 128 characters (a UUID is 36).
_REQUEST_ID = re.compile(r"[!-~]{1,128}")


def log_sink(event: dict[str, Any]) -> None:
    """The default sink: the event as one JSON line on the `mcpfusion.audit` logger (level INFO). ASCII only:
    a character some readers split lines at (NEL, U+2028) arrives escaped, so the line stays one line."""
    logger.info(json.dumps(event, ensure_ascii=True, separators=(",", ":"), default=str))


def arguments_of(call: ActionCall) -> dict[str, Any]:
    """The event's `arguments`: the keyed digest of all of them, the names of those the action declares, and
    how many others were sent (a refused call's names are the caller's unvalidated keys, of any number and
    size: never written, so the line stays bounded whatever it sent)."""
    declared = declared_names(call)
    sent = call.raw_arguments
    fields = sorted(name for name in sent if name in declared)
    found: dict[str, Any] = {"digest": f"hmac-sha256:{call.arguments_digest()}", "fields": fields}
    if len(fields) < len(sent):
        found["undeclared"] = len(sent) - len(fields)
    return found


def declared_names(call: ActionCall) -> frozenset[str]:
    """The argument names `call.action` declares (names and aliases, and the framework's own it takes:
    `_select`, `cursor`, `_confirm`); a raw tool's are its input schema's properties. Worked out once per
    action."""
    action = call.action
    try:
        return _DECLARED[action]
    except (KeyError, TypeError):  # (TypeError: an action that takes no weak reference, never cached)
        pass
    accepted = getattr(action, "accepted_keys", None)
    if accepted is not None:  # an action
        schema = getattr(action, "json_schema", None) or {}
        framework = ((SELECT_PARAM, action.tool.select), (CURSOR_PARAM, action.paginate),
                     (CONFIRM_PARAM, action.confirm))
        names = frozenset([*accepted, *_properties(schema), *(name for name, on in framework if on)])
    else:  # a raw tool (`mcpfusion.app.RawAction`): the app that serves it holds its schema
        fusion = getattr(getattr(call.request.scope.get("app"), "state", None), "mcpfusion", None)
        raw = getattr(fusion, "raw_tools", {}).get(getattr(action, "name", None))
        if raw is None or raw.action is not action:
            return frozenset()  # nothing declared that we know of: every name is only counted
        names = frozenset(_properties(raw.descriptor.get("inputSchema")))
    with contextlib.suppress(TypeError):
        _DECLARED[action] = names
    return names


def _properties(schema: Any) -> list[str]:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [name for name in properties if isinstance(name, str)] if isinstance(properties, dict) else []


def request_id(call: ActionCall) -> str:
    """The call's request id: the caller's `X-Request-ID` when it is one a log line can hold, else a new one
    (what the caller chose is never trusted to be short or printable)."""
    sent = call.request_id
    return sent if _REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex


class Audit:
    """Emit one audit event per (mutating) call to `sink`. A failing sink is logged, never fails the call."""

    def __init__(self, sink: Sink = log_sink, *, mutations_only: bool = True) -> None:
        self.sink = sink
        self.mutations_only = mutations_only

    def applies_to(self, action: Action) -> bool:
        """Left out of the chain of a read when only mutations are audited."""
        return not (self.mutations_only and action.readonly)

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        if not self.applies_to(call.action):  # (a chain leaves it out already: this is for other callers)
            return await call_next(call)
        started = time.perf_counter()
        try:
            response = await call_next(call)
        except asyncio.CancelledError:  # (once a write ran, cancelled or not, what it does was done)
            await self._emit(call, started, "completed" if call.done else "cancelled", None)
            raise
        except HTTPException as exc:
            await self._emit(call, started, "error", f"HTTP_{exc.status_code}")
            raise
        except McpError as exc:  # a JSON-RPC error answers the call: it ended
            await self._emit(call, started, "error", f"JSONRPC_{exc.code}")
            raise
        except ProtocolSignal:  # an input-required round (e.g. a confirmation): the call is not over
            raise
        except Exception:
            await self._emit(call, started, "error", "INTERNAL_ERROR")
            raise
        await self._emit(call, started, _outcome(response), response.error_code)
        return response

    async def _emit(self, call: ActionCall, started: float, outcome: str, code: str | None) -> None:
        event = {
            "event": "audit",
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request_id": request_id(call),
            "transport": call.transport,
            "principal": call.principal_id,
            "tenant": call.tenant,
            "action": call.action.qualified_name,
            "arguments": arguments_of(call),
            "outcome": outcome,
            "error_code": code,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        }
        try:
            result = self.sink(event)
            if inspect.isawaitable(result):
                await _uncut(result)
        except Exception:
            logger.exception("audit sink failed for %s", call.action.qualified_name)

    async def refused(self, call: ActionCall, code: str) -> None:
        """Record a call refused before the middleware ran (`FORBIDDEN`, `RATE_LIMITED`)."""
        if self.applies_to(call.action):
            await self._emit(call, time.perf_counter(), "error", code)

    def describe(self) -> str:
        return "audit: one event per mutating call" if self.mutations_only else "audit: one event per call"


async def _uncut(pending: Awaitable[Any]) -> None:
    """Await an async sink's write to its end: a cancellation of the call meanwhile (its `Timeout` firing
    after a slow sink started, the client gone) lets the write finish, then goes on. An event is never lost
    half written, above all the event of a write that was done."""
    task = asyncio.ensure_future(pending)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])  # (its failure is logged here: the cancellation goes on, whatever it was)
        if not task.cancelled() and task.exception() is not None:
            logger.error("audit sink failed while its call was cancelled", exc_info=task.exception())
        raise


def _outcome(response: ToolResponse) -> str:
    """The event's outcome: "ok"; "completed" for a write done although its answer could not be sent (its error's
    `details.completed`, `dispatch.completed_error`: the code says why); else "error"."""
    if not response.is_error:
        return "ok"
    error = response.view.error
    return "completed" if error is not None and error.details.get("completed") is True else "error"


async def audit_refused(call: ActionCall, layers: Iterable[Any], code: str) -> None:
    """Record `call`, refused before its middleware ran (the caller lacks its scopes: `FORBIDDEN`; it is over
    its rate limit: `RATE_LIMITED`), in each `Audit` among `layers`: a refused write is an event of the trail."""
    for layer in layers:
        if isinstance(layer, Audit):
            await layer.refused(call, code)
