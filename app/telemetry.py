"""Telemetry of the reference service, switched on from its settings (the environment):

- `OTEL_EXPORTER_OTLP_ENDPOINT` (e.g. `http://otel-collector:4318`): traces and metrics exported over OTLP/HTTP;
  the service name is `OTEL_SERVICE_NAME` (default `mcpfusion-billing`), read by the OpenTelemetry SDK itself.
- `MCPFUSION_PROMETHEUS=1`: `/metrics` in the Prometheus text format.

Neither set: no telemetry object, and OpenTelemetry is never imported.
"""

from __future__ import annotations

import os

from mcpfusion.telemetry import Telemetry

from .settings import Settings


def telemetry_for(settings: Settings) -> Telemetry | None:
    if settings.otlp_endpoint is None:
        return Telemetry(prometheus=True) if settings.prometheus else None
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint = settings.otlp_endpoint.rstrip("/")
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "mcpfusion-billing")})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    readers: list[MetricReader] = [PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"))]
    if settings.prometheus:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader())
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider, prometheus=settings.prometheus)
