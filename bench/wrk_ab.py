"""The invoice tools/call under wrk for two or more trees side by side (paired A/B of `mcp_throughput.py`).

Each tree (a git revision of this repository, exported to a temporary directory, or a directory) serves its own
`bench/mcpfusion_server.py` with its own `mcpfusion` (one uvicorn worker, pinned like `mcp_throughput.py`), and
its own bare FastAPI route replaying that tree's 2026-07-28 response bytes. Rounds are interleaved over every
cell and the best round counts, so load from elsewhere slows every tree alike. Each tree's figure is its
req/CPU-s at 2026-07-28 and its ratio to its own bare route (the `ratio_vs_bare_fastapi` of
`mcp_throughput.py`); the last line gives each tree's figures over the first tree's. With `--traced`, each tree
also serves its server with tracing on (`mcp_throughput.py`'s "tracing alone, all recorded") and its tracing
on/off ratio is given, of the best rounds and as the median of the rounds' own ratios (`tracing_on_off` and
`tracing_on_off_paired` of `mcp_throughput.py`, tree against tree in the same rounds).

Run: `python bench/wrk_ab.py 0fa9772 HEAD [--rounds 5] [--duration 5] [--wire 2026-07-28] [--traced]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from harness import export_tree  # noqa: E402
from mcp_throughput import (  # noqa: E402
    LEGACY,
    MODERN,
    TRACED,
    Server,
    Target,
    Uvicorn,
    call_body,
    call_headers,
    check_call,
    lua_script,
    measure,
    open_session,
    pin,
)


class TreeServer(Uvicorn):
    """`module` served from `tree/bench` with `tree` first on the path (its own mcpfusion)."""

    def __init__(self, tree: Path, module: str, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [*pin(0), sys.executable, "-m", "uvicorn", module, "--app-dir", str(tree / "bench"),
               "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1", "--loop", "uvloop",
               "--http", "httptools", "--no-access-log", "--log-level", "warning"]
        full_env = {**os.environ, **env, "PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen(cmd, env=full_env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _free_port() -> int:
    from mcp_throughput import free_port

    return free_port()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", help="git revisions (or directories); the first is the reference")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--wire", choices=[MODERN, LEGACY], default=MODERN)
    parser.add_argument("--traced", action="store_true", help="each tree's server with tracing on, too")
    args = parser.parse_args(argv)

    cells: list[tuple[str, str, Target]] = []  # (tree label, "mcp" | "bare" | "traced", target)
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        for rev in args.trees:
            tree = export_tree(rev, Path(tmp))
            body_file = Path(tmp) / f"{tree.name}.json"
            mcp = stack.enter_context(TreeServer(tree, "mcpfusion_server:app", {"BENCH_BODY_FILE": str(body_file)}))
            body_file.write_bytes(check_call(mcp.base, MODERN, None))
            session_id = open_session(mcp.base) if args.wire == LEGACY else None
            if session_id is not None:
                check_call(mcp.base, LEGACY, session_id)
            script = lua_script(call_body(args.wire), call_headers(args.wire, session_id))
            cells.append((rev, "mcp", Target(Server(f"{rev}", rev, ""), args.wire, mcp, script, [])))
            bare = stack.enter_context(TreeServer(tree, "peers.bare_fastapi:app", {"BENCH_BODY_FILE": str(body_file)}))
            bare_script = lua_script(call_body(MODERN), call_headers(MODERN))
            cells.append((rev, "bare", Target(Server(f"{rev}-bare", f"{rev} bare", "", mcp=False), MODERN, bare,
                                              bare_script, [])))
            if args.traced:
                traced = stack.enter_context(TreeServer(tree, "mcpfusion_server:app", dict(TRACED.env)))
                check_call(traced.base, MODERN, None)
                cells.append((rev, "traced", Target(Server(f"{rev}-traced", f"{rev} traced", ""), MODERN, traced,
                                                    lua_script(call_body(MODERN), call_headers(MODERN)), [])))
        for _, _, target in cells:
            measure(target, args.warmup, args, "warm-up")
        for round_ in range(args.rounds):
            # Every other round runs the cells backwards: a fixed order favoured whichever tree came first by
            # ~7% (HEAD vs 0fa9772 gave 0.934 one way round and 1.076 the other on a quiet machine).
            for _, _, target in cells if round_ % 2 == 0 else cells[::-1]:
                target.rounds.append(measure(target, args.duration, args))

    print(f"tools/call at {args.wire}, best of {args.rounds} interleaved rounds of wrk -t{args.threads} "
          f"-c{args.connections} -d{args.duration:g}s; req/CPU-s of the server process")
    figures: dict[str, tuple[float, float]] = {}
    for rev in args.trees:
        mcp = next(t for r, kind, t in cells if r == rev and kind == "mcp")
        bare = next(t for r, kind, t in cells if r == rev and kind == "bare")
        figures[rev] = (mcp.best_per_cpu, mcp.best_per_cpu / bare.best_per_cpu)
        rounds = ", ".join(f"{r.per_cpu:,.0f}" for r in mcp.rounds)
        bare_rounds = ", ".join(f"{r.per_cpu:,.0f}" for r in bare.rounds)
        print(f"| {rev:<12} | mcp {mcp.best_per_cpu:>8,.0f} | bare {bare.best_per_cpu:>8,.0f} | "
              f"mcp/bare {figures[rev][1]:.3f} | rounds mcp: {rounds}; bare: {bare_rounds}")
        traced = next((t for r, kind, t in cells if r == rev and kind == "traced"), None)
        if traced is not None:
            paired = statistics.median(t.per_cpu / m.per_cpu for t, m in zip(traced.rounds, mcp.rounds, strict=True))
            print(f"| {rev:<12} | traced {traced.best_per_cpu:>8,.0f} | tracing on/off "
                  f"{traced.best_per_cpu / mcp.best_per_cpu:.3f} (paired {paired:.3f}) | rounds traced: "
                  + ", ".join(f"{r.per_cpu:,.0f}" for r in traced.rounds))
            print(f"{rev}_tracing_on_off={traced.best_per_cpu / mcp.best_per_cpu:.3f} "
                  f"{rev}_tracing_on_off_paired={paired:.3f}")
    first = args.trees[0]
    print(" ".join(f"{rev}_vs_{first}_req_per_cpu={figures[rev][0] / figures[first][0]:.3f} "
                   f"{rev}_ratio_vs_bare={figures[rev][1]:.3f}" for rev in args.trees))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
