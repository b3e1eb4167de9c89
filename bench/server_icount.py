"""Instructions per tools/call of a real server (uvicorn, uvloop, httptools) under callgrind: mcpfusion's
2025-11-25 JSON and SSE modes, one or more trees side by side.

`mcp_throughput.py` measures CPU time under wrk, which this shared 2-core machine makes noisy; callgrind's
instruction count is deterministic to a fraction of a percent and, unlike the in-process `core_ab.py`,
includes what only a real server does (uvicorn's protocol and transport, the socket calls; not the kernel's
own work). Each cell is one uvicorn worker serving its tree's `bench/mcpfusion_server.py` (SSE mode with
`BENCH_MODE=sse`) under `valgrind --tool=callgrind --instr-atstart=no`: after the usual checks
(`mcp_throughput.check_call`) and `--warmup` calls (2,100 by default: the SSE server's event store then holds
its 2,000 streams, as under wrk), instrumentation is switched on, exactly `--calls` tools/call are sent over
`--connections` keep-alive connections (each request with its own JSON-RPC id, one session, as wrk does),
and the count is dumped once every reply has arrived. Figures: instructions (Ir) per call, and per tree
`sse_vs_json` (the instruction counterpart of `sse_cpu_vs_json_mcpfusion`). `--modes json,traced` counts the
JSON mode with tracing on instead of SSE (`BENCH_TELEMETRY=1 BENCH_METRICS=0`: SDK tracer provider, batch span
processor, an exporter that discards, every trace recorded): `traced_vs_json`, the instruction counterpart of
`mcp_throughput.py --telemetry`'s tracing on/off (its export thread and the garbage collector included, every
thread of the server being counted; use `--calls 3000` or more, the collector's full passes are rare).
`--modes json,modern` counts the JSON server's tools/call on the sessionless 2026-07-28 wire instead of SSE
(`modern_vs_json`; the wire `ratio_vs_bare_fastapi` is read on). Instructions miss what memory costs:
`--cache-sim` reports KCachegrind's cycle estimate instead (a garbage collector walking cold objects weighs
more than its instruction count). `--keep DIR` keeps the dumps there,
one per thread (`--separate-threads=yes`), for `callgrind_annotate` (use an empty directory).

Run: `python bench/server_icount.py [HEAD 5036de5 ...] [--calls 600] [--jobs 2]` (a few minutes per cell).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import mcp_throughput  # noqa: E402
from harness import export_tree  # noqa: E402
from mcp_throughput import (  # noqa: E402
    LEGACY,
    MODERN,
    BenchError,
    call_body,
    call_headers,
    check_call,
    free_port,
    open_session,
    run_cli,
)


async def drive(port: int, session_id: str | None, calls: int, connections: int, first_id: int,
                wire: str = LEGACY) -> int:
    """Send exactly `calls` tools/call of `wire` (2025-11-25 over `session_id`, or sessionless 2026-07-28) over
    `connections` keep-alive connections; each reply must be a successful result with a Content-Length (a
    one-body answer). Returns the number of replies."""
    head = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n" + b"".join(
        f"{k}: {v}\r\n".encode() for k, v in call_headers(wire, session_id).items())
    template = json.dumps({**call_body(wire), "id": "__ID__"}, separators=(",", ":")).encode()
    ids = iter(range(first_id, first_id + calls))
    answered = 0

    async def connection() -> None:
        nonlocal answered
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for request_id in ids:
            body = template.replace(b'"__ID__"', str(request_id).encode())
            writer.write(head + b"content-length: %d\r\n\r\n" % len(body) + body)
            headers = (await reader.readuntil(b"\r\n\r\n")).lower()
            if not headers.startswith(b"http/1.1 200") or b"content-length:" not in headers:
                raise BenchError(f"unexpected answer: {headers[:300]!r}")
            data = await reader.readexactly(int(headers.split(b"content-length:")[1].split(b"\r\n")[0]))
            if b'"result"' not in data or b'"isError":true' in data:
                raise BenchError(f"not a successful result: {data[:300]!r}")
            answered += 1
        writer.close()

    await asyncio.gather(*(connection() for _ in range(connections)))
    return answered


def control(pid: int, *flags: str) -> None:
    subprocess.run(["callgrind_control", *flags, str(pid)], check=True, capture_output=True)


def cycles(events: dict[str, int]) -> float:
    """KCachegrind's cycle estimate (`--cache-sim`): Ir + 10 per L1 miss + 100 per last-level miss, so a
    reply that walks cold memory (the garbage collector) costs more than its instruction count."""
    l1 = events["I1mr"] + events["D1mr"] + events["D1mw"]
    last = events["ILmr"] + events["DLmr"] + events["DLmw"]
    return events["Ir"] + 10 * l1 + 100 * last


def measure(tree: Path, mode: str, args: argparse.Namespace, out_dir: Path) -> dict[str, float]:
    """Instructions ("Ir") and with `--cache-sim` estimated cycles ("cycles") per tools/call of `tree`'s
    server in `mode` ("json", "sse", "traced", or "modern": the JSON server called on the 2026-07-28 wire)."""
    port = free_port()
    out = (args.keep or out_dir) / f"{tree.name}.{mode}.callgrind"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           *(["--cache-sim=yes"] if args.cache_sim else []), *(["--separate-threads=yes"] if args.keep else []),
           sys.executable, "-m", "uvicorn", "mcpfusion_server:app", "--app-dir", str(tree / "bench"),
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--loop", "uvloop",
           "--http", "httptools", "--no-access-log", "--log-level", "warning"]
    env = {**os.environ, **mcp_throughput.GC_TUNING, "PYTHONPATH": str(tree),
           **({"BENCH_TELEMETRY": "1", "BENCH_METRICS": "0"} if mode == "traced"
              else {"BENCH_MODE": "json" if mode == "modern" else mode})}
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                raise BenchError(f"server exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise BenchError("server did not start within 600 s") from None
                time.sleep(1)
        base = f"http://127.0.0.1:{port}"
        wire = MODERN if mode == "modern" else LEGACY
        session_id = None if wire == MODERN else open_session(base)
        check_call(base, wire, session_id, sse=mode == "sse")
        asyncio.run(drive(port, session_id, args.warmup, args.connections, 10, wire))
        control(proc.pid, "-i", "on")
        control(proc.pid, "-z")
        answered = asyncio.run(drive(port, session_id, args.calls, args.connections, 10_000_000, wire))
        control(proc.pid, "-d")
    finally:
        proc.terminate()
        proc.wait(120)
    dumps = list(out.parent.glob(out.name + ".*"))
    if not dumps:
        raise BenchError(f"no callgrind dump for {tree.name} {mode}")
    # The last dump (of every thread when they are kept apart: one file per thread, `<out>.<n>-<thread>`).
    def number(dump: Path) -> int:
        return int(dump.name[len(out.name) + 1:].split("-")[0])

    last = max(map(number, dumps))
    events: dict[str, int] = {}
    for dump in (d for d in dumps if number(d) == last):
        lines = dump.read_text().splitlines()
        names = next(line.split()[1:] for line in lines if line.startswith("events:"))
        totals = next(line.split()[1:] for line in lines if line.startswith("totals:"))
        for name, total in zip(names, map(int, totals), strict=True):
            events[name] = events.get(name, 0) + total
    per_call = {"Ir": events["Ir"] / answered}
    if args.cache_sim:
        per_call["cycles"] = cycles(events) / answered
    return per_call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", default=["HEAD"], help="git revisions or directories (default HEAD)")
    parser.add_argument("--calls", type=int, default=600, help="measured calls per cell (default 600)")
    parser.add_argument("--warmup", type=int, default=2100, help="calls before measuring (default 2,100)")
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections (default 32, as wrk)")
    parser.add_argument("--jobs", type=int, default=2, help="cells measured at once (default 2)")
    parser.add_argument("--modes", default="json,sse",
                        help="the two cells per tree: json,sse (default), json,traced (tracing on/off) or "
                             "json,modern (the JSON server's tools/call on the 2026-07-28 wire)")
    parser.add_argument("--no-gc-tuning", action="store_true", help="serve without MCPFUSION_GC_TUNING=1")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the callgrind dumps in this directory, one per thread (callgrind_annotate them)")
    parser.add_argument("--cache-sim", action="store_true",
                        help="simulate the caches and report estimated cycles instead of instructions (slower)")
    args = parser.parse_args(argv)
    base_mode, other = args.modes.split(",")
    if (base_mode, other) not in (("json", "sse"), ("json", "traced"), ("json", "modern")):
        parser.error("--modes is json,sse, json,traced or json,modern")
    if args.no_gc_tuning:
        mcp_throughput.GC_TUNING["MCPFUSION_GC_TUNING"] = "0"
    mcp_throughput.CHECK_TIMEOUT = 600  # a first call under valgrind loads its modules ~10x slower
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {rev: export_tree(rev, Path(tmp)) for rev in args.trees}
        cells = [(rev, mode) for rev in args.trees for mode in ("json", other)]
        with ThreadPoolExecutor(args.jobs) as pool:
            counts = pool.map(lambda cell: measure(dirs[cell[0]], cell[1], args, Path(tmp)), cells)
            figures = dict(zip(cells, counts, strict=True))
    units = ["Ir", "cycles"] if args.cache_sim else ["Ir"]
    print(f"per 2025-11-25 tools/call, uvicorn under callgrind, {args.calls} calls over {args.connections} "
          f"connections after {args.warmup}: instructions (Ir)"
          + (", estimated cycles (Ir + 10 L1m + 100 LLm)" if args.cache_sim else ""))
    for rev in args.trees:
        json_cell, other_cell = figures[rev, "json"], figures[rev, other]
        print(f"| {rev:<12} | " + " | ".join(
            f"{unit} json {json_cell[unit]:>10,.0f} {other} {other_cell[unit]:>10,.0f} {other}_vs_json "
            f"{other_cell[unit] / json_cell[unit]:.3f}" for unit in units) + " |")
    unit = units[-1]
    first = args.trees[0]
    print(" ".join(f"{Path(rev).name}_{other}_vs_json={figures[rev, other][unit] / figures[rev, 'json'][unit]:.3f}"
                   for rev in args.trees)
          + "".join(f" {Path(rev).name}_{other}_vs_{Path(first).name}="
                    f"{figures[rev, other][unit] / figures[first, other][unit]:.3f}" for rev in args.trees[1:]))
    return 0


if __name__ == "__main__":
    run_cli(main)
