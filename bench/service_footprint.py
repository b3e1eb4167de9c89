"""How much distinct code one call of the reference service runs through: its footprint, cell by cell.

An MCP call runs about as many instructions as the plain route (`service_callgrind.py`) yet takes more time,
more so under a real server, where each request starts with caches that the server's own code and other
connections have cooled (`service_layers.py --cold`): every distinct function a request runs touches its own
code object, bytecode, inline caches and globals, cache lines found cold. This counts them: one request of
each cell (`bench/service.py`'s cells, sent straight to the ASGI app of `service_server.py` after a warm-up) is
run under `sys.setprofile`, and the distinct Python functions it entered are printed with the calls made,
then, with `--list`, each one by module (a folding candidate: a small function every request enters once).

Run: `python bench/service_footprint.py [--actions revenue_summary] [--list]`. The last line is
`footprint_ACTION_KIND=N ...` (distinct Python functions per request).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from harness import finished, post, status_and_body  # noqa: E402
from service import CALLS, EXPECT, cells  # noqa: E402

WARM_UP = 20


def _where(filename: str) -> str:
    """A code object's file as short as it stays readable: below site-packages, or the repository."""
    for root in ("site-packages/", f"{BENCH_DIR.parent}/"):
        if root in filename:
            return filename.split(root, 1)[1]
    return filename


def footprint(app: Any, cell: Any) -> tuple[Counter[tuple[str, int, str]], int]:
    """The Python functions one request of `cell` entered (file, first line, name: how often) and the calls made."""
    headers = [(k.lower().encode(), v.encode()) for k, v in [*cell.headers.items(), ("host", "127.0.0.1")]]
    body = json.dumps(cell.body).encode()
    for _ in range(WARM_UP):
        status, text = status_and_body(finished(post(app, headers, body, cell.path)))
    if status != 200 or EXPECT[cell.action].encode() not in text or b'"isError":true' in text:
        raise SystemExit(f"{cell.kind} {cell.action}: {status} {text[:300]!r}")
    entered: Counter[tuple[str, int, str]] = Counter()

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            entered[(_where(code.co_filename), code.co_firstlineno, code.co_name)] += 1

    sys.setprofile(profile)
    try:
        finished(post(app, headers, body, cell.path))
    finally:
        sys.setprofile(None)
    return entered, sum(entered.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", type=lambda v: v.split(","), default=list(CALLS),
                        help="comma-separated subset of " + ",".join(CALLS))
    parser.add_argument("--list", action="store_true", help="print each function entered, by module")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"DATABASE_URL": f"sqlite:///{Path(tmp) / 'billing.sqlite3'}", "MCPFUSION_DEMO": "1",
                           "MCPFUSION_RATE_LIMIT": "1000000000"})
        return asyncio.run(_measure(args))


async def _measure(args: argparse.Namespace) -> int:
    from service_server import app

    last = []
    print("reference service, one request per cell: distinct Python functions entered (calls made)")
    print("| call | distinct functions | calls |")
    print("|---|---:|---:|")
    async with app.router.lifespan_context(app):
        for cell in cells():
            if cell.action not in args.actions:
                continue
            entered, calls = footprint(app, cell)
            print(f"| {cell.action}, {cell.kind} | {len(entered)} | {calls} |")
            last.append(f"footprint_{cell.action}_{cell.kind}={len(entered)}")
            if args.list:
                for (where, line, name), count in sorted(entered.items()):
                    print(f"    {count:4d}  {where}:{line} {name}")
    print(" ".join(last))
    return 0


if __name__ == "__main__":
    sys.exit(main())
