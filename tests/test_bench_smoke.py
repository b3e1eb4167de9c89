"""bench/mcp_throughput.py runs end to end (tiny duration) and its wrk hook refuses unsuccessful responses.

No timing is asserted: the figures live in BENCHMARKS.md. Needs `wrk` (scripts/system_deps.sh installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "mcp_throughput.py"
LAST_LINE = re.compile(r"^ratio_vs_sdk_2026=\d+\.\d\d ratio_vs_fastmcp_2026=\d+\.\d\d ratio_vs_bare_fastapi=\d+\.\d\d$")


@pytest.mark.timeout(300)
def test_harness_prints_table_and_ratio_line():
    run = subprocess.run(
        [sys.executable, str(BENCH), "--duration", "1", "--rounds", "1", "--warmup", "0", "--connections", "4"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert LAST_LINE.match(lines[-1]), lines[-1]
    table = "\n".join(lines)
    assert re.search(r"ratio_vs_bare_fastapi_paired=\d+\.\d\d$", table, re.MULTILINE), table[-2000:]
    for label in ("mcpfusion (full presenter)", "official SDK MCPServer", "FastMCP", "bare FastAPI route"):
        assert label in table
    # every MCP server has a figure at both wires, JSON and SSE
    rows = [line for line in lines if line.startswith("| ") and "server" not in line]
    assert len(rows) == 4
    for row in rows[:3]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 7 and all(re.fullmatch(r"[\d,]+", c) for c in cells[1:]), row
    assert re.search(r"^SSE mode \(req/CPU-s\): sse_cpu_vs_json_mcpfusion=\d+\.\d\d .*ratio_vs_fastmcp_sse=\d+\.\d\d$",
                     table, re.M), table


def test_json_rpc_errors_are_counted_as_bad_responses(tmp_path):
    """A server answering HTTP 200 with a JSON-RPC error must fail the run, not inflate req/s."""
    sys.path.insert(0, str(BENCH.parent))
    import mcp_throughput as bench

    body_file = tmp_path / "error.json"
    body_file.write_bytes(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool"}}')
    args = SimpleNamespace(connections=2, threads=1)
    with bench.Uvicorn("peers.bare_fastapi:app", {"BENCH_BODY_FILE": str(body_file)}) as server:
        script = bench.lua_script(bench.call_body(bench.MODERN), bench.call_headers(bench.MODERN))
        target = bench.Target(bench.SERVERS[-1], bench.MODERN, server, script, [])
        with pytest.raises(bench.BenchError, match="bad responses"):
            bench.measure(target, 1, args)
        # and the pre-flight check refuses it too
        with pytest.raises(bench.BenchError, match="not a successful result"):
            bench.check_call(server.base, bench.MODERN, None)


@pytest.mark.timeout(300)
def test_service_harness_compares_mcp_with_the_plain_route():
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "service.py"), "--duration", "1", "--rounds", "1", "--warmup", "0",
         "--connections", "2"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert re.fullmatch(r"overhead_get_invoice=-?\d+\.\d{3} overhead_list_invoices=-?\d+\.\d{3} "
                        r"overhead_revenue_summary=-?\d+\.\d{3} overhead_get_invoice_data_only=-?\d+\.\d{3} "
                        r"overhead_list_invoices_data_only=-?\d+\.\d{3} get_invoice_rps_per_cpu=\d+"
                        r"( overhead_(get_invoice|list_invoices|revenue_summary)_paired=-?\d+\.\d{3}){3}", lines[-1]), lines[-1]
    for action in ("get_invoice", "list_invoices", "revenue_summary"):
        assert any(line.startswith(f"| {action} |") for line in lines)
    assert any(line.startswith("get_invoice split: plain route ") for line in lines)
    assert any(line.startswith("list_invoices split: plain route ") for line in lines)


def test_service_server_tries_each_cells_route_first(tmp_path, monkeypatch):
    # A route tried before the measured one costs ~9k instructions: no cell may pay for another's routes.
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'billing.sqlite3'}")
    monkeypatch.setenv("MCPFUSION_DEMO", "1")
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import service_server

    served = service_server.app
    assert sorted(served.by_path) == ["/plain/get_invoice", "/plain/list_invoices", "/plain/revenue_summary"]
    for path, plain in served.by_path.items():
        assert (plain.router.routes[0].path, plain.router.routes[0].methods) == (path, {"POST"})
    first = served.default.router.routes[0]
    assert (first.path, first.methods) == ("/mcp", {"POST"})
    assert all(not route.path.startswith("/plain/") for route in served.default.router.routes)


@pytest.mark.timeout(300)
def test_service_harness_in_process_reports_cpu_time():
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "service.py"), "--in-process", "20", "--rounds", "1",
         "--connections", "4"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert lines[0].startswith("reference service on SQLite, in process")
    assert re.fullmatch(r"overhead_get_invoice=-?\d+\.\d{3} overhead_list_invoices=-?\d+\.\d{3} "
                        r"overhead_revenue_summary=-?\d+\.\d{3} overhead_get_invoice_data_only=-?\d+\.\d{3} "
                        r"overhead_list_invoices_data_only=-?\d+\.\d{3} get_invoice_rps_per_cpu=[1-9]\d*"
                        r"( overhead_(get_invoice|list_invoices|revenue_summary)_paired=-?\d+\.\d{3}){3}", lines[-1]), lines[-1]


@pytest.mark.timeout(300)
def test_service_ab_harness_runs_two_trees_side_by_side(tmp_path):
    """Two trees (here the working tree twice: a directory, as a git revision would be exported) each in a
    worker of its own; every cell of both measured and reported."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "service_ab.py"), str(ROOT), str(ROOT), "--rounds", "1", "--calls", "3",
         "--actions", "get_invoice"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    for kind in ("mcp", "plain", "data"):
        assert re.fullmatch(rf"\| get_invoice, {kind} \| \d+ µs \([\d,]+\) \| \d+ µs \([\d,]+\) \|",
                            next(line for line in lines if line.startswith(f"| get_invoice, {kind} |")))
    label = re.escape(str(ROOT))
    assert re.fullmatch(rf"({label}_overhead_get_invoice=-?\d+\.\d{{3}} {label}_get_invoice_rps_per_cpu=\d+ ?){{2}}",
                        lines[-1]), lines[-1]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("action", "kind", "store", "cold"), [("revenue_summary", "mcp", "summary", False),
                                                                 ("list_invoices", "plain", "list_invoices", False),
                                                                 ("list_invoices", "data", "list_invoices", True)])
def test_service_layers_times_each_layer_of_one_cell(action, kind, store, cold):
    """Each layer of the cell's chain timed in place: every one called once per request, each including the
    next (so no inner layer takes longer than the one around it), ending with the store's call; with `--cold`,
    the caches evicted after every call, and said so."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "service_layers.py"), "--action", action, "--kind", kind,
         "--calls", "40", *(["--cold"] if cold else [])],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert lines[0].startswith(f"{kind} {action}{' (cold caches)' if cold else ''}: "), lines[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| ") and not line.startswith("| layer") and "(inside)" not in line]
    assert rows[-1][0] == f"app.store:BillingStore.{store}"
    assert len(rows) >= 8 and all(row[3] == "1" for row in rows), rows
    inclusive = [float(row[1]) for row in rows]
    assert inclusive == sorted(inclusive, reverse=True) and inclusive[-1] > 0, inclusive
    # (Cold, the totals are differences of two measures: a busy machine may tip a tiny one below zero.)
    assert re.fullmatch(rf"layers_{action}_{kind}_untimed_us=-?\d+\.\d layers_{action}_{kind}_timed_us=-?\d+\.\d",
                        lines[-1]), lines[-1]


@pytest.mark.timeout(300)
def test_service_footprint_counts_the_functions_one_request_enters():
    """One request per cell under `sys.setprofile`: each cell's distinct functions and calls, the MCP cell
    listing its own path's functions (the transport's post, the registry's run) and the plain one FastAPI's."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "service_footprint.py"), "--actions", "revenue_summary", "--list"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    rows = {line.split("|")[1].strip(): (int(line.split("|")[2]), int(line.split("|")[3]))
            for line in lines if line.startswith("| revenue_summary")}
    assert set(rows) == {"revenue_summary, mcp", "revenue_summary, plain"}, rows
    assert all(0 < distinct <= calls for distinct, calls in rows.values()), rows
    listed = "\n".join(lines)
    assert "mcpfusion/mcp/http.py" in listed and " post" in listed and "mcpfusion/dispatch.py" in listed
    assert "fastapi/routing.py" in listed
    assert re.fullmatch(r"footprint_revenue_summary_mcp=\d+ footprint_revenue_summary_plain=\d+", lines[-1]), lines[-1]


@pytest.mark.timeout(300)
def test_cold_start_harness_builds_the_500_action_server_and_lists_it():
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "cold_start.py"), "--runs", "1"],
                         capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert "MCP tools listed: mcpfusion 100, mcpfusion, clean install 100, FastMCP 500, SDK MCPServer 500" in lines[0]
    assert any(line.startswith("| import + build, CPU | ") and line.count(" s (") == 4 for line in lines)
    assert "| mcpfusion | mcpfusion, clean install | FastMCP | SDK MCPServer |" in lines[2]
    assert any(line.startswith("target import + build CPU <= 0.5 s, read on a clean install") for line in lines)
    assert any(line.startswith("SDK MCPServer / mcpfusion: import + build CPU ") for line in lines)
    assert re.fullmatch(r"import_build_s=\d+\.\d{3} import_build_cpu_s=\d+\.\d{3} "
                        r"import_build_clean_cpu_s=\d+\.\d{3} first_answer_cpu_s=\d+\.\d{3} "
                        r"tools_list_first_ms=\d+\.\d\d "
                        r"tools_list_ms=\d+\.\d\d", lines[-1])


def test_core_ab_harness_compares_two_trees_in_process():
    """This tree twice (two workers) side by side: a table of every cell asked and the ratio line per tree
    (each worker checks its calls succeed before measuring)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "core_ab.py"), str(ROOT), f"{ROOT}/.", "--rounds", "1", "--calls", "5"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    for cell in ("2026json", "2025json", "2025sse", "bare", "present"):
        row = next(line for line in lines if line.startswith(cell))
        assert len(re.findall(r"\d+\.\d", row)) == 2, row
    ratios = [line for line in lines if "sse_vs_json=" in line]
    assert len(ratios) == 2 and all(re.search(r"sse_vs_json=\d+\.\d\d bare_vs_ours=\d+\.\d\d", r) for r in ratios)


@pytest.mark.timeout(300)
def test_sse_only_measures_our_two_2025_cells():
    """`--servers mcpfusion --sse-only`: only mcpfusion's 2025-11-25 JSON and SSE cells, and their ratio."""
    run = subprocess.run(
        [sys.executable, str(BENCH), "--servers", "mcpfusion", "--sse-only", "--duration", "1", "--rounds", "1",
         "--warmup", "0", "--connections", "4"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert re.fullmatch(r"SSE mode \(req/CPU-s\): sse_cpu_vs_json_mcpfusion=\d+\.\d\d", lines[-1]), lines[-1]
    row = next(line for line in lines if line.startswith("| mcpfusion"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["n/a", "n/a"], row  # no 2026-07-28 cell
    assert all(re.fullmatch(r"[\d,]+", c) for c in cells[3:]), row
    assert sorted(line.split(":")[0] for line in lines if line.startswith("# mcpfusion")) == [
        "# mcpfusion 2025-11-25", "# mcpfusion 2025-11-25 SSE"]


def test_server_icount_sends_exactly_the_calls_asked(tmp_path):
    """bench/server_icount.py's load: exactly N successful one-body replies (JSON and SSE mode), and a refused
    call fails the run instead of being counted."""
    sys.path.insert(0, str(BENCH.parent))
    import asyncio

    import mcp_throughput as bench
    import server_icount

    for mode in ("json", "sse"):
        with bench.Uvicorn("mcpfusion_server:app", {"BENCH_MODE": mode}) as server:
            session_id = bench.open_session(server.base)
            assert asyncio.run(server_icount.drive(server.port, session_id, 25, 4, 1)) == 25
            with pytest.raises(bench.BenchError, match="unexpected answer"):
                asyncio.run(server_icount.drive(server.port, "no-such-session", 3, 1, 1))


@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (callgrind)")
def test_service_callgrind_harness_counts_instructions_per_call():
    """Each cell counted under callgrind in a process of its own; the overhead is mcp / plain - 1."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "service_callgrind.py"), "--calls", "2", "--actions", "revenue_summary"],
        capture_output=True, text=True, timeout=880, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    counts = {kind: int(next(line for line in lines if line.startswith(f"| revenue_summary, {kind} |"))
                        .split("|")[2].strip().replace(",", "")) for kind in ("mcp", "plain")}
    assert all(n > 100_000 for n in counts.values()), counts  # a whole call of the service, not an empty loop
    match = re.fullmatch(r"overhead_revenue_summary=(-?\d+\.\d{3}) revenue_summary_mcp_instructions=(\d+) "
                         r"revenue_summary_plain_instructions=(\d+)", lines[-1])
    assert match, lines[-1]
    assert abs(float(match[1]) - (counts["mcp"] / counts["plain"] - 1)) < 0.001


@pytest.mark.timeout(300)
def test_wrk_ab_prices_tracing_per_tree():
    """`wrk_ab.py --traced`: each tree's server traced as well, and its tracing on/off ratio printed (here the
    working tree, a directory as a git revision would be exported)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "wrk_ab.py"), str(ROOT), "--traced", "--rounds", "1", "--duration", "1",
         "--warmup", "0", "--connections", "4"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    label = re.escape(str(ROOT))
    traced = next(line for line in lines if line.startswith("| ") and "| traced " in line)
    assert re.fullmatch(rf"\| {label} +\| traced +[\d,]+ \| tracing on/off \d\.\d{{3}} \(paired \d\.\d{{3}}\) \| "
                        r"rounds traced: [\d,]+", traced), traced
    assert re.fullmatch(rf"{label}_tracing_on_off=\d\.\d{{3}} {label}_tracing_on_off_paired=\d\.\d{{3}}",
                        lines[-2]), lines[-2]
    assert re.fullmatch(rf"{label}_vs_{label}_req_per_cpu=1\.000 {label}_ratio_vs_bare=\d\.\d{{3}}", lines[-1]), lines[-1]
