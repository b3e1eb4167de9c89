"""What the in-process benchmarks share: a request sent straight into an ASGI app, and a git revision as a
directory (for the benchmarks that compare trees side by side)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class _Exchange:
    """One request as a server keeps it (uvicorn's `RequestResponseCycle`): the scope, and `send` as a bound
    method, so an app that keeps `send` reaches the scope, and any cycle through it shows here as it does
    under a real server (a closure over a list would hide it)."""

    def __init__(self, scope: dict[str, Any], body: bytes) -> None:
        self.scope = scope
        self.body = body
        self.sent = False
        self.out: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if not self.sent:
            self.sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError  # pragma: no cover - the wait never ends

    async def send(self, message: dict[str, Any]) -> None:
        self.out.append(message)


async def post(app: Any, headers: list[tuple[bytes, bytes]], body: bytes, path: str = "/mcp") -> list[dict[str, Any]]:
    """One POST through `app` (no server, no socket); the ASGI messages it sent. The client never
    disconnects, so a streaming answer runs to its end."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
    exchange = _Exchange(scope, body)
    await app(scope, exchange.receive, exchange.send)
    return exchange.out


def finished(coroutine: Any) -> Any:
    """The value of a coroutine that never suspends (a call of the service, which reads SQLite on the calling
    thread): run without an event loop turn, as the instruction counts and layer timers need."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("the call waited for something: it cannot be measured without an event loop")


def status_and_body(messages: list[dict[str, Any]]) -> tuple[int, bytes]:
    """The status and the whole body of the answer `post` collected."""
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


def export_tree(rev: str, into: Path) -> Path:
    """A directory holding `rev`: itself when it is a directory, else the git revision exported under `into`."""
    if Path(rev).is_dir():
        return Path(rev).resolve()
    target = into / rev.replace("/", "_")
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def best(fn: Any, rounds: int = 7) -> float:
    """The shortest of `rounds` wall-clock timings of `fn()`, in seconds (the least disturbed run)."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples)
