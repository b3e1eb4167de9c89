"""Liveness (`/healthz`) and readiness (`/readyz`) for load balancers, compose and Kubernetes.

Liveness only says the process answers. Readiness runs every registered check (the database, Redis, ...)
concurrently, each under a timeout, and answers 503 while any fails, so traffic leaves a replica that cannot
serve and comes back once it can. Check failures are reported and logged by name and exception type only:
a connection string or password in an exception message never reaches the response nor the log.

A check is an `async def`, or a plain `def` run off the event loop (as FastAPI runs a plain `def`
dependency). Every `MCPFusion` mounted on one app adds its checks to the app's one `/readyz` (`ReadinessGroup`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

logger = logging.getLogger("mcpfusion.health")

Check = Callable[[], Any]
"""A readiness check: an async (or plain) function that raises, or returns False, when its dependency is
unreachable."""


class ThreadedCheck:
    """A plain `def` check, run in a daemon thread. One run at a time: the probes that arrive while it runs
    wait for that run, so a check that hangs holds one thread, never one per probe, and never holds up the
    process's exit. (FastAPI's thread pool cannot give up a call at the probe's timeout: it would wait.)"""

    def __init__(self, check: Callable[[], Any]) -> None:
        self.check = check
        self._lock = threading.Lock()
        self._running: concurrent.futures.Future[Any] | None = None

    async def __call__(self) -> Any:
        with self._lock:
            running = self._running
            if running is None or running.done():
                running = self._running = concurrent.futures.Future()
                running.set_running_or_notify_cancel()  # (a probe that times out cannot cancel the shared run)
                threading.Thread(target=self._run, args=(running,), name="mcpfusion-readiness", daemon=True).start()
        outcome = await asyncio.wrap_future(running)
        return await outcome if inspect.isawaitable(outcome) else outcome  # (a `def` that returns a coroutine)

    def _run(self, future: concurrent.futures.Future[Any]) -> None:
        try:
            future.set_result(self.check())
        except Exception as exc:  # handed to the probe, which reports its type
            future.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - in this thread even SystemExit stops nothing but the check,
            # and re-raised on the event loop a KeyboardInterrupt or SystemExit would stop the whole server
            future.set_exception(CheckAborted(type(exc).__name__))


def _is_async(check: Callable[..., Any]) -> bool:
    """An `async def` function (or a partial of one), or an object whose `__call__` is one."""
    return inspect.iscoroutinefunction(check) or inspect.iscoroutinefunction(type(check).__call__)


class Readiness:
    """Named readiness checks, run together under `timeout` seconds each."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self.checks: dict[str, Callable[[], Awaitable[Any]]] = {}

    def add(self, name: str, check: Check) -> None:
        self.checks[name] = check if _is_async(check) else ThreadedCheck(check)

    async def run(self) -> tuple[bool, dict[str, str]]:
        """(ready, state of every check: `ok` or why not)."""
        names = list(self.checks)
        states = await asyncio.gather(*(self._one(name, self.checks[name]) for name in names))
        results = dict(zip(names, states, strict=True))
        return all(state == "ok" for state in states), results

    async def _one(self, name: str, check: Callable[[], Awaitable[Any]]) -> str:
        try:
            async with asyncio.timeout(self.timeout):
                outcome = await check()
        except TimeoutError:
            logger.warning("readiness check %r timed out after %ss", name, self.timeout)
            return "timeout"
        except (KeyboardInterrupt, SystemExit):
            raise  # raised on the event loop's own thread: the process is stopping
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the probe itself is cancelled (its client left, the server stops): not the check's failure
            return _failed(name, exc)  # an operation inside the check was cancelled (a pool reset...)
        except BaseException as exc:  # noqa: BLE001 - any other failure of a check is the dependency's, never a 500
            return _failed(name, exc)
        return "unavailable" if outcome is False else "ok"


class CheckAborted(Exception):
    """A plain `def` check raised a BaseException in its thread (`KeyboardInterrupt`, `SystemExit`...): a failure
    of that check, reported under the name of what it raised."""


def _failed(name: str, exc: BaseException) -> str:
    """A check's failure, logged and reported by its type only: the message may hold a connection string
    (and every probe logs)."""
    kind = str(exc) if isinstance(exc, CheckAborted) else type(exc).__name__
    logger.warning("readiness check %r failed: %s", name, kind)
    return f"unavailable ({kind})"


class ReadinessGroup:
    """The readiness of an app: the checks of every `MCPFusion` mounted on it, run together. A check name two
    fusions both use (each its "redis") is reported as `fusion/name` for the fusions after the first."""

    def __init__(self) -> None:
        self.members: list[tuple[str, Readiness]] = []

    def include(self, fusion_name: str, readiness: Readiness) -> None:
        self.members.append((fusion_name, readiness))

    async def run(self) -> tuple[bool, dict[str, str]]:
        outcomes = await asyncio.gather(*(readiness.run() for _, readiness in self.members))
        merged: dict[str, str] = {}
        for (fusion_name, _), (_, states) in zip(self.members, outcomes, strict=True):
            for name, state in states.items():
                merged[_free_key(merged, name, fusion_name)] = state
        return all(ready for ready, _ in outcomes), merged


def _free_key(taken: dict[str, str], name: str, fusion_name: str) -> str:
    """`name`, or `fusion/name` when another fusion reported `name` already (numbered if even that is taken)."""
    if name not in taken:
        return name
    key, n = f"{fusion_name}/{name}", 1
    while key in taken:
        n += 1
        key = f"{fusion_name}/{name}#{n}"
    return key


class HeadServedToo(APIRoute):
    """A documented GET route whose path also answers HEAD, through an undocumented route of its own (RFC 9110:
    HEAD wherever GET is served; one route of both methods would document a second operation). Routing answers
    a method neither serves with this route's 405, whose `Allow` then names HEAD too."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.methods and scope["method"] not in self.methods:
            raise HTTPException(405, headers={"Allow": ", ".join(sorted({*self.methods, "HEAD"}))})
        await super().handle(scope, receive, send)


async def healthz() -> dict[str, str]:
    """Liveness: the process is up and its event loop answers."""
    return {"status": "ok"}


def readyz_endpoint(readiness: Readiness | ReadinessGroup) -> Callable[[], Awaitable[JSONResponse]]:
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

__all__ = ["Check", "HeadServedToo", "Readiness", "ReadinessGroup", "ThreadedCheck", "healthz", "readyz_endpoint"]
