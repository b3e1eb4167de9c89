"""Audit trail: one structured event per mutating call, to a pluggable sink (JSON log lines by default).

    MCPFusion("billing", middleware=[Audit()])                  # logger "mcpfusion.audit", one JSON line each
    MCPFusion("billing", middleware=[Audit(sink=events.append)])  # any callable (sync or async) of the event

An event names who (principal, tenant), what (`tool.action`, a keyed digest of the arguments and their
names - never their values), how it ended (outcome, error code), how long it took and the request id:

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
import inspect
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException

from .mcp.jsonrpc import McpError, ProtocolSignal
from .middleware import ActionCall, CallNext
from .response import ToolResponse

if TYPE_CHECKING:
    from .tool import Action

logger = logging.getLogger("mcpfusion.audit")
Sink = Callable[[dict[str, Any]], Any]
# An `X-Request-ID` the event keeps: printable ASCII without spaces, at most 128 characters (a UUID is 36).
_REQUEST_ID = re.compile(r"[!-~]{1,128}")


def log_sink(event: dict[str, Any]) -> None:
    """The default sink: the event as one JSON line on the `mcpfusion.audit` logger (level INFO). ASCII only:
    a character some readers split lines at (NEL, U+2028) arrives escaped, so the line stays one line."""
    logger.info(json.dumps(event, ensure_ascii=True, separators=(",", ":"), default=str))


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
        except asyncio.CancelledError:
            await self._emit(call, started, "cancelled", None)
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
        await self._emit(call, started, "error" if response.is_error else "ok", response.error_code)
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
            "arguments": {"digest": f"hmac-sha256:{call.arguments_digest()}", "fields": sorted(call.raw_arguments)},
            "outcome": outcome,
            "error_code": code,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        }
        try:
            result = self.sink(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("audit sink failed for %s", call.action.qualified_name)

    async def refused(self, call: ActionCall, code: str) -> None:
        """Record a call refused before the middleware ran (`FORBIDDEN`, `RATE_LIMITED`)."""
        if self.applies_to(call.action):
            await self._emit(call, time.perf_counter(), "error", code)

    def describe(self) -> str:
        return "audit: one event per mutating call" if self.mutations_only else "audit: one event per call"


async def audit_refused(call: ActionCall, layers: Iterable[Any], code: str) -> None:
    """Record `call`, refused before its middleware ran (the caller lacks its scopes: `FORBIDDEN`; it is over
    its rate limit: `RATE_LIMITED`), in each `Audit` among `layers`: a refused write is an event of the trail."""
    for layer in layers:
        if isinstance(layer, Audit):
            await layer.refused(call, code)
