"""Instructions per presenter render of the benchmark invoice under callgrind, one or more trees side by side,
with `json.dumps` of the same invoice as the peer.

`presenter.py` times the render on the CPU clock, which a shared machine makes noisy; callgrind's instruction
count is deterministic. Each tree (a git revision exported, or a directory) runs its own `mcpfusion` and
`bench/mcpfusion_server.py` in a worker under `valgrind --tool=callgrind --collect-atstart=no
--toggle-collect=functools_reduce`: after 200 warm-up renders, exactly `--calls` renders (then `--calls`
`json.dumps` of the raw invoice) run inside `functools.reduce`, so only those are counted.

Run: `python bench/presenter_icount.py 5036de5 HEAD [--calls 1000] [--jobs 2]` (a few minutes per tree).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import export_tree  # noqa: E402


def _worker(what: str, calls: int) -> None:
    tree = Path.cwd()
    sys.path[:0] = [str(tree), str(tree / "bench")]
    from mcpfusion_server import invoice_presenter  # noqa: PLC0415 - the tree's own bench presenter
    from peers.invoice import RAW  # noqa: PLC0415

    present = invoice_presenter.present
    for _ in range(200):
        present(RAW)
        json.dumps(RAW)
    if what == "present":
        functools.reduce(lambda _, __: present(RAW), range(calls), None)
    else:
        functools.reduce(lambda _, __: json.dumps(RAW), range(calls), None)


def _count(path: Path, what: str, calls: int) -> float:
    """Instructions per call of `what` in the tree at `path`."""
    command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
               "--callgrind-out-file=/dev/null", sys.executable, str(Path(__file__).resolve()), "--worker", what,
               "--calls", str(calls)]
    env = {**os.environ, "PYTHONPATH": str(path), "PYTHONHASHSEED": "0"}  # the same str hashes, the same dict work
    done = subprocess.run(command, cwd=path, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no callgrind count for {path}: {done.stderr[-500:]}")
    return int(found.group(1)) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", default=["HEAD"])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.calls)
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = [export_tree(tree, Path(tmp)) for tree in args.trees]
        cells = [(path, what) for path in paths for what in ("present", "json")]
        with ThreadPoolExecutor(args.jobs) as pool:
            counts = list(pool.map(lambda cell: _count(cell[0], cell[1], args.calls), cells))
    print("# instructions (Ir) per call under callgrind")
    for index, tree in enumerate(args.trees):
        present, dumps = counts[2 * index], counts[2 * index + 1]
        print(f"{tree}: presenter_render_ir={present:,.0f} json_dumps_invoice_ir={dumps:,.0f} "
              f"render_vs_json_dumps={present / dumps:.2f}")
    if len(args.trees) > 1:
        base = counts[0]
        for index, tree in enumerate(args.trees[1:], start=1):
            print(f"{tree} vs {args.trees[0]}: {counts[2 * index] / base - 1:+.1%}")


if __name__ == "__main__":
    main()
