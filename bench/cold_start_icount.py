"""Instructions of cold start, stage by stage, under callgrind: `bench/cold_start.py`'s import + build of 100
tools x 5 actions, counted instead of timed (a shared machine makes its CPU figures noisy; the count is
deterministic to a fraction of a percent with `PYTHONHASHSEED=0` and the bytecode compiled first).

Each stage is a fresh `python -c` of the previous stage plus one step, run under `valgrind --tool=callgrind`
from the tree's `bench` directory with the tree first on `PYTHONPATH`; a stage's figure is its total less the
previous stage's:

- `python -c pass`: the interpreter;
- `import fastapi`;
- `import fastapi, mcpfusion.app`;
- then `import many_tools_server`: declaring the 500 actions and `build_app()`.

Two environments, side by side: as the bench venv has it (`email_validator` installed: FastMCP needs
`pydantic[email]`, and FastAPI imports it whenever it is there), and as a clean `pip install mcpfusion` has it
(`email_validator` blocked from import). `--gc-off` disables the collector first (`gc.disable()`), to tell
the collector's share from the rest; `--keep DIR` keeps the callgrind files (for `callgrind_annotate`).

Run: `python bench/cold_start_icount.py [HEAD 7270e50 DIR ...] [--gc-off] [--jobs 2] [--keep DIR]` (about a
minute per stage; a revision is exported with `git archive`, a directory is used as it is).
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import export_tree  # noqa: E402

# Each stage's code: the previous stage's plus one step.
STAGES = [
    ("the interpreter (`python -c pass`)", "pass"),
    ("`import fastapi`", "import fastapi"),
    ("`import mcpfusion.app` after it", "import fastapi, mcpfusion.app"),
    ("declaring 500 actions + `build_app()`", "import fastapi, mcpfusion.app, many_tools_server"),
]

# A clean install of mcpfusion has no `email_validator`: FastAPI's import then finds none.
ENVIRONMENTS = [("bench venv (email_validator installed)", ""),
                ("clean install (email_validator blocked)", "import sys; sys.modules['email_validator'] = None; ")]


def count(tree: Path, code: str, keep: Path | None, name: str) -> int:
    """Instructions of one `python -c code` run from `tree`'s bench directory, the tree's package first."""
    with tempfile.TemporaryDirectory() as tmp:
        out = (keep or Path(tmp)) / f"callgrind.{name}.out"
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code],
            capture_output=True, text=True, cwd=tree / "bench",
            env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree)})
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode or not found:
            raise SystemExit(f"{name}: callgrind failed:\n{run.stderr[-2000:]}")
        return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", default=["."], help="git revisions or directories (default: this one)")
    parser.add_argument("--gc-off", action="store_true", help="gc.disable() before anything else")
    parser.add_argument("--jobs", type=int, default=2, help="callgrind processes at once (default 2)")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="keep the callgrind files here")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    prefix = "import gc; gc.disable(); " if args.gc_off else ""
    with tempfile.TemporaryDirectory() as tmp:
        trees = {rev: export_tree(rev, Path(tmp)) if rev != "." else Path(__file__).resolve().parent.parent
                 for rev in args.trees}
        for tree in trees.values():  # as an installed package has it: no source compiled in the counted runs
            compileall.compile_dir(str(tree / "mcpfusion"), quiet=1)
            compileall.compile_dir(str(tree / "bench"), quiet=1, maxlevels=1)
        cells = [(rev, env, stage) for rev in trees for env in range(len(ENVIRONMENTS)) for stage in range(len(STAGES))
                 if env == 0 or stage > 0]  # the interpreter alone imports nothing to block
        with ThreadPoolExecutor(args.jobs) as pool:
            totals = dict(zip(cells, pool.map(
                lambda c: count(trees[c[0]], ENVIRONMENTS[c[1]][1] + prefix + STAGES[c[2]][1], args.keep,
                                f"{c[0].replace('/', '_')}.{c[1]}.{c[2]}"), cells), strict=True))
    gc_note = ", collector off" if args.gc_off else ""
    print(f"cold start in instructions (callgrind, PYTHONHASHSEED=0, bytecode compiled{gc_note}): what each stage "
          "adds to the previous one")
    columns = [(rev, env) for rev in trees for env in range(len(ENVIRONMENTS))]
    print("| stage | " + " | ".join(f"{rev}, {ENVIRONMENTS[env][0]}" for rev, env in columns) + " |")
    print("|---|" + "---:|" * len(columns))

    def total(rev: str, env: int, stage: int) -> int:
        return totals[(rev, 0 if stage == 0 else env, stage)]

    for stage, (label, _) in enumerate(STAGES):
        cells_text = [f"{(total(rev, env, stage) - (total(rev, env, stage - 1) if stage else 0)) / 1e6:,.1f}M"
                      for rev, env in columns]
        print(f"| {label} | " + " | ".join(cells_text) + " |")
    last = len(STAGES) - 1
    print("| mcpfusion's own (import + build, above `import fastapi`) | " + " | ".join(
        f"{(total(rev, env, last) - total(rev, env, 1)) / 1e6:,.1f}M" for rev, env in columns) + " |")
    print("| total | " + " | ".join(f"{total(rev, env, last) / 1e6:,.1f}M" for rev, env in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
