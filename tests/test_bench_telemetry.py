"""`python bench/telemetry_cost.py` runs and prints its figures (values are for BENCHMARKS.md, not asserted)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_telemetry_cost_prints_per_call_cpu_and_sdk_floors():
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "telemetry_cost.py"), "--ratios", "1,0", "--calls", "20",
         "--rounds", "1", "--floor-loops", "50"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    out = run.stdout
    for label in ("tracing alone, 100% of traces recorded", "on \\(tracing and metrics\\), 0% of traces recorded",
                  "metrics alone"):
        assert re.search(rf"^\| {label} \| \d+\.\d \| -?\d+\.\d \| \d\.\d\d \| \d+\.\d \|$", out, re.M), out
    assert "finished span handed to the processors" in out and "mcpfusion light span" in out
    assert re.search(r"^telemetry_ratio_1=\d\.\d\d telemetry_ratio_0=\d\.\d\d tracing_ratio_1=\d\.\d\d "
                     r"tracing_ratio_0=\d\.\d\d$", out.splitlines()[-1]), out
    assert "Queue full" not in run.stderr  # no span was dropped: every trace really was recorded
