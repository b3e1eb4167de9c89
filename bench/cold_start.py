"""Cold start of a big server: import + `build_app()` of 100 tools x 5 actions, and its tools/list.

Each figure is taken in fresh processes (`--runs` of them, median and range reported), started one after
another on CPU 0:

- `python -c pass`: the interpreter alone (the floor under every figure);
- `import mcpfusion.app`: the framework's imports (FastAPI, pydantic, the MCP types...);
- import + build: `bench/many_tools_server.py` imported (its 500 actions declared, 100 presenters) and
  `build_app()` run (MCP endpoint, 500 REST routes), timed inside the process from before the first
  mcpfusion import to the app object; `wall` is the whole process, interpreter start and exit included;
- tools/list in the built process through its ASGI app (no network): the first call (the listing is built
  then) and the median of the next 200.

Run: `python bench/cold_start.py [--runs 7]`. The last line is
`import_build_s=X tools_list_first_ms=Y tools_list_ms=Z` (medians; targets X <= 0.5, Z <= 2).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from mcp_throughput import pin  # noqa: E402

# Runs in the measured process: times the import and build, then tools/list through the ASGI app.
PROBE = r"""
import time
t0 = time.perf_counter(); c0 = time.process_time()
import mcpfusion.app
t1 = time.perf_counter()
import sys
sys.path.insert(0, {bench!r})
import many_tools_server
t2 = time.perf_counter(); c2 = time.process_time()
import asyncio, json
app = many_tools_server.app

async def tools_list():
    meta = {{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {{}}}}
    body = json.dumps({{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {{"_meta": meta}}}}).encode()
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"accept", b"application/json"),
               (b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"tools/list")]
    sent = []
    async def receive():
        return {{"type": "http.request", "body": body, "more_body": False}}
    async def send(message):
        sent.append(message)
    scope = {{"type": "http", "asgi": {{"version": "3.0"}}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {{}}}}
    await app(scope, receive, send)
    return sent

async def main():
    s = time.perf_counter(); sent = await tools_list(); first = time.perf_counter() - s
    reply = json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))
    tools = reply["result"]["tools"]
    times = []
    for _ in range(200):
        s = time.perf_counter(); await tools_list(); times.append(time.perf_counter() - s)
    times.sort()
    print(json.dumps({{"import_s": t1 - t0, "build_s": t2 - t1, "import_build_s": t2 - t0,
                      "import_build_cpu_s": c2 - c0, "tools": len(tools),
                      "first_ms": first * 1e3, "steady_ms": times[len(times) // 2] * 1e3}}))

asyncio.run(main())
"""


def run(code: str) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run([*pin(0), sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - start, out


def spread(values: list[float], scale: float = 1.0, unit: str = "s", digits: int = 3) -> str:
    v = sorted(x * scale for x in values)
    return f"{statistics.median(v):.{digits}f} {unit} ({v[0]:.{digits}f}-{v[-1]:.{digits}f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure (default 7)")
    args = parser.parse_args(argv)
    bare, imports, probes, walls = [], [], [], []
    run("pass")  # warm the file cache
    for _ in range(args.runs):  # interleaved, so a burst of load elsewhere hits one run of each
        bare.append(run("pass")[0])
        imports.append(run("import mcpfusion.app")[0])
        wall, out = run(PROBE.format(bench=str(BENCH_DIR)))
        walls.append(wall)
        probes.append(json.loads(out.strip().splitlines()[-1]))
    tools = probes[0]["tools"]
    print(f"cold start of bench/many_tools_server.py ({tools} MCP tools; 100 tools x 5 actions), "
          f"median (min-max) of {args.runs} fresh processes on CPU 0")
    print("| figure | measured |\n|---|---|")
    print(f"| interpreter alone (`python -c pass`), whole process | {spread(bare)} |")
    print(f"| `import mcpfusion.app`, whole process | {spread(imports)} |")
    print(f"| import + build_app, in process | {spread([p['import_build_s'] for p in probes])} |")
    print(f"|   of which importing mcpfusion.app | {spread([p['import_s'] for p in probes])} |")
    print(f"|   of which declaring 500 actions + build_app | {spread([p['build_s'] for p in probes])} |")
    print(f"| import + build_app, CPU | {spread([p['import_build_cpu_s'] for p in probes])} |")
    print(f"| whole process (start, import, build, 201 tools/list, exit) | {spread(walls)} |")
    print(f"| first tools/list (listing built) | {spread([p['first_ms'] for p in probes], unit='ms', digits=2)} |")
    print(f"| tools/list, median of the next 200 | {spread([p['steady_ms'] for p in probes], unit='ms', digits=2)} |")
    med = {k: statistics.median(p[k] for p in probes) for k in ("import_build_s", "first_ms", "steady_ms")}
    print(f"import_build_s={med['import_build_s']:.3f} tools_list_first_ms={med['first_ms']:.2f} "
          f"tools_list_ms={med['steady_ms']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
