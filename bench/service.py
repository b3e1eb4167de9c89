"""The reference service's MCP calls against plain FastAPI routes making the same store calls.

One uvicorn worker (uvloop, httptools, no access log) pinned to CPU 0 serves `bench/service_server.py`: the
reference service (`app.main.create_app`, SQLite file seeded with the demo data, demo bearer tokens) and
`POST /plain/{action}` routes that make the same `BillingStore` call through the same dependencies
(`app.deps.get_store`: caller, tenant, database) and return its result through the models the presenters
use (FastAPI `response_model`: validated, hidden fields removed). Each cell's route is the first its application
tries (the MCP endpoint in the service as it is; each plain route in a service application of its own).
`wrk -t1` pinned to CPU 1 drives each cell in interleaved rounds; the best round counts.

- MCP: a 2026-07-28 `tools/call` of the `billing` tool with action `get_invoice`, `list_invoices` or
  `revenue_summary` (JSON reply; the service's presenters, redaction, rules and UI blocks included).
- plain: `POST /plain/get_invoice` etc. with the same arguments and the same token.
- MCP data only (`get_invoice`, `list_invoices`): a `tools/call` of `bench_data`, the same store call answered
  through the plain route's model without the service's presentation (the list paginated as billing's is; see
  `service_server.py`): it splits the overhead into the MCP call's own path and what the presentation (UI
  blocks, rules, suggestions) costs.

Before measuring, each cell's reply is checked (HTTP 200, the invoice id or the summary in it, and for MCP a
result that is not `isError`); during the runs a wrk Lua hook counts any other reply and fails the run.
Figures are req/s and req/CPU-s (requests per CPU-second of the server process; see mcp_throughput.py).
`overhead` is how much more CPU an MCP call takes than the plain route: plain req/CPU-s / MCP req/CPU-s - 1,
of each cell's best round. `paired` is the median over the rounds of that ratio within each round (a round runs
its cells one after the other, so the two sides of a ratio see the same host): on a host whose speed drifts
from round to round, the steadier of the two.

`--in-process N` measures without HTTP: the same requests sent straight to the ASGI app of
`service_server.py` in this process, N per cell and round with `--connections` of them at once, and
req/CPU-s from this process's CPU time (req/s is then wall time). On a busy machine this is the steadier
comparison: no scheduler share of a pinned worker, no wrk; the HTTP server's own cost is left out.

Run: `python bench/service.py [--duration 5] [--rounds 3] [--connections 16] [--in-process N]`. The last line
is `overhead_get_invoice=X overhead_list_invoices=Y overhead_revenue_summary=Z overhead_get_invoice_data_only=W
overhead_list_invoices_data_only=V get_invoice_rps_per_cpu=N`, then `overhead_ACTION_paired=P` for the three calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from harness import post, status_and_body  # noqa: E402
from mcp_throughput import BenchError, Uvicorn, WrkResult, run_wrk  # noqa: E402

TOKEN = "demo-admin"
INVOICE_ID = "inv_0002"  # an acme invoice with two lines
CALLS: dict[str, dict[str, Any]] = {
    "get_invoice": {"id": INVOICE_ID},
    "list_invoices": {},
    "revenue_summary": {},
}
EXPECT = {"get_invoice": INVOICE_ID, "list_invoices": INVOICE_ID, "revenue_summary": "outstanding_cents"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0.0"}}

LUA = """
wrk.method = "POST"
wrk.path = "{path}"
wrk.body = [==[{body}]==]
{headers}
function init(args) bad = 0; first_bad = "" end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, [==[{expect}]==], 1, true)
     or string.find(body, '"isError":true', 1, true) then
    bad = bad + 1
    if first_bad == "" then first_bad = status .. " " .. string.sub(body, 1, 300) end
  end
end
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
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


@dataclass
class Cell:
    action: str
    kind: str  # "mcp", "plain" or "data" (MCP, the data only)
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    rounds: list[WrkResult]

    def script(self) -> str:
        lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in self.headers.items())
        return LUA.format(path=self.path, body=json.dumps(self.body, separators=(",", ":")), headers=lines,
                          expect=EXPECT[self.action])

    @property
    def best(self) -> float:
        return max(r.rps for r in self.rounds)

    @property
    def best_per_cpu(self) -> float:
        return max(r.per_cpu for r in self.rounds)


def cells() -> list[Cell]:
    out = []
    for action, args in CALLS.items():
        name = "billing_read"  # billing is exposed by annotation profile: these reads are actions of billing_read
        mcp_body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": name, "arguments": {"action": action, **args}, "_meta": META}}
        mcp_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": "2026-07-28",
                       "Mcp-Method": "tools/call", "Mcp-Name": name}
        out.append(Cell(action, "mcp", "/mcp", mcp_body, mcp_headers, []))
        plain_headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
        out.append(Cell(action, "plain", f"/plain/{action}", args, plain_headers, []))
        if action != "revenue_summary":
            data_body = {**mcp_body, "params": {**mcp_body["params"], "name": "bench_data"}}
            out.append(Cell(action, "data", "/mcp", data_body, {**mcp_headers, "Mcp-Name": "bench_data"}, []))
    return out


def check(server: Uvicorn, cell: Cell) -> None:
    r = httpx.post(server.base + cell.path, json=cell.body, headers=cell.headers, timeout=30)
    if r.status_code != 200 or EXPECT[cell.action] not in r.text:
        raise BenchError(f"{cell.kind} {cell.action}: HTTP {r.status_code} {r.text[:300]}")
    if cell.kind != "plain":
        result = r.json().get("result")
        if not isinstance(result, dict) or result.get("isError"):
            raise BenchError(f"mcp {cell.action} is not a successful result: {r.text[:300]}")


def measure(server: Uvicorn, cell: Cell, seconds: float, args: argparse.Namespace) -> WrkResult:
    cpu_before = server.cpu_seconds()
    result = run_wrk(server.base + cell.path, cell.script(), seconds, args.connections, 1)
    result.server_cpu = server.cpu_seconds() - cpu_before
    if result.bad or result.non_2xx or result.requests == 0:
        raise BenchError(f"{cell.kind} {cell.action}: {result.bad} bad responses of {result.requests}; "
                         f"first: {result.first_bad or '-'}")
    return result


def run(args: argparse.Namespace) -> list[Cell]:
    todo = [c for c in cells() if c.action in args.actions]
    with tempfile.TemporaryDirectory() as tmp:
        # One caller at thousands of calls a second: the service's rate limit is raised out of reach (its
        # bookkeeping still runs on every call, so its cost stays in the figures).
        env = {"DATABASE_URL": f"sqlite:///{Path(tmp) / 'billing.sqlite3'}", "MCPFUSION_DEMO": "1",
               "MCPFUSION_RATE_LIMIT": "1000000000"}
        with Uvicorn("service_server:app", env) as server:
            for cell in todo:
                check(server, cell)
            if args.warmup > 0:
                for cell in todo:
                    measure(server, cell, args.warmup, args)
            for _ in range(args.rounds):
                for cell in todo:
                    cell.rounds.append(measure(server, cell, args.duration, args))
    return todo


def run_in_process(args: argparse.Namespace) -> list[Cell]:
    """Each cell's request sent `args.in_process` times straight to the ASGI app, in this process."""
    todo = [c for c in cells() if c.action in args.actions]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"DATABASE_URL": f"sqlite:///{Path(tmp) / 'billing.sqlite3'}", "MCPFUSION_DEMO": "1",
                           "MCPFUSION_RATE_LIMIT": "1000000000"})
        import uvloop
        from service_server import app

        async def call(cell: Cell) -> tuple[int, bytes]:
            headers = [*((k.lower().encode(), v.encode()) for k, v in cell.headers.items()), (b"host", b"127.0.0.1")]
            return status_and_body(await post(app, headers, json.dumps(cell.body).encode(), cell.path))

        async def measure_cell(cell: Cell) -> WrkResult:
            gate = asyncio.Semaphore(args.connections)
            bad: list[str] = []

            async def one() -> None:
                async with gate:
                    status, text = await call(cell)
                    if status != 200 or EXPECT[cell.action].encode() not in text or b'"isError":true' in text:
                        bad.append(f"{status} {text[:300]!r}")

            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(one() for _ in range(args.in_process)))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            if bad:
                raise BenchError(f"{cell.kind} {cell.action}: {len(bad)} bad responses; first: {bad[0]}")
            return WrkResult(args.in_process / wall, args.in_process, 0, 0, 0, "", cpu)

        async def main() -> None:
            async with app.router.lifespan_context(app):
                for cell in todo:
                    await measure_cell(cell)  # warm-up and the reply check
                for _ in range(args.rounds):
                    for cell in todo:
                        cell.rounds.append(await measure_cell(cell))

        uvloop.run(main())
    return todo


def report(done: list[Cell], args: argparse.Namespace) -> None:
    if args.in_process:
        print(f"reference service on SQLite, in process (ASGI app called directly, no HTTP server), best of "
              f"{args.rounds} interleaved rounds of {args.in_process} calls, {args.connections} at once")
    else:
        print(f"reference service on SQLite, best of {args.rounds} interleaved rounds of wrk -t1 "
              f"-c{args.connections} -d{args.duration:g}s; one uvicorn worker (uvloop, httptools) on CPU 0")
    print("| call | MCP req/s | MCP req/CPU-s | plain route req/s | plain route req/CPU-s | overhead | paired |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    by = {(c.action, c.kind): c for c in done}
    last = []
    paired: dict[str, float] = {}
    for action in [a for a in CALLS if (a, "mcp") in by]:
        mcp, plain = by[action, "mcp"], by[action, "plain"]
        overhead = plain.best_per_cpu / mcp.best_per_cpu - 1
        paired[action] = statistics.median(p.per_cpu / m.per_cpu - 1 for m, p in zip(mcp.rounds, plain.rounds,
                                                                                     strict=True))
        print(f"| {action} | {mcp.best:,.0f} | {mcp.best_per_cpu:,.0f} | {plain.best:,.0f} | "
              f"{plain.best_per_cpu:,.0f} | {100 * overhead:+.1f}% | {100 * paired[action]:+.1f}% |")
        last.append(f"overhead_{action}={overhead:.3f}")
    for c in done:
        rounds = ", ".join(f"{r.rps:.0f} req/s, {r.per_cpu:.0f} req/CPU-s" for r in c.rounds) if args.in_process \
            else ", ".join(f"{r.rps:.0f} req/s at {100 * r.server_cpu / args.duration:.0f}% cpu" for r in c.rounds)
        print(f"# {c.kind} {c.action}: {rounds}")
    for action in ("get_invoice", "list_invoices"):
        if (action, "data") not in by:
            continue
        data, mcp, plain = by[action, "data"], by[action, "mcp"], by[action, "plain"]
        per_call = {k: 1e6 / c.best_per_cpu for k, c in (("data", data), ("mcp", mcp), ("plain", plain))}
        print(f"{action} split: plain route {per_call['plain']:.0f} us of CPU per call; MCP with the data only "
              f"(bench_data) {per_call['data']:.0f} us ({100 * (plain.best_per_cpu / data.best_per_cpu - 1):+.1f}%); "
              f"MCP with the service's presentation {per_call['mcp']:.0f} us: the presentation (UI blocks, rules, "
              f"suggestions) {per_call['mcp'] - per_call['data']:.0f} us, the MCP call's own path "
              f"{per_call['data'] - per_call['plain']:.0f} us")
        last.append(f"overhead_{action}_data_only={plain.best_per_cpu / data.best_per_cpu - 1:.3f}")
    if ("get_invoice", "mcp") in by:
        last.append(f"get_invoice_rps_per_cpu={by['get_invoice', 'mcp'].best_per_cpu:.0f}")
    last += [f"overhead_{action}_paired={value:.3f}" for action, value in paired.items()]
    print(" ".join(last))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured run (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds, the best counts (default 3)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of unmeasured load first (default 2)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (default 16)")
    parser.add_argument("--actions", type=lambda v: v.split(","), default=list(CALLS),
                        help="comma-separated subset of " + ",".join(CALLS))
    parser.add_argument("--in-process", type=int, default=0, metavar="N",
                        help="no HTTP: N calls per cell and round straight to the ASGI app, CPU time of this process")
    args = parser.parse_args(argv)
    if args.in_process:
        report(run_in_process(args), args)
        return 0
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install -y wrk (scripts/system_deps.sh does it)", file=sys.stderr)
        return 2
    report(run(args), args)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        sys.exit(1)
