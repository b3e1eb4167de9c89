"""The reference service's cells (`bench/service.py`) in instructions per call, under callgrind: the one
measure of the MCP overhead that a busy machine does not move.

Each cell runs in a process of its own under `valgrind --tool=callgrind`, instrumented only once warmed up
(`callgrind_control -i on`): the ASGI app of `bench/service_server.py` (SQLite file of its own, demo data)
gets `--calls` requests one after the other, driven without an event loop (a read never waits: SQLite
is read on the calling thread), and only what runs inside them is counted. Every reply is checked first
(HTTP 200, the invoice id or the summary in it, no `isError`). Slow: about a minute of CPU per cell.

Cells: `mcp`, `plain` and (for `get_invoice`) `data`, as in `service.py`; `overhead` is mcp / plain - 1 in
instructions. A tree (git revision or directory) other than this one: `--tree`.

Run: `python bench/service_callgrind.py [--calls 50] [--actions get_invoice,list_invoices] [--tree REV]`. The
last line is `overhead_ACTION=X ... ACTION_KIND_instructions=N ...`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from harness import export_tree, finished, post, status_and_body  # noqa: E402
from service import CALLS, EXPECT, cells  # noqa: E402

WARM_UP = 30



def worker(tree: Path, kind: str, action: str, calls: int) -> None:
    """Serve one cell `calls` times inside `functools.reduce`, the function callgrind counts."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"DATABASE_URL": f"sqlite:///{Path(tmp) / 'billing.sqlite3'}", "MCPFUSION_DEMO": "1",
                           "MCPFUSION_RATE_LIMIT": "1000000000"})
        sys.path[:0] = [str(tree), str(tree / "bench")]
        from service_server import app

        cell = next(c for c in cells() if c.kind == kind and c.action == action)
        headers = [(k.lower().encode(), v.encode()) for k, v in [*cell.headers.items(), ("host", "127.0.0.1")]]
        body = json.dumps(cell.body).encode()

        def one(count: int, _: int) -> int:
            finished(post(app, headers, body, cell.path))
            return count + 1

        async def lifespan() -> None:
            async with app.router.lifespan_context(app):
                for _ in range(WARM_UP):
                    status, text = status_and_body(finished(post(app, headers, body, cell.path)))
                if status != 200 or EXPECT[action].encode() not in text or b'"isError":true' in text:
                    raise SystemExit(f"{kind} {action}: {status} {text[:300]!r}")
                subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)
                one(0, 0)  # the first call after instrumentation starts is not counted
                functools.reduce(one, range(calls), 0)

        asyncio.run(lifespan())  # starting the app writes the demo data: that waits


def count(tree: Path, kind: str, action: str, calls: int) -> float:
    """Instructions per call of one cell."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
             "--toggle-collect=functools_reduce", f"--callgrind-out-file={out}", sys.executable,
             str(Path(__file__).resolve()), "--worker", str(tree), kind, action, str(calls)],
            capture_output=True, text=True, cwd=tree,
            env={**os.environ, "PYTHONPATH": "", "PYTHONHASHSEED": "0"})  # the same str hashes, the same dict work
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or found is None:
            raise SystemExit(f"{kind} {action}: callgrind failed:\n{run.stderr[-2000:]}")
        return int(found.group(1)) / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50, help="counted calls per cell (default 50)")
    parser.add_argument("--actions", type=lambda v: v.split(","), default=list(CALLS),
                        help="comma-separated subset of " + ",".join(CALLS))
    parser.add_argument("--tree", help="git revision or directory to measure (default: this tree)")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        tree, kind, action, calls = args.worker
        worker(Path(tree), kind, action, int(calls))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tree = BENCH_DIR.parent if args.tree is None else export_tree(args.tree, Path(tmp))
        figures = {(c.action, c.kind): count(tree, c.kind, c.action, args.calls)
                   for c in cells() if c.action in args.actions}
    print(f"reference service, instructions per call (callgrind, {args.calls} calls per cell)")
    print("| call | instructions | vs plain |")
    print("|---|---:|---:|")
    last = []
    for (action, kind), n in figures.items():
        plain = figures[(action, "plain")]
        versus = "" if kind == "plain" else f"{100 * (n / plain - 1):+.1f}%"
        print(f"| {action}, {kind} | {n:,.0f} | {versus} |")
        last.append(f"{action}_{kind}_instructions={n:.0f}")
        if kind == "mcp":
            last.insert(0, f"overhead_{action}={n / plain - 1:.3f}")
    print(" ".join(last))
    return 0


if __name__ == "__main__":
    sys.exit(main())
