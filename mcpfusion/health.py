"""Liveness (`/healthz`) and readiness (`/readyz`) for load balancers, compose and Kubernetes.

Liveness only says the process answers. Readiness runs every registered check (the database, Redis, ...)
concurrently, each under a timeout, and answers 503 while any fails, so traffic leaves a replica that cannot
serve and comes back once it can. Check failures are reported and logged by name and exception type only:
a connection string or password in an exception message never reaches the response nor the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import JSONResponse

logger = logging.getLogger("mcpfusion.health")

Check = Callable[[], Awaitable[Any]]
"""A readiness check: an async function that raises (or returns False) when its dependency is unreachable."""


class Readiness:
    """Named readiness checks, run together under `timeout` seconds each."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self.checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        self.checks[name] = check

    async def run(self) -> tuple[bool, dict[str, str]]:
        """(ready, state of every check: `ok` or why not)."""
        names = list(self.checks)
        states = await asyncio.gather(*(self._one(name, self.checks[name]) for name in names))
        results = dict(zip(names, states, strict=True))
        return all(state == "ok" for state in states), results

    async def _one(self, name: str, check: Check) -> str:
        try:
            async with asyncio.timeout(self.timeout):
                outcome = await check()
        except TimeoutError:
            logger.warning("readiness check %r timed out after %ss", name, self.timeout)
            return "timeout"
        except Exception as exc:  # its type only: the message may hold a connection string (every probe logs)
            logger.warning("readiness check %r failed: %s", name, type(exc).__name__)
            return f"unavailable ({type(exc).__name__})"
        return "unavailable" if outcome is False else "ok"


async def healthz() -> dict[str, str]:
    """Liveness: the process is up and its event loop answers."""
    return {"status": "ok"}


def readyz_endpoint(readiness: Readiness) -> Callable[[], Awaitable[JSONResponse]]:
    async def readyz() -> JSONResponse:
        """Readiness: 200 when every check passes, 503 (with Retry-After) while one does not."""
        ready, checks = await readiness.run()
        if ready:
            return JSONResponse({"status": "ready", "checks": checks})
        return JSONResponse({"status": "unavailable", "checks": checks}, status_code=503,
                            headers={"Retry-After": "5"})

    return readyz


READYZ_RESPONSES: dict[int | str, dict[str, Any]] = {
    503: {"description": "A dependency (database, Redis, ...) is unreachable; the body names it"},
}
# `/healthz`'s answer documented as FastAPI documents `-> dict[str, str]`, written out: a response model would make
# FastAPI import `pydantic.v1` at start-up (to rule out a v1 model: ~35 ms, a tenth of building a big server) and
# validate a constant answer on every probe. tests/test_cold_start.py checks it against FastAPI's own.
HEALTHZ_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {"schema": {
        "additionalProperties": {"type": "string"}, "type": "object", "title": "Response Healthz Healthz Get"}}}},
}

__all__ = ["Check", "Readiness", "healthz", "readyz_endpoint"]
