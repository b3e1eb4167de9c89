"""`bench/mcp_throughput.py --middleware`: the benchmark server with three no-op middleware answers the same
bytes as without them (so the throughput comparison compares like with like). No timing is asserted: the
figure lives in BENCHMARKS.md."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "bench"


def test_the_middleware_server_answers_the_same_bytes():
    sys.path.insert(0, str(BENCH_DIR))
    import mcp_throughput as bench

    assert [s.key for s in bench.servers(bench.argparse.Namespace(middleware=True))][-1] == "mcpfusion_mw"
    answers = {}
    for server in (bench.SERVERS[0], bench.WITH_MIDDLEWARE):
        with bench.Uvicorn(server.module, dict(server.env)) as proc:
            answers[server.key] = bench.check_call(proc.base, bench.MODERN, None)
            legacy = bench.check_call(proc.base, bench.LEGACY, bench.open_session(proc.base))
            assert b'"isError":false' in legacy
    assert answers["mcpfusion_mw"] == answers["mcpfusion"]


def test_three_no_op_middleware_are_configured(monkeypatch):
    monkeypatch.setenv("BENCH_MIDDLEWARE", "3")
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    import importlib

    import mcpfusion_server

    module = importlib.reload(mcpfusion_server)
    assert module.fusion.registry.layers(module.billing.actions["get_invoice"]) == [module.no_op] * 3
    monkeypatch.delenv("BENCH_MIDDLEWARE")
    assert importlib.reload(mcpfusion_server).MIDDLEWARE == []
