"""Real processes for the scale-out tests: a `redis-server` on a free port in a temp dir, and uvicorn
replicas of a small MCPFusion app sharing it. Everything binds 127.0.0.1 and is stopped by the test.

The replica app (`make_app`, served with `uvicorn --factory tests.redis_helpers:make_app`) has one tool that
elicits, one that sends notifications on the session's GET stream, one that waits for cancellation, one
rate-limited and a fast echo; it reads `MCPFUSION_REDIS_URL` and `MCPFUSION_SIGNING_KEY` like any mcpfusion app.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from mcpfusion import Context, RateLimit, Tool
from mcpfusion.app import MCPFusion

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    """Terminate `process` if it still runs (killed after 10 s) and reap it."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def redis_server_binary() -> str:
    """`redis-server`, installed with the project's system-deps script when absent (never skipped)."""
    found = shutil.which("redis-server")
    if found is None:
        subprocess.run(["bash", str(ROOT / "scripts" / "system_deps.sh")], check=False)
        found = shutil.which("redis-server")
    if found is None:
        raise RuntimeError("redis-server is not installed and scripts/system_deps.sh could not install it")
    return found


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One `redis-server` without persistence: a restart loses every key, like a crashed cache."""

    def __init__(self, directory: str, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.directory, "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not _ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A started `RedisServer` in a temporary directory, stopped on exit (the `redis_server` fixture)."""
    with tempfile.TemporaryDirectory(prefix="mcpf-redis-") as directory:
        server = RedisServer(directory)
        server.start()
        try:
            yield server
        finally:
            server.stop()


# -- app replicas --------------------------------------------------------------------------------------

SIGNING_KEY = "scale-out-test-key"


class Replica:
    """One uvicorn process serving `make_app` on its own port."""

    def __init__(self, name: str, redis_url: str, *, json_response: bool = False) -> None:
        self.name = name
        self.port = free_port()
        self.redis_url = redis_url
        self.json_response = json_response
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        env = {**os.environ, "MCPFUSION_REDIS_URL": self.redis_url, "MCPFUSION_SIGNING_KEY": SIGNING_KEY,
               "REPLICA_NAME": self.name, "REPLICA_JSON": "1" if self.json_response else ""}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "tests.redis_helpers:make_app", "--app-dir", str(ROOT),
             "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
            env=env, cwd=str(ROOT),
        )

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base + "/healthz", timeout=1).status_code == 200:
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replica {self.name} did not start")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: the replica dies mid-request, like a crashed pod."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def replicas(redis_url: str, names: str = "ABC", **kwargs: object) -> Iterator[dict[str, Replica]]:
    started: dict[str, Replica] = {}
    try:
        for name in names:  # spawned together: the imports of one replica overlap the others'
            replica = started[name] = Replica(name, redis_url, **kwargs)  # type: ignore[arg-type]
            replica.spawn()
        for replica in started.values():
            replica.wait_ready()
        yield started
    finally:
        for replica in started.values():
            replica.stop()


def make_app():  # noqa: ANN201 - uvicorn factory
    """The replica app: built with the public API only; stores come from `MCPFUSION_REDIS_URL`."""
    name = os.environ.get("REPLICA_NAME", "?")
    desk = Tool("desk", description="Scale-out test tool", exposition="flat")

    @desk.action()
    async def echo(text: str, pause: float = 0.0) -> str:
        """Answer with the text and the replica that ran the call (after `pause` seconds)."""
        if pause:
            await asyncio.sleep(pause)
        return f"{text} from {name}"

    @desk.action()
    async def confirm(item: str, ctx: Context) -> str:
        """Ask the user to confirm, then say which replica ran the handler."""
        answer = await ctx.elicit(f"Delete {item}?", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                      "required": ["ok"]}, key="confirm")
        ok = answer.get("action") == "accept" and (answer.get("content") or {}).get("ok") is True
        return f"{'deleted' if ok else 'kept'} {item} on {name}"

    @desk.action()
    async def handoff(item: str, ctx: Context) -> str:
        """Close the response stream mid-call (the client resumes it, anywhere), then elicit."""
        await ctx.info({"step": "started", "on": name})
        ctx.close_stream()
        answer = await ctx.elicit(f"Archive {item}?", key="archive")
        return f"{answer.get('action')} {item} on {name}"

    @desk.action()
    async def announce(start: int, count: int, ctx: Context) -> str:
        """Send `count` numbered log notifications (on the GET stream in JSON mode)."""
        for i in range(start, start + count):
            await ctx.info({"n": i})
        return f"announced {count} from {name}"

    @desk.action()
    async def wait(ctx: Context) -> str:
        """Block until the client cancels (or 60 s)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ctx.wait_cancelled(), 60)
        return "cancelled" if ctx.cancelled else "timeout"

    @desk.action(readonly=True, middleware=[RateLimit(3, per=3600)])
    async def limited() -> str:
        """Three calls an hour per principal, counted in Redis across replicas."""
        return f"allowed on {name}"

    @desk.action(destructive=True, confirm=True)
    async def purge(item: str) -> str:
        """Delete an item for good: runs once per confirmation, on whichever replica gets it."""
        return f"purged {item} on {name}"

    @desk.action()
    async def redeploy() -> str:
        """Tell every connected client (on every replica) that the tool list changed."""
        await fusion.notify_tools_changed()
        return f"notified from {name}"

    fusion = MCPFusion(f"replica-{name}", "1.0.0", tools=[desk],
                       json_response=bool(os.environ.get("REPLICA_JSON")))
    app = fusion.build_app()

    @app.get("/whoami")
    async def whoami() -> dict[str, str]:
        return {"replica": name}

    return app
