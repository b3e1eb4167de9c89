"""Per-call CPU of the core path, two or more trees side by side, in process (no sockets, no wrk).

Each tree (a git revision of this repository, exported to a temporary directory, or a directory) runs in
its own worker process with its own `mcpfusion` and its own `bench/mcpfusion_server.py` (the invoice
tool behind the full presenter that `mcp_throughput.py` serves). The workers take turns, round after
round; each figure is the best round (a shared machine only ever makes a round slower). Cells, in µs of
process CPU per call (uvloop, the calls sent straight into the ASGI app):

- `2026json`: a 2026-07-28 tools/call; `2025json` / `2025sse`: a 2025-11-25 tools/call on an initialized
  session, answered as JSON / as SSE (two apps, one per response mode);
- `bare`: the bare FastAPI route of `peers/bare_fastapi.py` answering the same bytes (the floor);
- `present`: `invoice_presenter.present(invoice)` alone (what `presenter.py` times).

Every cell is checked once before measuring (HTTP 200, a successful result, SSE when SSE is asked).
The last lines give, per tree, `sse_vs_json` (2025sse / 2025json) and `bare_vs_ours` (bare / 2026json, the
in-process counterpart of `ratio_vs_bare_fastapi`; wrk adds the socket work both pay).

Run: `python bench/core_ab.py 0fa9772 HEAD [--rounds 8] [--calls 300] [--cells 2026json,present]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import export_tree, post, status_and_body

CELLS = ("2026json", "2025json", "2025sse", "bare", "present")
MODERN, LEGACY = "2026-07-28", "2025-11-25"
ACCEPT = "application/json, text/event-stream"


# -- worker (one per tree) ------------------------------------------------------------------------------


def _body(wire: str, tool: str, invoice_id: str) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": {"id": invoice_id}}
    if wire == MODERN:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0.0"},
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


def _headers(wire: str, tool: str, session_id: str | None = None) -> list[tuple[bytes, bytes]]:
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": wire,
               "host": "127.0.0.1"}
    if wire == MODERN:
        headers.update({"mcp-method": "tools/call", "mcp-name": tool})
    if session_id:
        headers["mcp-session-id"] = session_id
    return [(k.encode(), v.encode()) for k, v in headers.items()]


async def _session(app: Any) -> str:
    init = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1.0.0"}}})
    headers = [(b"content-type", b"application/json"), (b"accept", ACCEPT.encode()), (b"host", b"127.0.0.1")]
    out = await post(app, headers, init.encode())
    session_id = dict(out[0]["headers"])[b"mcp-session-id"].decode()
    headers += [(b"mcp-session-id", session_id.encode()), (b"mcp-protocol-version", LEGACY.encode())]
    await post(app, headers, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    return session_id


async def _worker(cells: list[str]) -> None:
    tree = Path.cwd()
    sys.path[:0] = [str(tree), str(tree / "bench")]
    import mcpfusion_server as server  # noqa: PLC0415 - the tree's own bench server
    from peers.invoice import INVOICE_ID, RAW  # noqa: PLC0415

    from mcpfusion.app import MCPFusion  # noqa: PLC0415

    def build(json_response: bool) -> Any:
        return MCPFusion(name="bench-mcpfusion", version="1.0.0", tools=[server.billing],
                         json_response=json_response).build_app()

    tool = "billing_get_invoice"
    json_app, sse_app = build(True), build(False)
    targets = {
        "2026json": (json_app, _headers(MODERN, tool), _body(MODERN, tool, INVOICE_ID)),
        "2025json": (json_app, _headers(LEGACY, tool, await _session(json_app)), _body(LEGACY, tool, INVOICE_ID)),
        "2025sse": (sse_app, _headers(LEGACY, tool, await _session(sse_app)), _body(LEGACY, tool, INVOICE_ID)),
    }
    if "bare" in cells:  # the bare route answers the bytes of our 2026 reply, as in mcp_throughput.py
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            f.write(status_and_body(await post(*targets["2026json"]))[1])
        os.environ["BENCH_BODY_FILE"] = f.name
        from peers import bare_fastapi  # noqa: PLC0415

        targets["bare"] = (bare_fastapi.app, _headers(MODERN, tool), _body(MODERN, tool, INVOICE_ID))
    for name, target in targets.items():
        for _ in range(100):
            out = await post(*target)
        sse = dict(out[0]["headers"]).get(b"content-type", b"").startswith(b"text/event-stream")
        if out[0]["status"] != 200 or b'"isError":false' not in status_and_body(out)[1] or sse != (name == "2025sse"):
            raise SystemExit(f"{tree}: {name} is not a successful tools/call: {out[:2]}")
    present = server.invoice_presenter.present
    for _ in range(500):
        present(RAW)
    print("ready", flush=True)
    for line in sys.stdin:
        calls = int(line.split()[1])
        result: dict[str, float] = {}
        for name in cells:
            gc.collect()
            if name == "present":
                start = time.process_time()
                for _ in range(calls * 5):
                    present(RAW)
                result[name] = (time.process_time() - start) / (calls * 5) * 1e6
                continue
            target = targets[name]
            start = time.process_time()
            for _ in range(calls):
                await post(*target)
            result[name] = (time.process_time() - start) / calls * 1e6
        print(json.dumps(result), flush=True)


# -- driver ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", help="git revisions (or directories) to compare")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300, help="calls per cell and round (present: 5x)")
    parser.add_argument("--cells", default=",".join(CELLS))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cells = [c for c in args.cells.split(",") if c]
    if args.worker:
        import uvloop  # noqa: PLC0415 - what the wrk runs serve with

        uvloop.run(_worker(cells))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {rev: export_tree(rev, Path(tmp)) for rev in args.trees}
        workers = {}
        for rev, path in dirs.items():
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", "--cells",
                                     ",".join(cells), rev], cwd=path, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONPATH": str(path)})
            assert proc.stdin is not None and proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit(f"{rev}: the worker did not start")
            workers[rev] = proc
        best: dict[str, dict[str, float]] = {rev: {} for rev in dirs}
        for round_ in range(args.rounds):
            for rev in list(workers) if round_ % 2 == 0 else list(workers)[::-1]:
                proc = workers[rev]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"round {args.calls}\n")
                proc.stdin.flush()
                for cell, value in json.loads(proc.stdout.readline()).items():
                    best[rev][cell] = min(best[rev].get(cell, float("inf")), value)
        for proc in workers.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
    print(f"# µs of CPU per call, best of {args.rounds} interleaved rounds of {args.calls} calls")
    print("cell".ljust(10) + "".join(rev.rjust(14) for rev in dirs))
    for cell in cells:
        print(cell.ljust(10) + "".join(f"{best[rev][cell]:14.1f}" for rev in dirs))
    for rev, figures in best.items():
        ratios = []
        if {"2025sse", "2025json"} <= figures.keys():
            ratios.append(f"sse_vs_json={figures['2025sse'] / figures['2025json']:.2f}")
        if {"bare", "2026json"} <= figures.keys():
            ratios.append(f"bare_vs_ours={figures['bare'] / figures['2026json']:.2f}")
        print(f"{rev}: {' '.join(ratios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
