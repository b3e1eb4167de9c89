"""What tracing costs a tools/call, in process: CPU per call through the ASGI app, and the SDK's own floors.

The same invoice server as `bench/mcp_throughput.py` (`mcpfusion_server.py`) is built several times in one
process: without telemetry, and with `Telemetry` on (SDK providers, batch span processor and periodic metric
reader, exporters that discard) at each sampling ratio asked for. One 2026-07-28 tools/call is driven straight
through each app (no HTTP server, no sockets) in interleaved rounds; the figure is process CPU time per call,
best round (a shared machine only ever makes a round slower).

The second table prices what the OpenTelemetry Python SDK alone does per span and per histogram record
(tight loop, no mcpfusion code): the floor under any tracing of a call.

Run: `python bench/telemetry_cost.py [--ratios 1,0.1,0] [--calls 300] [--rounds 20]`. The last line is
`telemetry_ratio_1=X ...`: untraced CPU over traced CPU, per sampling ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
import timeit
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import mcpfusion_server as server  # noqa: E402
from mcp_throughput import MODERN, call_body, call_headers  # noqa: E402

from mcpfusion.app import MCPFusion  # noqa: E402


def build(ratio: str) -> Any:
    """The bench app, untraced (`""`) or with telemetry sampling `ratio` of the traces."""
    os.environ["BENCH_TELEMETRY"] = ratio
    try:
        telemetry = server._telemetry()
    finally:
        os.environ.pop("BENCH_TELEMETRY", None)
    fusion = MCPFusion(name="bench-mcpfusion", version="1.0.0", tools=[server.billing], json_response=True,
                       telemetry=telemetry)
    return fusion.build_app()


BODY = json.dumps(call_body(MODERN)).encode()
HEADERS = [(k.lower().encode(), v.encode()) for k, v in call_headers(MODERN).items()] + [(b"host", b"127.0.0.1")]


async def call(app: Any) -> list[dict[str, Any]]:
    """One tools/call straight through the ASGI app; the messages it sent."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": HEADERS, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await asyncio.Event().wait()  # never disconnects
        raise AssertionError  # pragma: no cover

    out: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        out.append(message)

    await app(scope, receive, send)
    return out


async def per_call(apps: dict[str, Any], calls: int, rounds: int) -> dict[str, float]:
    """µs of process CPU per call of each app, best of `rounds` interleaved rounds."""
    for name, app in apps.items():
        for _ in range(min(calls, 200)):
            out = await call(app)
        if out[0]["status"] != 200 or b'"isError":false' not in out[1]["body"]:
            raise SystemExit(f"{name}: not a successful tools/call: {out}")
    best = dict.fromkeys(apps, float("inf"))
    for _ in range(rounds):
        for name, app in apps.items():
            gc.collect()
            start = time.process_time()
            for _ in range(calls):
                await call(app)
            best[name] = min(best[name], (time.process_time() - start) / calls * 1e6)
    return best


def sdk_floors(loops: int = 5000) -> dict[str, float]:
    """µs per operation of the OpenTelemetry SDK alone (tight loop of `loops`, best of 15)."""
    from opentelemetry import context, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    def tracer(sampler: Any) -> Any:
        provider = TracerProvider(sampler=sampler)
        provider.add_span_processor(BatchSpanProcessor(Discard(), max_queue_size=1 << 20))
        return provider.get_tracer("floor")

    recorded, dropped = tracer(ALWAYS_ON), tracer(ParentBased(TraceIdRatioBased(0.0)))
    histogram = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("floor").create_histogram("h")
    server_attributes = {"mcp.method.name": "tools/call", "mcp.protocol.version": MODERN,
                         "network.transport": "tcp", "jsonrpc.request.id": "1", "gen_ai.tool.name": "billing",
                         "gen_ai.operation.name": "execute_tool"}
    action_attributes = {"mcpfusion.tool": "billing", "mcpfusion.action": "get_invoice", "mcpfusion.transport": "mcp"}
    scope = InstrumentationScope("floor")

    def finished(parent: Any) -> None:
        up = parent.get_span_context()
        ids = trace.SpanContext(up.trace_id, recorded.id_generator.generate_span_id(), False, up.trace_flags)
        recorded.span_processor.on_end(ReadableSpan("phase", ids, up, recorded.resource, {}, start_time=1,
                                                    end_time=2, instrumentation_scope=scope))

    def best(fn: Any) -> float:
        return min(timeit.repeat(fn, number=loops, repeat=15, timer=time.process_time)) / loops * 1e6

    floors = {
        "recorded span (start_span with 6 attributes, end)": best(
            lambda: recorded.start_span("s", attributes=server_attributes).end()),
        "unsampled span (parent-based ratio 0)": best(
            lambda: dropped.start_span("s", attributes=server_attributes).end()),
        "histogram record (3 attributes)": best(lambda: histogram.record(0.001, action_attributes)),
    }
    parent = recorded.start_span("parent")
    token = context.attach(trace.set_span_in_context(parent))
    try:
        floors["histogram record under a sampled span (exemplar)"] = best(
            lambda: histogram.record(0.001, action_attributes))
        floors["finished span handed to the processors (a phase span)"] = best(lambda: finished(parent))
    finally:
        context.detach(token)
    return floors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratios", default="1,0.1,0", help="sampling ratios to price (default 1,0.1,0)")
    parser.add_argument("--calls", type=int, default=300, help="calls per round (default 300)")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds, the best counts (default 20)")
    parser.add_argument("--floor-loops", type=int, default=5000, help="operations per SDK floor timing (default 5000)")
    args = parser.parse_args(argv)
    ratios = [r.strip() for r in args.ratios.split(",") if r.strip()]
    apps = {"off": build("")} | {ratio: build(ratio) for ratio in ratios}
    cpu = asyncio.run(per_call(apps, args.calls, args.rounds))
    print(f"tools/call CPU in process, best of {args.rounds} interleaved rounds of {args.calls} calls")
    print("| telemetry | µs/call | extra µs | untraced/traced |")
    print("|---|---:|---:|---:|")
    off = cpu["off"]
    for name, value in cpu.items():
        label = "off" if name == "off" else f"on, {float(name):.0%} of traces recorded"
        print(f"| {label} | {value:.1f} | {value - off:.1f} | {off / value:.2f} |")
    print("OpenTelemetry SDK alone, µs per operation (tight loop):")
    for label, value in sdk_floors(args.floor_loops).items():
        print(f"  {label}: {value:.2f}")
    print(" ".join(f"telemetry_ratio_{ratio}={off / cpu[ratio]:.2f}" for ratio in ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
