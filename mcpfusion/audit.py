"""Audit trail: one structured event per mutating call, to a pluggable sink (JSON log lines by default).

    MCPFusion("billing", middleware=[Audit()])                  # logger "mcpfusion.audit", one JSON line each
    MCPFusion("billing", middleware=[Audit(sink=events.append)])  # any callable (sync or async) of the event

An event names who (principal, tenant), what (`tool.action`, a keyed digest of the arguments and their
names - never their values), how it ended (outcome, error code), how long it took and the request id:

    {"event": "audit", "time": "2026-12-01T00:00:00.000+00:00", "request_id": "…", "transport": "mcp",
     "principal": "demo-admin", "tenant": "acme", "action": "billing.void_invoice",
     "arguments": {"digest": "hmac-sha256:…", "fields": ["id", "reason"]},
     "outcome": "ok", "error_code": null, "duration_ms": 3.2}

Read-only actions are not audited unless `mutations_only=False`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Callable
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


def log_sink(event: dict[str, Any]) -> None:
    """The default sink: the event as one JSON line on the `mcpfusion.audit` logger (level INFO)."""
    logger.info(json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str))


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
            "request_id": call.request_id,
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

    def describe(self) -> str:
        return "audit: one event per mutating call" if self.mutations_only else "audit: one event per call"
