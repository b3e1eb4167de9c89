"""What telemetry costs a tools/call, in process: CPU per call through the ASGI app, and the SDK's own floors.

The same invoice server as `bench/mcp_throughput.py` (`mcpfusion_server.py`) is built several times in one
process: without telemetry; with tracing alone (`Telemetry(metrics=False)`) at each sampling ratio asked for;
with full telemetry (tracing and metrics) at each ratio; and with metrics alone. The last column says how much
of each figure is the batch span processor's export thread's CPU. Providers as in production
(SDK `TracerProvider` with a batch span processor, `MeterProvider` with a periodic reader and the SDK's
default exemplar filter), exporters that discard. One 2026-07-28 tools/call is driven straight through each
app (no HTTP server, no sockets), the apps interleaved call by call; the figure is the CPU time of one call
(the lower quartile of each app's calls: a shared machine only ever adds) plus the CPU its batch span
processor's export thread spent per call.

The second table prices single operations in a tight loop (no app around them): the OpenTelemetry SDK's
own span and histogram record, and mcpfusion's light span (mcpfusion/tracing.py), the floor under tracing
a call.

Run: `python bench/telemetry_cost.py [--ratios 1,0.1,0] [--calls 300] [--rounds 20]`. The last line is
`telemetry_ratio_1=X ... tracing_ratio_1=Y ...`: untraced CPU over telemetry CPU (full, then tracing alone),
per sampling ratio.
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
from harness import post  # noqa: E402
from mcp_throughput import MODERN, call_body, call_headers  # noqa: E402

from mcpfusion.app import MCPFusion  # noqa: E402


def build(ratio: str, tracing: bool = True, metrics: bool = True, fastapi_only: bool = False) -> Any:
    """The bench app, untraced (`""`) or with telemetry sampling `ratio` of the traces (tracing and metrics
    each switched as asked). `fastapi_only`: no `Telemetry`, only FastAPI's own telemetry configured as
    `build_app()` configures it (SDK providers, `/mcp` excluded): what FastAPI's wrapper costs an MCP request."""
    settings = {"BENCH_TELEMETRY": ratio, "BENCH_TRACING": "1" if tracing else "0",
                "BENCH_METRICS": "1" if metrics else "0"}
    os.environ.update(settings)
    try:
        telemetry = server._telemetry()
    finally:
        for key in settings:
            os.environ.pop(key, None)
    if fastapi_only:
        fusion = MCPFusion(name="bench-mcpfusion", version="1.0.0", tools=[server.billing], json_response=True)
        return fusion.build_app(telemetry=telemetry.fastapi_config())
    fusion = MCPFusion(name="bench-mcpfusion", version="1.0.0", tools=[server.billing], json_response=True,
                       telemetry=telemetry)
    return fusion.build_app()


BODY = json.dumps(call_body(MODERN)).encode()
HEADERS = [(k.lower().encode(), v.encode()) for k, v in call_headers(MODERN).items()] + [(b"host", b"127.0.0.1")]


async def call(app: Any) -> list[dict[str, Any]]:
    """One tools/call straight through the ASGI app; the messages it sent."""
    return await post(app, HEADERS, BODY)


def _export_threads(app: Any) -> list[Any]:
    """The batch span processor threads of an app's tracer provider (their CPU is part of the app's cost)."""
    telemetry = app.state.mcpfusion.telemetry
    provider = getattr(telemetry, "tracer_provider", None)
    processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", ())
    return [p._batch_processor._worker_thread for p in processors if hasattr(p, "_batch_processor")]


def _thread_cpu_ns(threads: list[Any]) -> int:
    return sum(time.clock_gettime_ns(time.pthread_getcpuclockid(t.ident)) for t in threads if t.is_alive())


async def per_call(apps: dict[Any, Any], calls: int, rounds: int, quantile: float = 0.25,
                   export_share: dict[Any, float] | None = None) -> dict[Any, float]:
    """µs of CPU per call of each app: the calling thread's CPU per call, taken call by call with the apps
    interleaved (the `quantile` of each app's calls: other load on a shared machine only ever adds), plus the
    CPU of the app's span export thread over all its calls (that part alone into `export_share` if given)."""
    for name, app in apps.items():
        for _ in range(min(calls, 200)):
            out = await call(app)
        if out[0]["status"] != 200 or b'"isError":false' not in out[1]["body"]:
            raise SystemExit(f"{name}: not a successful tools/call: {out}")
    threads = {name: _export_threads(app) for name, app in apps.items()}
    exported = {name: _thread_cpu_ns(found) for name, found in threads.items()}
    samples: dict[Any, list[int]] = {name: [] for name in apps}
    clock = time.thread_time_ns
    for _ in range(rounds):
        gc.collect()
        for _ in range(calls):
            for name, app in apps.items():
                start = clock()
                await call(app)
                samples[name].append(clock() - start)
    made = rounds * calls
    out = {}
    for name, values in samples.items():
        values.sort()
        export = (_thread_cpu_ns(threads[name]) - exported[name]) / made
        out[name] = (values[int(len(values) * quantile)] + export) / 1e3
        if export_share is not None:
            export_share[name] = export / 1e3
    return out


def sdk_floors(loops: int = 5000) -> dict[str, float]:
    """µs per operation in a tight loop of `loops` (best of 15): the OpenTelemetry SDK's own, and mcpfusion's
    light span."""
    from opentelemetry import context, trace
    from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from mcpfusion.tracing import Tracing

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    def tracer(sampler: Any) -> Any:
        provider = TracerProvider(sampler=sampler)
        provider.add_span_processor(BatchSpanProcessor(Discard(), max_queue_size=1 << 20))
        return provider.get_tracer("floor")

    recorded, dropped = tracer(ALWAYS_ON), tracer(ParentBased(TraceIdRatioBased(0.0)))
    light = Tracing(recorded)

    def histogram(**options: Any) -> Any:
        provider = MeterProvider(metric_readers=[InMemoryMetricReader()], **options)
        return provider.get_meter("floor").create_histogram("h")

    default, no_exemplars = histogram(), histogram(exemplar_filter=AlwaysOffExemplarFilter())
    server_attributes = {"mcp.method.name": "tools/call", "mcp.protocol.version": MODERN,
                         "network.transport": "tcp", "jsonrpc.request.id": "1", "gen_ai.tool.name": "billing",
                         "gen_ai.operation.name": "execute_tool"}
    action_attributes = {"mcpfusion.tool": "billing", "mcpfusion.action": "get_invoice", "mcpfusion.transport": "mcp"}
    scope = InstrumentationScope("floor")
    server_kind = trace.SpanKind.SERVER

    def finished(parent: Any) -> None:
        up = parent.get_span_context()
        ids = trace.SpanContext(up.trace_id, recorded.id_generator.generate_span_id(), False, up.trace_flags)
        recorded.span_processor.on_end(ReadableSpan("phase", ids, up, recorded.resource, {}, start_time=1,
                                                    end_time=2, instrumentation_scope=scope))

    def best(fn: Any) -> float:
        return min(timeit.repeat(fn, number=loops, repeat=15, timer=time.process_time)) / loops * 1e6

    floors = {
        "SDK recorded span (start_span with 6 attributes, end)": best(
            lambda: recorded.start_span("s", kind=server_kind, attributes=server_attributes).end()),
        "mcpfusion light span (the same, mcpfusion/tracing.py)": best(
            lambda: light.start("s", server_attributes, None, server_kind).end()),
        "SDK unsampled span (parent-based ratio 0)": best(
            lambda: dropped.start_span("s", attributes=server_attributes).end()),
        "histogram record (3 attributes, no current span)": best(lambda: default.record(0.001, action_attributes)),
        "histogram record, exemplar filter always_off": best(lambda: no_exemplars.record(0.001, action_attributes)),
    }
    parent = recorded.start_span("parent")
    token = context.attach(trace.set_span_in_context(parent))
    try:
        floors["histogram record under a sampled span (keeps an exemplar)"] = best(
            lambda: default.record(0.001, action_attributes))
        floors["finished span handed to the processors (a phase span)"] = best(lambda: finished(parent))
        floors["context attach and detach of a span"] = best(
            lambda: context.detach(context.attach(trace.set_span_in_context(parent))))
    finally:
        context.detach(token)
    floors["sampler decision (always on)"] = best(
        lambda: ALWAYS_ON.should_sample(None, 1, "s", server_kind, server_attributes, ()))
    # What tracing a recorded tools/call cannot do without, whoever makes the spans: one sampler decision,
    # five spans through the processors (request, action, three phases), two spans made current.
    floors["floor of a recorded tools/call (sampler x1, finished span x5, attach+detach x2)"] = (
        floors["sampler decision (always on)"] + 5 * floors["finished span handed to the processors (a phase span)"]
        + 2 * floors["context attach and detach of a span"])
    return floors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratios", default="1,0.1,0", help="sampling ratios to price (default 1,0.1,0)")
    parser.add_argument("--calls", type=int, default=300, help="calls of each app per round (default 300)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds (a collection between; default 10)")
    parser.add_argument("--floor-loops", type=int, default=5000, help="operations per SDK floor timing (default 5000)")
    args = parser.parse_args(argv)
    ratios = [r.strip() for r in args.ratios.split(",") if r.strip()]
    apps = {("off", ""): build("")}
    for ratio in ratios:
        apps["tracing", ratio] = build(ratio, metrics=False)
    for ratio in ratios:
        apps["full", ratio] = build(ratio)
    apps["metrics", ""] = build("1", tracing=False)
    apps["fastapi", ""] = build("1", fastapi_only=True)
    export: dict[Any, float] = {}
    cpu = asyncio.run(per_call(apps, args.calls, args.rounds, export_share=export))
    print(f"tools/call CPU in process, lower quartile of {args.rounds * args.calls} calls of each app, interleaved")
    print("| telemetry | µs/call | extra µs | untraced/traced | of which export thread µs |")
    print("|---|---:|---:|---:|---:|")
    off = cpu["off", ""]
    labels = {"off": "off", "tracing": "tracing alone", "full": "on (tracing and metrics)", "metrics": "metrics alone",
              "fastapi": "FastAPI's telemetry alone, /mcp excluded"}
    for (kind, ratio), value in cpu.items():
        label = labels[kind] + (f", {float(ratio):.0%} of traces recorded" if ratio else "")
        print(f"| {label} | {value:.1f} | {value - off:.1f} | {off / value:.2f} | {export[kind, ratio]:.1f} |")
    print("Single operations, µs each (tight loop):")
    for label, value in sdk_floors(args.floor_loops).items():
        print(f"  {label}: {value:.2f}")
    print(" ".join([f"telemetry_ratio_{ratio}={off / cpu['full', ratio]:.2f}" for ratio in ratios]
                   + [f"tracing_ratio_{ratio}={off / cpu['tracing', ratio]:.2f}" for ratio in ratios]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
