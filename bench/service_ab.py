"""The reference service's cells (`bench/service.py`) for two or more trees side by side, in process.

Each tree (a git revision of this repository, exported to a temporary directory, or a directory) runs in a
worker process of its own with its own `mcpfusion`, service and `bench/service_server.py`, on a SQLite file of
its own seeded with the demo data, all pinned to one CPU (`--cpu`, the last by default). The workers take turns,
cell after cell, round after round, so a busy machine slows every tree alike; each figure is the best round (a
shared machine only ever makes a round slower), in µs of process CPU per call, the calls sent one at a time
straight into the ASGI app (uvloop, no HTTP server). Every reply is checked (HTTP 200, the invoice id or the
summary in it, no `isError`); a cell a tree does not serve (`data`, the `bench_data` tool, before it existed) is
left out for that tree.

Cells: `mcp` (the service's `tools/call`), `plain` (the plain FastAPI route making the same store call) and,
for `get_invoice`, `data` (MCP, the data only: see `service_server.py`). `overhead` is plain / mcp - 1 in
req/CPU-s, as in `service.py`.

Run: `python bench/service_ab.py 6c67eea HEAD [--rounds 10] [--calls 300] [--actions get_invoice]`. The last
line has, per tree, `TREE_overhead_get_invoice=X TREE_get_invoice_rps_per_cpu=N` (TREE as given).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from harness import export_tree, post, status_and_body  # noqa: E402
from service import CALLS, EXPECT, Cell, cells  # noqa: E402

KINDS = ("mcp", "data", "plain")


# -- worker (one per tree) ------------------------------------------------------------------------------


def worker(tree: Path) -> None:
    """Serve `check INDEX` / `run INDEX N` commands on stdin for the cells given on the first line."""
    specs = json.loads(sys.stdin.readline())
    cpu = os.environ.get("SERVICE_AB_CPU")
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu)})  # every tree's worker on the same core: the same neighbours
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"DATABASE_URL": f"sqlite:///{Path(tmp) / 'billing.sqlite3'}", "MCPFUSION_DEMO": "1",
                           "MCPFUSION_RATE_LIMIT": "1000000000"})
        sys.path[:0] = [str(tree), str(tree / "bench")]
        import uvloop
        from service_server import app

        async def call(spec: dict[str, Any]) -> tuple[int, bytes]:
            headers = [(k.lower().encode(), v.encode()) for k, v in spec["headers"]]
            return status_and_body(await post(app, headers, spec["body"].encode(), spec["path"]))

        def bad(spec: dict[str, Any], status: int, text: bytes) -> str | None:
            if status != 200 or spec["expect"].encode() not in text or b'"isError":true' in text:
                return f"{status} {text[:300]!r}"
            return None

        async def serve() -> None:
            async with app.router.lifespan_context(app):
                for line in sys.stdin:
                    command, index, *rest = line.split()
                    spec = specs[int(index)]
                    if command == "check":
                        problem = bad(spec, *await call(spec))
                        print(json.dumps({"ok": problem is None, "problem": problem}), flush=True)
                        continue
                    problems = []
                    cpu = time.process_time()
                    for _ in range(int(rest[0])):
                        problem = bad(spec, *await call(spec))
                        if problem is not None:
                            problems.append(problem)
                    cpu = time.process_time() - cpu
                    print(json.dumps({"cpu": cpu, "problem": problems[0] if problems else None}), flush=True)

        uvloop.run(serve())


# -- coordinator ----------------------------------------------------------------------------------------


class Tree:
    def __init__(self, label: str, path: Path, specs: list[dict[str, Any]], cpu: int | None) -> None:
        self.label = label
        env = {**os.environ, "PYTHONPATH": ""}
        if cpu is not None:
            env["SERVICE_AB_CPU"] = str(cpu)
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(path)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                        cwd=path)
        self.ask(json.dumps(specs), reply=False)
        self.best: dict[int, float] = {}
        self.serves: set[int] = set()

    def ask(self, line: str, reply: bool = True) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        if not reply:
            return {}
        answer = self.process.stdout.readline()
        if not answer:
            raise SystemExit(f"{self.label}: the worker stopped (see its error above)")
        return json.loads(answer)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", help="git revisions or directories (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds, the best counts (default 10)")
    parser.add_argument("--calls", type=int, default=300, help="calls per cell and round (default 300)")
    parser.add_argument("--actions", type=lambda v: v.split(","), default=list(CALLS),
                        help="comma-separated subset of " + ",".join(CALLS))
    parser.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1,
                        help="the CPU every worker is pinned to (default: the last; -1: not pinned)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker)
        return 0
    todo: list[Cell] = [c for c in cells() if c.action in args.actions]
    specs = [{"path": c.path, "headers": [*c.headers.items(), ("host", "127.0.0.1")],
              "body": json.dumps(c.body), "expect": EXPECT[c.action]} for c in todo]
    with tempfile.TemporaryDirectory() as tmp:
        cpu = args.cpu if args.cpu >= 0 else None
        trees = [Tree(label, export_tree(label, Path(tmp)), specs, cpu) for label in (args.trees or ["HEAD"])]
        try:
            for tree in trees:
                for index, cell in enumerate(todo):
                    answer = tree.ask(f"check {index}")
                    if answer["ok"]:
                        tree.serves.add(index)
                    elif cell.kind != "data":
                        raise SystemExit(f"{tree.label}: {cell.kind} {cell.action}: {answer['problem']}")
                    if index in tree.serves:
                        tree.ask(f"run {index} {max(args.calls // 3, 1)}")  # warm-up
            for _ in range(args.rounds):
                for index, cell in enumerate(todo):
                    for tree in trees:
                        if index not in tree.serves:
                            continue
                        answer = tree.ask(f"run {index} {args.calls}")
                        if answer["problem"]:
                            raise SystemExit(f"{tree.label}: {cell.kind} {cell.action}: {answer['problem']}")
                        per_call = answer["cpu"] / args.calls
                        tree.best[index] = min(tree.best.get(index, per_call), per_call)
        finally:
            for tree in trees:
                tree.close()
    report(todo, trees, args)
    return 0


def report(todo: list[Cell], trees: list[Tree], args: argparse.Namespace) -> None:
    print(f"reference service on SQLite, in process, one call at a time; best of {args.rounds} interleaved rounds "
          f"of {args.calls} calls per cell and tree; µs of CPU per call (req/CPU-s)")
    print("| call | " + " | ".join(t.label for t in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for index, cell in enumerate(todo):
        figures = [f"{1e6 * t.best[index]:.0f} µs ({1 / t.best[index]:,.0f})" if index in t.best else "-"
                   for t in trees]
        print(f"| {cell.action}, {cell.kind} | " + " | ".join(figures) + " |")
    last = []
    for action in [a for a in CALLS if a in args.actions]:
        at = {c.kind: i for i, c in enumerate(todo) if c.action == action}
        row = []
        for tree in trees:
            mcp, plain = tree.best[at["mcp"]], tree.best[at["plain"]]
            row.append(f"{100 * (mcp / plain - 1):+.1f}%")
            last.append(f"{tree.label}_overhead_{action}={mcp / plain - 1:.3f}")
            data = tree.best.get(at.get("data", -1))
            if data is not None:
                row[-1] += f" (data only {100 * (data / plain - 1):+.1f}%, presentation {1e6 * (mcp - data):.0f} µs)"
            if action == "get_invoice":
                last.append(f"{tree.label}_get_invoice_rps_per_cpu={1 / mcp:.0f}")
        print(f"| {action}, overhead | " + " | ".join(row) + " |")
    print(" ".join(last))


if __name__ == "__main__":
    sys.exit(main())
