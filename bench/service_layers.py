"""Where one call of the reference service spends its CPU, layer by layer, in place (not in a loop of its own).

`bench/service.py` says how much more CPU an MCP call takes than the plain route; `service_callgrind.py` says
that in instructions the two are close. This says where the time goes inside a real call: each layer of the
chain a request goes through (the ASGI middleware, FastAPI's routing, the MCP transport and wire, the engine,
the registry and the action's run; the plain route's dependencies and serializer) is wrapped in a timer before
the app is built, the cell's request is sent straight to the ASGI app of `service_server.py` `--calls` times
(no event loop turn: SQLite is read on the calling thread), and each layer's time per call is printed with
its own share: its time less the next layer's inside it. Code that runs once per request costs two to three
times more in place than in a loop of its own (cold caches), so a layer's figure here is what removing it
would save; a figure from a loop is not.

Each timer adds its own cost (about a wrapper call and two clock reads, measured and printed as
`timer_us`): the figures are of the timed chain, to compare layers with each other, not to quote as the
call's cost (the untimed call's CPU, from a process of its own, is printed first; both are the lower quartile
of ten batches of calls, the layers' figures are means).

`--cold` writes one byte per cache line of a buffer larger than the second-level cache after every call
(`evict`, untimed: the layers' timers are inside the call; the totals less a loop of `evict` alone), so that
each call starts with cold caches, as a request of a real server does after the server's own code and other
connections ran: under uvicorn and wrk (`service.py`), the MCP calls' CPU beyond the plain route's is about
that of this mode, two to three times that of a warm loop.

Run: `python bench/service_layers.py [--action revenue_summary] [--kind mcp] [--calls 3000] [--cold]`. The last
line is `layers_ACTION_KIND_untimed_us=U layers_ACTION_KIND_timed_us=T`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import inspect
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from harness import finished, post, status_and_body  # noqa: E402
from service import EXPECT, cells  # noqa: E402

_OUTER = [  # every cell: the ASGI middleware and FastAPI's routing, outermost first
    "fastapi.applications:FastAPI.__call__",
    "mcpfusion.mcp.security:HostGuard.__call__",
    "mcpfusion.auth:RequireBearer.__call__",
    "starlette.middleware.exceptions:ExceptionMiddleware.__call__",
    "fastapi.middleware.asyncexitstack:AsyncExitStackMiddleware.__call__",
    "fastapi.routing:APIRouter.app",
]
# Each cell's own chain, outer to inner, then the store's call (`{store}`).
CHAINS = {
    "mcp": [*_OUTER, "mcpfusion.mcp.http:McpHttpTransport.post", "mcpfusion.mcp.modern:ModernWire.post",
            "mcpfusion.mcp.pipeline:WirePipeline.run", "mcpfusion.mcp.engine:Engine.dispatch",
            "mcpfusion.app:FusionBackend.call_tool", "mcpfusion.dispatch:ToolRegistry.call",
            "mcpfusion.dispatch:ToolRegistry._call_action", "mcpfusion.dispatch:ToolRegistry._endpoint",
            "mcpfusion.dispatch:ToolRegistry._run", "{store}"],
    "plain": [*_OUTER, "fastapi.routing:APIRoute.handle", "{store}"],
}
CHAINS["data"] = CHAINS["mcp"]
# Beside the chain (not nested in one another): what a layer's own share is made of.
ASIDE = {
    "mcp": ["mcpfusion.presenter:Presenter.present", "mcpfusion.mcp.wire:JSONMessage.__init__",
            "mcpfusion.pagination:Paging.issue"],
    "plain": ["fastapi.dependencies.utils:solve_dependencies", "fastapi.routing:serialize_response"],
}
ASIDE["data"] = ASIDE["mcp"]
STORE = {"get_invoice": "get_invoice", "list_invoices": "list_invoices", "revenue_summary": "summary"}


_EVICTED = bytearray(8 << 20)  # larger than the second-level cache of the machines here (2 MiB per core)
_LINES = bytes(len(_EVICTED) // 64)


def evict() -> None:
    """Write one byte of every cache line of `_EVICTED` (one strided copy in C): what the last call left in the
    caches is pushed out."""
    _EVICTED[::64] = _LINES


def _lowest_cold(call: Callable[[], Any], count: int) -> float:
    """`_lowest` of `call` with an `evict` after each, less that of `evict` alone."""
    def cold() -> None:
        call()
        evict()
    return _lowest(cold, count) - _lowest(evict, count)


def _lowest(call: Callable[[], Any], count: int, batches: int = 10) -> float:
    """µs of CPU per call: `count` calls in batches, the lower quartile of the batches (a shared machine
    only ever adds)."""
    size = max(count // batches, 1)
    figures = []
    for _ in range(batches):
        start = time.process_time_ns()
        for _ in range(size):
            call()
        figures.append((time.process_time_ns() - start) / size / 1000)
    return sorted(figures)[len(figures) // 4]



class Timers:
    """Timers wrapped around functions named `module:Qualified.name`, before the app that binds them is built."""

    def __init__(self) -> None:
        self.spent: dict[str, list[int]] = {}

    def wrap(self, spec: str) -> None:
        module_name, qualified = spec.split(":")
        owner: Any = importlib.import_module(module_name)
        *path, name = qualified.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)
        spent = self.spent[spec] = [0, 0]
        clock = time.perf_counter_ns
        if inspect.iscoroutinefunction(original):
            @functools.wraps(original)
            async def timed(*args: Any, **kwargs: Any) -> Any:
                start = clock()
                try:
                    return await original(*args, **kwargs)
                finally:
                    spent[0] += clock() - start
                    spent[1] += 1
        else:
            @functools.wraps(original)
            def timed(*args: Any, **kwargs: Any) -> Any:
                start = clock()
                try:
                    return original(*args, **kwargs)
                finally:
                    spent[0] += clock() - start
                    spent[1] += 1
        setattr(owner, name, timed)
        if not path:  # a function: also where other modules imported it by name
            for module in list(sys.modules.values()):
                if module is not None and getattr(module, name, None) is original:
                    setattr(module, name, timed)

    def reset(self) -> None:
        for spent in self.spent.values():
            spent[:] = [0, 0]


def timer_cost() -> float:
    """µs one timer adds to a call (an empty function timed, less the same function untimed)."""
    timers = Timers()
    holder = type("Holder", (), {"nothing": staticmethod(lambda: None)})
    untimed = holder.nothing
    sys.modules["_layers_probe"] = holder  # type: ignore[assignment]
    timers.wrap("_layers_probe:nothing")
    timed = holder.nothing
    runs = 200_000
    results = []
    for fn in (untimed, timed):
        start = time.process_time_ns()
        for _ in range(runs):
            fn()
        results.append((time.process_time_ns() - start) / runs / 1000)
    del sys.modules["_layers_probe"]
    return results[1] - results[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--action", default="revenue_summary", choices=sorted(STORE))
    parser.add_argument("--kind", default="mcp", choices=sorted(CHAINS))
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--cold", action="store_true", help="evict the caches after every call (see above)")
    args = parser.parse_args(argv)
    cell = next((c for c in cells() if c.action == args.action and c.kind == args.kind), None)
    if cell is None:
        parser.error(f"no {args.kind} cell for {args.action}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"DATABASE_URL": f"sqlite:///{Path(tmp) / 'billing.sqlite3'}", "MCPFUSION_DEMO": "1",
                           "MCPFUSION_RATE_LIMIT": "1000000000"})
        return asyncio.run(_measure(args, cell))


async def _measure(args: argparse.Namespace, cell: Any) -> int:
    chain = [f"app.store:BillingStore.{STORE[args.action]}" if spec == "{store}" else spec
             for spec in CHAINS[args.kind]]
    timers = Timers()
    for spec in [*chain, *ASIDE[args.kind]]:
        timers.wrap(spec)  # before the app is built: routes and middleware bind what they find then
    from service_server import app

    headers = [(k.lower().encode(), v.encode()) for k, v in [*cell.headers.items(), ("host", "127.0.0.1")]]
    body = json.dumps(cell.body).encode()

    def calls(count: int) -> float:
        measure = _lowest_cold if args.cold else _lowest
        return measure(lambda: finished(post(app, headers, body, cell.path)), count)

    async with app.router.lifespan_context(app):
        status, text = status_and_body(finished(post(app, headers, body, cell.path)))
        if status != 200 or EXPECT[args.action].encode() not in text or b'"isError":true' in text:
            raise SystemExit(f"{args.kind} {args.action}: {status} {text[:300]!r}")
        calls(300)  # warm-up
        timers.reset()
        timed = calls(args.calls)
        counted = {spec: (spent[0] / max(spent[1], 1) / 1000, spent[1] / args.calls)
                   for spec, spent in timers.spent.items()}
    untimed = _untimed(args, cell)
    cost = timer_cost()
    print(f"{args.kind} {args.action}{' (cold caches)' if args.cold else ''}: {untimed:.1f} µs of CPU per call "
          f"untimed, {timed:.1f} µs timed "
          f"({len(timers.spent)} timers, timer_us={cost:.2f} each)")
    print("| layer | µs per call (inclusive) | own share (less the next layer) | calls per request |")
    print("|---|---:|---:|---:|")
    for index, spec in enumerate(chain):
        spent, per_request = counted[spec]
        inner = counted[chain[index + 1]][0] if index + 1 < len(chain) else 0.0
        print(f"| {spec} | {spent:.1f} | {spent - inner:.1f} | {per_request:g} |")
    for spec in ASIDE[args.kind]:
        spent, per_request = counted[spec]
        print(f"| (inside) {spec} | {spent:.1f} | | {per_request:g} |")
    name = f"{args.action}_{args.kind}"
    print(f"layers_{name}_untimed_us={untimed:.1f} layers_{name}_timed_us={timed:.1f}")
    return 0


def _untimed(args: argparse.Namespace, cell: Any) -> float:
    """CPU per call of the same cell without timers (a process of its own: the timers are in this one)."""
    import subprocess

    script = (
        "import asyncio, json, sys, time\n"
        f"sys.path[:0] = {[str(BENCH_DIR.parent), str(BENCH_DIR)]!r}\n"
        f"from service_layers import {'_lowest_cold as _lowest' if args.cold else '_lowest'}\n"
        "from harness import finished, post\n"
        "from service_server import app\n"
        f"headers = {[(k.lower().encode(), v.encode()) for k, v in [*cell.headers.items(), ('host', '127.0.0.1')]]!r}\n"
        f"body = {json.dumps(cell.body).encode()!r}\n"
        "async def main():\n"
        "    async with app.router.lifespan_context(app):\n"
        "        for _ in range(300): finished(post(app, headers, body, " f"{cell.path!r}))\n"
        f"        print(_lowest(lambda: finished(post(app, headers, body, {cell.path!r})), {args.calls}))\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"untimed run failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
