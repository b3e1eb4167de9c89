"""bench/summary.py: reads each benchmark's `key=value` figures and judges them against the #12 targets.

The benchmarks themselves have their own smoke tests; here a stand-in script prints figures."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import summary  # noqa: E402


def test_run_reads_the_figures_a_benchmark_prints(tmp_path, monkeypatch, capsys):
    script = tmp_path / "fake.py"
    script.write_text("print('| table | 1,234 |')\nprint('ratio_vs_bare_fastapi=0.64 overhead_get_invoice=-0.05')\n")
    monkeypatch.setattr(summary, "BENCH_DIR", tmp_path)
    figures = summary.run(summary.Bench("fake.py", (), ()), quick=False)
    assert figures == {"ratio_vs_bare_fastapi": 0.64, "overhead_get_invoice": -0.05}
    assert "| table | 1,234 |" in capsys.readouterr().out  # the benchmark's own output goes through


def test_a_failing_benchmark_is_reported_and_its_figures_are_missing(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken.py").write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    monkeypatch.setattr(summary, "BENCH_DIR", tmp_path)
    assert summary.run(summary.Bench("broken.py", (), ()), quick=True) == {}
    out = capsys.readouterr().out
    assert "boom" in out and "failed (exit 3)" in out


def test_table_judges_each_target_in_its_direction():
    rows = {line.split(" | ")[0].lstrip("| "): line for line in summary.table({
        "sse_cpu_vs_json_mcpfusion": 1.31,  # at most 1.3: missed
        "ratio_vs_bare_fastapi": 0.63,  # at least 0.63: met on the bound
        "get_invoice_rps_per_cpu": 1499,  # at least 1500: missed
        "tools_list_first_ms": 900.0,  # no target
    })[2:]}
    assert rows["SSE reply CPU / JSON reply CPU (2025-11-25)"].endswith("| 1.31x | <= 1.3x | no |")
    assert rows["tools/call req/CPU-s vs a bare FastAPI route"].endswith("| 0.63x | >= 0.63x | yes |")
    assert rows["reference service get_invoice, req/CPU-s"].endswith("| 1499 | >= 1500 | no |")
    assert rows["first tools/list of 100x5 (lazy schemas built)"].endswith("| 900 ms | - | - |")
    assert rows["steady tools/list of 100x5"].endswith("| not measured | <= 2 ms | - |")
    assert len(rows) == len(summary.TARGETS)
