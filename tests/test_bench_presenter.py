"""`python bench/presenter.py` runs and prints both figures (values are for BENCHMARKS.md, not asserted)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_presenter_benchmark_prints_render_time_and_toon_ratio():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "presenter.py")], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    assert re.search(r"^presenter_render_us=\d+\.\d \(target <= 50\)$", out, re.M), out
    assert re.search(r"^toon_vs_json_ratio=\d+\.\d\d \(target <= 1\.0\)$", out, re.M), out
    assert re.search(r"^tokens_json=\d+ tokens_toon=\d+ token_ratio=0\.\d\d$", out, re.M), out
