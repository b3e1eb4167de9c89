"""MCP tools/call throughput: mcpfusion against the official SDK's `MCPServer`, FastMCP and a bare FastAPI route.

Every server runs in its own process (one uvicorn worker, uvloop + httptools, no access log, 127.0.0.1 on a
free port) and serves the same invoice tool (see bench/peers/). `wrk` (one thread) POSTs one `tools/call`:

- 2026-07-28 wire: sessionless; `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` headers and the `_meta`
  envelope on every request. All three MCP servers speak this revision natively.
- 2025-11-25 wire: the harness initializes a session first, then wrk sends `Mcp-Session-Id` on every call.

Each MCP server runs twice: in JSON-response mode (its fastest path) and in SSE mode (`BENCH_MODE=sse`, what
most 2025-11-25 clients get by default: the reply is an SSE stream), measured at 2025-11-25 over a session.
The bare FastAPI route reads the body and returns mcpfusion's full 2026 response bytes. Before measuring, one
response per server and wire is checked with httpx (HTTP 200, a JSON-RPC result, not `isError`, the same
invoice data); during the run a wrk Lua hook counts any response that is not such a result, and a run with
bad responses fails.

With two cores the server is pinned to CPU 0 and wrk to CPU 1 (taskset), so they do not fight.

Throughput is reported twice: wrk's req/s, and requests per CPU-second of the server process (req/CPU-s), the
req/s one worker sustains with a core to itself. On a quiet machine the two agree (the server saturates its
core); when other jobs share the cores, req/s swings with their load while req/CPU-s moves much less (a
time-sliced core still costs some cache misses), so the ratios of the last line come from req/CPU-s by default
(`--ratio-basis wall` uses req/s). A `# busy machine` line names the cells that never had a full core.

Run: `python bench/mcp_throughput.py [--duration 5] [--rounds 3] [--connections 32]` (`--servers mcpfusion
--sse-only`: our 2025-11-25 JSON and SSE modes alone, i.e. `sse_cpu_vs_json_mcpfusion`). The last line is
`ratio_vs_sdk_2026=X ratio_vs_fastmcp_2026=Y ratio_vs_bare_fastapi=Z` (ours at 2026-07-28 over each peer);
a line before it gives `ratio_vs_bare_fastapi_paired=P` (the median of the rounds' own ratios to the bare
route), and another, per server, the CPU of an SSE reply over a JSON reply (`sse_cpu_vs_json`) and ours
in SSE mode over each peer in SSE mode.
`--middleware` adds mcpfusion with three no-op middleware around every call, measured in the same rounds;
a `middleware_cost_2026=P%` line gives what they cost against plain mcpfusion.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from peers.invoice import INVOICE_ID, PUBLIC, TOOL_NAME  # noqa: E402

MODERN, LEGACY = "2026-07-28", "2025-11-25"
SSE = "2025-11-25 SSE"  # the column of SSE-mode servers (2025-11-25 wire)
COLUMNS = (MODERN, LEGACY, SSE)
ACCEPT = "application/json, text/event-stream"
# The checks before measuring: a server's first call loads its protocol modules, slow on a busy machine.
CHECK_TIMEOUT = 60


@dataclass(frozen=True)
class Server:
    key: str
    label: str
    module: str  # "module:app", importable from bench/
    mcp: bool = True  # False: the bare route, measured once (it has no wire)
    env: tuple[tuple[str, str], ...] = ()  # extra environment of its process
    wires: tuple[str, ...] = (MODERN, LEGACY)


SERVERS = [
    Server("mcpfusion", "mcpfusion (full presenter)", "mcpfusion_server:app"),
    Server("sdk", "official SDK MCPServer (mcp)", "peers.sdk_server:app"),
    Server("fastmcp", "FastMCP", "peers.fastmcp_server:app"),
    Server("bare", "bare FastAPI route (same bytes)", "peers.bare_fastapi:app", mcp=False),
]
WITH_MIDDLEWARE = Server("mcpfusion_mw", "mcpfusion + 3 no-op middleware", "mcpfusion_server:app",
                         env=(("BENCH_MIDDLEWARE", "3"),), wires=(MODERN,))


# `--telemetry`: the same mcpfusion server with OpenTelemetry on (SDK providers, batch span processor, a
# span exporter and a metric exporter that discard), to price telemetry against the untraced server:
# tracing alone (`Telemetry(metrics=False)`; the untraced server has no metrics either) with every trace
# recorded, and full telemetry (tracing and metrics) with every trace recorded and with a parent-based 10%
# trace-id ratio sampler (a common production setting).
TRACED = Server("mcpfusion-traced", "mcpfusion, tracing alone, all recorded", "mcpfusion_server:app",
                env=(("BENCH_TELEMETRY", "1"), ("BENCH_METRICS", "0")), wires=(MODERN,))
FULL = Server("mcpfusion-full", "mcpfusion, tracing+metrics, all recorded", "mcpfusion_server:app",
              env=(("BENCH_TELEMETRY", "1"),), wires=(MODERN,))
SAMPLED = Server("mcpfusion-sampled", "mcpfusion, tracing+metrics, 10% sampled", "mcpfusion_server:app",
                 env=(("BENCH_TELEMETRY", "0.1"),), wires=(MODERN,))
TELEMETRY = (TRACED, FULL, SAMPLED)


def servers(args: argparse.Namespace) -> list[Server]:
    """The servers to run, in the order of each round: the telemetry variants right after the untraced server
    they are compared with, so that each on/off pair of a round is measured a few seconds apart."""
    variants = list(TELEMETRY) if getattr(args, "telemetry", False) else []
    return (SERVERS[:1] + variants + SERVERS[1:]
            + ([WITH_MIDDLEWARE] if getattr(args, "middleware", False) else []))


class BenchError(RuntimeError):
    pass


# -- requests --------------------------------------------------------------------------------------------


def call_body(wire: str, request_id: int = 1) -> dict[str, Any]:
    params: dict[str, Any] = {"name": TOOL_NAME, "arguments": {"id": INVOICE_ID}}
    if wire == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def call_headers(wire: str, session_id: str | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": wire}
    if wire == MODERN:
        headers.update({"Mcp-Method": "tools/call", "Mcp-Name": TOOL_NAME})
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    return headers


def open_session(base: str) -> str:
    """initialize + notifications/initialized at 2025-11-25; returns the Mcp-Session-Id."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1.0.0"}}}
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    r = httpx.post(base + "/mcp", json=init, headers=headers, timeout=CHECK_TIMEOUT)
    session_id = r.headers.get("mcp-session-id")
    if r.status_code != 200 or not session_id:
        raise BenchError(f"initialize failed: HTTP {r.status_code} {r.text[:200]}")
    headers.update({"Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY})
    r = httpx.post(base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                   headers=headers, timeout=CHECK_TIMEOUT)
    if r.status_code not in (200, 202):
        raise BenchError(f"notifications/initialized failed: HTTP {r.status_code} {r.text[:200]}")
    return session_id


def sse_reply(text: str) -> dict[str, Any]:
    """The JSON-RPC reply carried by an SSE body (the last `data:` line holding a message with an id)."""
    for line in reversed(text.splitlines()):
        if line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            if isinstance(message, dict) and "id" in message:
                return message
    raise BenchError(f"no reply in the SSE body: {text[:300]}")


def check_call(base: str, wire: str, session_id: str | None, sse: bool = False) -> bytes:
    """One tools/call, checked to be a successful result carrying the public invoice; returns the raw body."""
    r = httpx.post(base + "/mcp", json=call_body(wire), headers=call_headers(wire, session_id), timeout=CHECK_TIMEOUT)
    if r.status_code != 200:
        raise BenchError(f"tools/call at {wire}: HTTP {r.status_code} {r.text[:300]}")
    content_type = r.headers.get("content-type", "")
    if content_type.startswith("text/event-stream") and sse:
        message = sse_reply(r.text)
    elif content_type.startswith("application/json") and not sse:
        message = r.json()
    else:
        raise BenchError(f"tools/call at {wire}: expected {'SSE' if sse else 'JSON'}, got {content_type}")
    result = message.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        raise BenchError(f"tools/call at {wire} is not a successful result: {r.text[:300]}")
    texts = [c.get("text") for c in result.get("content", []) if c.get("type") == "text"]
    try:
        data = json.loads(texts[0])
    except (IndexError, TypeError, ValueError):
        data = None
    if data != PUBLIC and result.get("structuredContent") != PUBLIC:
        raise BenchError(f"tools/call at {wire} did not return the invoice: {r.text[:300]}")
    return r.content


# -- processes -------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(cpu: int) -> list[str]:
    """`taskset -c cpu` when there are spare cores to separate server and load generator."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu)]
    return []


# mcpfusion's servers run as `mcpfusion serve` runs them: with the collector's serving profile once started (the
# start-up heap frozen, a young generation of 7,000; mcpfusion.collector; the peers ignore the variable).
# `--no-gc-tuning` measures them without.
GC_TUNING = {"MCPFUSION_GC_TUNING": "1"}


class Uvicorn:
    """One uvicorn worker serving `module` on a free port; a context manager that stops it."""

    def __init__(self, module: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [*pin(0), sys.executable, "-m", "uvicorn", module, "--app-dir", str(BENCH_DIR),
               "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1", "--loop", "uvloop",
               "--http", "httptools", "--no-access-log", "--log-level", "warning"]
        self.proc = subprocess.Popen(cmd, env={**os.environ, **GC_TUNING, **(env or {})}, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)

    def __enter__(self) -> Uvicorn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"server exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise BenchError("server did not start within 30 s")

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (Linux /proc; 0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- wrk -------------------------------------------------------------------------------------------------

# Each request gets its own JSON-RPC id: ids must not be reused within a session (the SDK's session transport
# routes replies by id, so concurrent calls with one id would collide), and all servers get the same treatment.
LUA_TEMPLATE = """
wrk.method = "POST"
{headers}
local prefix = [==[{prefix}]==]
local suffix = [==[{suffix}]==]
local threads = {{}}
function setup(thread)
  thread:set("id_base", #threads * 1000000000)
  table.insert(threads, thread)
end
function init(args) bad = 0; first_bad = ""; counter = id_base end
function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil, prefix .. counter .. suffix)
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"result"', 1, true)
     or string.find(body, '"isError":true', 1, true) or string.find(body, '"isError": true', 1, true) then
    bad = bad + 1
    if first_bad == "" then first_bad = status .. " " .. string.sub(body, 1, 300) end
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do
    total = total + t:get("bad")
    local sample = t:get("first_bad")
    if sample ~= "" then io.write("bench_first_bad=" .. string.gsub(sample, "\\n", " ") .. "\\n") end
  end
  io.write(string.format("bench_bad_responses=%d\\n", total))
end
"""


def lua_script(body: dict[str, Any], headers: dict[str, str]) -> str:
    """A wrk script POSTing `body` with `headers`, a fresh integer id per request, counting bad responses."""
    marker = "__BENCH_ID__"
    text = json.dumps({**body, "id": marker}, separators=(",", ":"))
    prefix, suffix = text.split(f'"{marker}"')
    lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    return LUA_TEMPLATE.format(prefix=prefix, suffix=suffix, headers=lines)


@dataclass
class WrkResult:
    rps: float
    requests: int
    bad: int
    non_2xx: int
    socket_errors: int
    first_bad: str
    server_cpu: float = 0.0  # CPU seconds the server process used during the run

    @property
    def per_cpu(self) -> float:
        """Requests per CPU-second of the server: what it would serve with a core to itself."""
        return self.requests / self.server_cpu if self.server_cpu > 0 else 0.0


def run_wrk(url: str, script: str, duration: float, connections: int, threads: int) -> WrkResult:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        cmd = [*pin(1), "wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration))}s",
               "--timeout", "10s", "-s", f.name, url]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    finally:
        os.unlink(f.name)

    def grab(pattern: str, default: str | None = None) -> str:
        m = re.search(pattern, out)
        if m is None:
            if default is not None:
                return default
            raise BenchError(f"unexpected wrk output:\n{out}")
        return m.group(1)

    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return WrkResult(
        rps=float(grab(r"Requests/sec:\s+([\d.]+)")),
        requests=int(grab(r"(\d+) requests in")),
        bad=int(grab(r"bench_bad_responses=(\d+)")),
        non_2xx=int(grab(r"Non-2xx or 3xx responses: (\d+)", "0")),
        socket_errors=sum(int(g) for g in sock.groups()) if sock else 0,
        first_bad=grab(r"bench_first_bad=(.*)", ""),
    )


@dataclass
class Target:
    """One (server, wire) cell of the table: where to send what, and its results per round."""

    server: Server
    column: str  # MODERN, LEGACY or SSE
    proc: Uvicorn
    script: str
    rounds: list[WrkResult]

    @property
    def wire(self) -> str:
        return LEGACY if self.column == SSE else self.column

    @property
    def best(self) -> float:
        return max(r.rps for r in self.rounds)

    @property
    def best_per_cpu(self) -> float:
        return max(r.per_cpu for r in self.rounds)


def paired_ratio(a: Target, b: Target) -> float:
    """The median over the rounds of a's req/CPU-s over b's in that round: each round measures the two seconds
    apart, so this moves less with a host drifting between rounds than the ratio of the best rounds."""
    return statistics.median(x.per_cpu / y.per_cpu for x, y in zip(a.rounds, b.rounds, strict=True))


def measure(target: Target, seconds: float, args: argparse.Namespace, phase: str = "run") -> WrkResult:
    """One wrk run; any unsuccessful response fails the benchmark (it would inflate req/s)."""
    cpu_before = target.proc.cpu_seconds()
    result = run_wrk(target.proc.base + "/mcp", target.script, seconds, args.connections, args.threads)
    result.server_cpu = target.proc.cpu_seconds() - cpu_before
    if result.bad or result.non_2xx or result.requests == 0:
        raise BenchError(f"{target.server.label} at {target.column} ({phase}): {result.bad} bad responses "
                         f"({result.non_2xx} non-2xx) of {result.requests}; first: {result.first_bad or '-'}")
    return result


def prepare(server: Server, proc: Uvicorn, body_file: Path, sse: bool = False,
            wires: tuple[str, ...] | None = None) -> list[Target]:
    """Check that `server` answers a successful tools/call at each wire (`wires`, default the server's);
    the cells to measure.

    An SSE-mode server is measured at 2025-11-25 only (on 2026-07-28 a reply without intermediate messages
    is JSON in every server)."""
    if not server.mcp:
        r = httpx.post(proc.base + "/mcp", json=call_body(MODERN), headers=call_headers(MODERN), timeout=CHECK_TIMEOUT)
        if r.status_code != 200 or r.content != body_file.read_bytes():
            raise BenchError("the bare route did not return mcpfusion's bytes")
        return [Target(server, MODERN, proc, lua_script(call_body(MODERN), call_headers(MODERN)), [])]
    targets = []
    for wire in (LEGACY,) if sse else wires or server.wires:
        session_id = open_session(proc.base) if wire == LEGACY else None
        raw = check_call(proc.base, wire, session_id, sse)
        if server.key == "mcpfusion" and wire == MODERN:
            body_file.write_bytes(raw)
        script = lua_script(call_body(wire), call_headers(wire, session_id))
        targets.append(Target(server, SSE if sse else wire, proc, script, []))
    return targets


def run_all(args: argparse.Namespace) -> dict[tuple[str, str], Target]:
    """Start every server (idle ones cost nothing), check them, then measure in interleaved rounds.

    Rounds are interleaved and the best round counts, so a burst of load from elsewhere on a shared machine
    lowers one round of one cell rather than one server's whole figure."""
    targets: list[Target] = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        body_file = Path(tmp) / "mcpfusion_response.json"
        chosen = [s for s in servers(args) if s.key in args.servers or s in (*TELEMETRY, WITH_MIDDLEWARE)]
        sse_only = getattr(args, "sse_only", False)
        if sse_only:  # the two cells of `sse_cpu_vs_json`: no bare route, no 2026 wire, no variants
            chosen = [s for s in chosen if s in SERVERS and s.mcp]
        for server in chosen:  # mcpfusion first: the bare route replays its captured bytes
            env = {"BENCH_BODY_FILE": str(body_file), **dict(server.env)}
            proc = stack.enter_context(Uvicorn(server.module, env))
            targets.extend(prepare(server, proc, body_file, wires=(LEGACY,) if sse_only else None))
            if server in SERVERS and server.mcp:  # SSE mode of each peer (not of the tracing variant)
                proc = stack.enter_context(Uvicorn(server.module, {"BENCH_MODE": "sse"}))
                targets.extend(prepare(server, proc, body_file, sse=True))
        if args.warmup > 0:
            for target in targets:
                measure(target, args.warmup, args, "warm-up")
        for _ in range(args.rounds):
            for target in targets:
                target.rounds.append(measure(target, args.duration, args))
    return {(t.server.key, t.column): t for t in targets}


def report(cells: dict[tuple[str, str], Target], args: argparse.Namespace) -> None:
    """The table (best round per cell), every round, then the ratio lines (the last line is the contract)."""
    print(f"tools/call throughput, best of {args.rounds} interleaved rounds of wrk -t{args.threads} "
          f"-c{args.connections} -d{args.duration:g}s; one uvicorn worker each (uvloop, httptools)")
    print("MCP servers in JSON-response mode, and in SSE mode at 2025-11-25 (column SSE); the SDK and FastMCP "
          "serve 2026-07-28 natively (sessionless); 2025-11-25 over an initialized session")
    print("req/CPU-s = requests per CPU-second of the server process (less sensitive to other load on the machine)")
    heads = [f"{column} {unit}" for column in COLUMNS for unit in ("req/s", "req/CPU-s")]
    print(f"| {'server':<34} | " + " | ".join(f"{h:>24}" for h in heads) + " |")
    print(f"|{'-' * 36}|" + "|".join("-" * 25 + ":" for _ in heads) + "|")
    for server in servers(args):
        shown = []
        for column in COLUMNS:
            cell = cells.get((server.key, column))
            shown += [f"{cell.best:,.0f}", f"{cell.best_per_cpu:,.0f}"] if cell else ["n/a", "n/a"]
        print(f"| {server.label:<34} | " + " | ".join(f"{v:>24}" for v in shown) + " |")
    starved = []
    for target in cells.values():
        rounds = ", ".join(f"{r.rps:.0f} req/s at {100 * r.server_cpu / args.duration:.0f}% cpu"
                           for r in target.rounds)
        print(f"# {target.server.key} {target.column}: {rounds}")
        if max(r.server_cpu for r in target.rounds) < 0.9 * args.duration:
            starved.append(f"{target.server.key} {target.column}")
    if starved:
        print(f"# busy machine: no round gave a full core to {', '.join(starved)}; re-run when it is quieter")

    def ratios(attr: str) -> str:
        ours = getattr(cells["mcpfusion", MODERN], attr)
        return " ".join(f"{name}={ours / getattr(cells[key, MODERN], attr):.2f}" for name, key in
                        (("ratio_vs_sdk_2026", "sdk"), ("ratio_vs_fastmcp_2026", "fastmcp"),
                         ("ratio_vs_bare_fastapi", "bare")))

    # CPU of an SSE reply over a JSON reply, per server (req/CPU-s of JSON mode over SSE mode, 2025-11-25).
    def per_cpu(key: str, column: str) -> float:
        return cells[key, column].best_per_cpu

    for traced, what in ((TRACED, "tracing"), (FULL, "telemetry"), (SAMPLED, "telemetry")):
        if (traced.key, MODERN) in cells and ("mcpfusion", MODERN) in cells:
            on, off = cells[traced.key, MODERN], cells["mcpfusion", MODERN]
            paired = paired_ratio(on, off)
            print(f"{what} on/off at {MODERN} ({traced.label}): req/CPU-s {on.best_per_cpu:,.0f} / "
                  f"{off.best_per_cpu:,.0f} = {on.best_per_cpu / off.best_per_cpu:.2f}, req/s {on.best:,.0f} / "
                  f"{off.best:,.0f} = {on.best / off.best:.2f}, median of the rounds' req/CPU-s ratios "
                  f"{paired:.2f}" + (" (target >= 0.90)" if traced is TRACED else ""))
            if traced is TRACED:
                print(f"tracing_on_off={on.best_per_cpu / off.best_per_cpu:.2f} tracing_on_off_paired={paired:.2f}")
    measured = [s.key for s in SERVERS if s.mcp and (s.key, SSE) in cells]
    sse_cost = [f"sse_cpu_vs_json_{key}={per_cpu(key, LEGACY) / per_cpu(key, SSE):.2f}" for key in measured]
    if "mcpfusion" in measured:
        sse_cost += [f"ratio_vs_{key}_sse={per_cpu('mcpfusion', SSE) / per_cpu(key, SSE):.2f}"
                     for key in measured if key != "mcpfusion"]
    print(f"SSE mode (req/CPU-s): {' '.join(sse_cost)}")
    if not all((key, MODERN) in cells for key in ("mcpfusion", "sdk", "fastmcp", "bare")):
        return  # a subset of servers (--servers): no peer ratios
    basis, other = ("best_per_cpu", "best") if args.ratio_basis == "cpu" else ("best", "best_per_cpu")
    if ("mcpfusion_mw", MODERN) in cells and ("mcpfusion", MODERN) in cells:
        plain, wrapped = cells["mcpfusion", MODERN], cells["mcpfusion_mw", MODERN]
        costs = {name: 100 * (1 - getattr(wrapped, attr) / getattr(plain, attr))
                 for name, attr in (("req/s", "best"), ("req/CPU-s", "best_per_cpu"))}
        print(f"# three no-op middleware at {MODERN}: {costs['req/s']:.1f}% of req/s, "
              f"{costs['req/CPU-s']:.1f}% of req/CPU-s")
        print(f"middleware_cost_2026={costs['req/CPU-s' if basis == 'best_per_cpu' else 'req/s']:.1f}%")
    print(f"ratios from {'req/s' if other == 'best' else 'req/CPU-s'}: {ratios(other)}")
    paired = paired_ratio(cells["mcpfusion", MODERN], cells["bare", MODERN])
    print(f"median of the rounds' req/CPU-s ratios to the bare route: ratio_vs_bare_fastapi_paired={paired:.2f}")
    print(f"ratios from {'req/CPU-s' if basis == 'best_per_cpu' else 'req/s'} (below):")
    print(ratios(basis))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured run (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds, the best counts (default 3)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of unmeasured load first (default 2)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    parser.add_argument("--servers", type=lambda v: v.split(","), default=[s.key for s in SERVERS],
                        help="comma-separated subset of mcpfusion,sdk,fastmcp,bare (default all; ratios need all)")
    parser.add_argument("--sse-only", action="store_true",
                        help="only each MCP server's 2025-11-25 cells, JSON and SSE mode (the sse_cpu_vs_json line); "
                             "with --servers mcpfusion: our SSE/JSON ratio alone")
    parser.add_argument("--middleware", action="store_true",
                        help="also serve mcpfusion with three no-op middleware and report their cost")
    parser.add_argument("--ratio-basis", choices=["cpu", "wall"], default="cpu",
                        help="last line from req/CPU-s (default: robust when other jobs share the cores) "
                             "or from wrk's req/s")
    parser.add_argument("--telemetry", action="store_true",
                        help="also serve mcpfusion with OpenTelemetry on (no-op export), every trace recorded and "
                             "10%% sampled, and print on/off")
    parser.add_argument("--no-gc-tuning", action="store_true",
                        help="serve mcpfusion without MCPFUSION_GC_TUNING=1 (what `mcpfusion serve` sets)")
    args = parser.parse_args(argv)
    if args.no_gc_tuning:
        GC_TUNING["MCPFUSION_GC_TUNING"] = "0"
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install -y wrk (scripts/system_deps.sh does it)", file=sys.stderr)
        return 2
    report(run_all(args), args)
    return 0


def run_cli(entry: Callable[[], int]) -> None:
    """A benchmark's `__main__`: its exit code, or 1 with the reason on stderr when it fails (`BenchError`)."""
    try:
        sys.exit(entry())
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run_cli(main)
