"""Every performance figure of issues #12 and #18, measured in one run, side by side.

Runs the project's benchmarks one after the other as separate processes (each pins its own servers and
prints its own peers and details), reads the `key=value` figures each prints, and ends with one table:
figure, value, target, met. The details of every benchmark are printed as they run, so the table's figures
can be traced to the command that produced them.

Run: `python bench/summary.py [--quick]` (`make bench-summary`). `--quick` shortens every benchmark (fewer
rounds and runs): a smoke run, not figures to publish. Needs `wrk` and `redis-server` (scripts/system_deps.sh).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
FIGURE = re.compile(r"\b([a-z][a-z0-9_]*)=(-?[0-9]+(?:\.[0-9]+)?)\b")


@dataclass(frozen=True)
class Bench:
    script: str
    args: tuple[str, ...]
    quick: tuple[str, ...]


BENCHES = (
    Bench("presenter.py", (), ()),
    Bench("mcp_throughput.py", ("--rounds", "3", "--telemetry"), ("--rounds", "1", "--duration", "2", "--telemetry")),
    Bench("service.py", ("--rounds", "3"), ("--rounds", "1", "--duration", "2")),
    Bench("scale_out.py", ("--rounds", "5"), ("--rounds", "1", "--duration", "2")),
    Bench("cold_start.py", (), ("--runs", "2")),
)


@dataclass(frozen=True)
class Target:
    label: str
    key: str
    limit: float | None  # None: shown, no target
    at_most: bool = True  # True: the figure must be <= limit; False: >= limit
    unit: str = ""


TARGETS = (
    Target("SSE reply CPU / JSON reply CPU (2025-11-25)", "sse_cpu_vs_json_mcpfusion", 1.3, True, "x"),
    Target("tools/call req/CPU-s vs a bare FastAPI route", "ratio_vs_bare_fastapi", 0.63, False, "x"),
    Target("tools/call vs a bare FastAPI route, median of the paired rounds", "ratio_vs_bare_fastapi_paired", 0.63,
           False, "x"),
    Target("tools/call vs the official SDK (2026-07-28)", "ratio_vs_sdk_2026", 1.0, False, "x"),
    Target("tools/call vs FastMCP (2026-07-28)", "ratio_vs_fastmcp_2026", 1.0, False, "x"),
    Target("reference service get_invoice, req/CPU-s", "get_invoice_rps_per_cpu", 1500, False),
    Target("reference service get_invoice, overhead over a plain route", "overhead_get_invoice", 0.10, True),
    # The same target for the call's split and the service's other two reads: the data alone through the
    # schema firewall (the MCP call's own path, no presentation), the list page, the summary.
    Target("reference service get_invoice, MCP data only (no presentation), overhead", "overhead_get_invoice_data_only",
           0.10, True),
    Target("reference service list_invoices, overhead over a plain route", "overhead_list_invoices", 0.10, True),
    Target("reference service list_invoices, MCP data only (no presentation), overhead",
           "overhead_list_invoices_data_only", 0.10, True),
    Target("reference service revenue_summary, overhead over a plain route", "overhead_revenue_summary", 0.10, True),
    # The same three as the median of each round's own ratio (see bench/service.py): steadier on a drifting host.
    Target("reference service get_invoice, overhead, median of the paired rounds", "overhead_get_invoice_paired",
           0.10, True),
    Target("reference service list_invoices, overhead, median of the paired rounds", "overhead_list_invoices_paired",
           0.10, True),
    Target("reference service revenue_summary, overhead, median of the paired rounds",
           "overhead_revenue_summary_paired", 0.10, True),
    Target("Redis stores / in-memory stores, JSON mode", "ratio_redis_vs_memory_json", 0.8, False, "x"),
    Target("cold start: import + build_app of 100x5, CPU, clean install (no email_validator)",
           "import_build_clean_cpu_s", 0.5, True, " s"),
    Target("cold start: import + build_app of 100x5, CPU, bench venv (email_validator installed)",
           "import_build_cpu_s", None, True, " s"),
    Target("first tools/list of 100x5 (lazy schemas built)", "tools_list_first_ms", None, True, " ms"),
    Target("import + build + first tools/list of 100x5, CPU", "first_answer_cpu_s", None, True, " s"),
    Target("steady tools/list of 100x5", "tools_list_ms", 2.0, True, " ms"),
    Target("presenter render of the benchmark invoice, CPU", "presenter_render_cpu_us", 15.0, True, " µs"),
    Target("tracing on/off, every trace recorded (issue #18), best rounds", "tracing_on_off", 0.90, False, "x"),
    Target("tracing on/off, median of the paired rounds", "tracing_on_off_paired", 0.90, False, "x"),
)


def run(bench: Bench, quick: bool) -> dict[str, float]:
    """One benchmark as its own process: its output goes through, its figures come back."""
    command = [sys.executable, str(BENCH_DIR / bench.script), *(bench.quick if quick else bench.args)]
    print(f"\n$ python bench/{bench.script} {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.stdout.write(done.stderr)
        print(f"# bench/{bench.script} failed (exit {done.returncode})")
    print(f"# {time.monotonic() - started:.0f} s", flush=True)
    return {key: float(value) for key, value in FIGURE.findall(done.stdout)}


def table(figures: dict[str, float]) -> list[str]:
    lines = ["| figure | measured | target | met |", "|---|---:|---:|---|"]
    for target in TARGETS:
        value = figures.get(target.key)
        bound = "-" if target.limit is None else f"{'<=' if target.at_most else '>='} {target.limit:g}{target.unit}"
        if value is None:
            lines.append(f"| {target.label} | not measured | {bound} | - |")
            continue
        if target.limit is None:
            verdict = "-"
        else:
            verdict = "yes" if (value <= target.limit if target.at_most else value >= target.limit) else "no"
        lines.append(f"| {target.label} | {value:g}{target.unit} | {bound} | {verdict} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (a smoke test, not figures to publish)")
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    figures: dict[str, float] = {}
    for bench in BENCHES:
        figures.update(run(bench, args.quick))
    print(f"\n## Performance summary, one run started {started}{' (--quick)' if args.quick else ''}")
    print("\n".join(table(figures)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
