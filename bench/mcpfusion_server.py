"""mcpfusion's side of `bench/mcp_throughput.py`: the invoice tool behind a full presenter (model with a
hidden field, rules, a UI table, a suggestion, PII redaction and one embedded child presenter).

Serve: `uvicorn mcpfusion_server:app --app-dir bench` (MCP at /mcp, JSON responses; SSE with `BENCH_MODE=sse`).
With `BENCH_MIDDLEWARE=N` the app wraps every call in N no-op middleware (what `--middleware` measures).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from mcpfusion import ActionCall, CallNext, Model, Presenter, Tool, ToolError, ToolResponse, suggest, ui
from mcpfusion.app import MCPFusion

try:  # run as a script/module from bench/ or imported as bench.mcpfusion_server
    from peers.invoice import INVOICE_ID, RAW
except ImportError:  # pragma: no cover
    from bench.peers.invoice import INVOICE_ID, RAW


class Invoice(BaseModel):
    id: str
    customer: dict[str, Any]
    amount_cents: int = Field(description="CENTS, divide by 100")
    status: Literal["draft", "paid", "overdue"]
    due_date: str
    internal_notes: str = ""


InvoiceModel = Model(Invoice, hidden=["internal_notes"])

line_presenter = (
    Presenter("InvoiceLine")
    .schema({"sku": str, "qty": int, "amount_cents": int, "card": str | None})
    .redact_pii(["card"])
    .rules(["Line amounts are in CENTS."])
)


def _invoice_ui(inv: dict[str, Any]) -> list[Any]:
    rows = [["Invoice", inv["id"]], ["Amount", inv["amount_cents"] / 100], ["Status", inv["status"]]]
    return [ui.table(["Field", "Value"], rows)]


def _invoice_suggestions(inv: dict[str, Any]) -> list[Any]:
    return [suggest("billing.remind", "Send a payment reminder") if inv["status"] == "overdue" else None]


invoice_presenter = (
    Presenter("Invoice")
    .schema(InvoiceModel)
    .rules(["CRITICAL: amount_cents is in CENTS. Divide by 100.", "Status is one of draft, paid, overdue."])
    .redact_pii(["customer.email", "customer.phone"])
    .ui(_invoice_ui)
    .suggest(_invoice_suggestions)
    .embed("lines", line_presenter)
)

billing = Tool("billing", description="Invoices", exposition="flat")


@billing.action(readonly=True, returns=invoice_presenter)
async def get_invoice(id: Annotated[str, Field(description="Invoice id, e.g. inv_1042")]) -> dict[str, Any]:
    """Fetch one invoice."""
    if id != INVOICE_ID:
        raise ToolError("NOT_FOUND", f'Invoice "{id}" was not found.')
    return RAW


@billing.action()
async def remind(id: str) -> str:
    """Send a payment reminder (what the invoice's suggestion names: suggestions name registered actions)."""
    return f"reminder sent for {id}"


def _telemetry() -> Any:
    """`BENCH_TELEMETRY=1`: OpenTelemetry on, as in production (SDK providers, batch span processor, periodic
    metric reader), with exporters that discard, so the figure is the framework's cost, not a network's.
    A fraction (`BENCH_TELEMETRY=0.1`) samples that share of traces (parent-based trace-id ratio sampler);
    `1` records every trace. `BENCH_METRICS=0` switches the metrics off (tracing alone), `BENCH_TRACING=0`
    the tracing (metrics alone)."""
    setting = os.environ.get("BENCH_TELEMETRY")
    if not setting:
        return None
    ratio = float(setting)
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from mcpfusion.telemetry import Telemetry

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class DiscardMetrics(MetricExporter):
        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    tracer_provider = TracerProvider(sampler=ALWAYS_ON if ratio >= 1 else ParentBased(TraceIdRatioBased(ratio)))
    tracer_provider.add_span_processor(BatchSpanProcessor(Discard()))
    meter_provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(DiscardMetrics())])
    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider,
                     tracing=os.environ.get("BENCH_TRACING") != "0", metrics=os.environ.get("BENCH_METRICS") != "0")


async def no_op(call: ActionCall, call_next: CallNext) -> ToolResponse:
    """A middleware that only passes the call on: the cost of the middleware chain itself."""
    return await call_next(call)


MIDDLEWARE = [no_op] * int(os.environ.get("BENCH_MIDDLEWARE", "0"))
# BENCH_MODE=sse: SSE replies (the default of the 2025-11-25 wire); otherwise JSON replies.
fusion = MCPFusion(name="bench-mcpfusion", version="1.0.0", tools=[billing], middleware=MIDDLEWARE,
                   json_response=os.environ.get("BENCH_MODE") != "sse", telemetry=_telemetry())
app = fusion.build_app()
