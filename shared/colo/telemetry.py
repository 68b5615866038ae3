"""Telemetry: OpenTelemetry tracing (OTLP export only when configured) and Prometheus metrics.

Nothing here is required to run: without an endpoint (or without an OTLP exporter
package) a TracerProvider is still installed so that W3C ``traceparent`` headers are
created and propagated over NATS (DESIGN.md §4), but no span leaves the process.
"""

from __future__ import annotations

import logging
from typing import Any

import prometheus_client
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("colo.telemetry")

_provider: TracerProvider | None = None


def setup(service_name: str, otlp_endpoint: str = "") -> TracerProvider:
    """Install a TracerProvider for ``service_name`` (once per process; later calls return it).

    With ``otlp_endpoint`` set and ``opentelemetry-exporter-otlp`` importable, spans are
    exported in batches over OTLP/gRPC; otherwise a warning is logged and nothing is exported.
    """
    global _provider
    if _provider is not None:
        return _provider
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if otlp_endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
        except ImportError:
            log.warning("OTLP endpoint %s set but opentelemetry-exporter-otlp is not installed; "
                        "traces are not exported", otlp_endpoint)
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def tracing_enabled() -> bool:
    """True once :func:`setup` installed a provider (the bus then propagates traceparent)."""
    return _provider is not None


_tracers: dict[str, trace.Tracer] = {}


def tracer(name: str = "colo") -> trace.Tracer:
    """An OpenTelemetry tracer (a no-op tracer before :func:`setup`); cached per name once
    tracing is set up (looking one up costs tens of microseconds, too much per message)."""
    if _provider is None:
        return trace.get_tracer(name)
    t = _tracers.get(name)
    if t is None:
        t = _tracers[name] = trace.get_tracer(name)
    return t


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add W3C ``traceparent``/``tracestate`` of the current span to ``headers`` (in place)."""
    propagate.inject(headers)
    return headers


def extract(headers: dict[str, str] | None) -> Any:
    """The OpenTelemetry context carried by ``headers`` (empty context when none)."""
    return propagate.extract(headers or {})


def registry() -> prometheus_client.CollectorRegistry:
    """The Prometheus registry served at ``/metrics`` (the process default registry)."""
    return prometheus_client.REGISTRY


def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> prometheus_client.Counter:
    """A Prometheus counter registered once per process: a second call with the same name
    returns the first one (services may be constructed several times in tests)."""
    return _get_or_create(prometheus_client.Counter, name, doc, labels)


def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> prometheus_client.Gauge:
    """A Prometheus gauge registered once per process (see :func:`counter`)."""
    return _get_or_create(prometheus_client.Gauge, name, doc, labels)


def histogram(name: str, doc: str, labels: tuple[str, ...] = (),
              buckets: tuple[float, ...] = prometheus_client.Histogram.DEFAULT_BUCKETS
              ) -> prometheus_client.Histogram:
    """A Prometheus histogram registered once per process (see :func:`counter`)."""
    return _get_or_create(prometheus_client.Histogram, name, doc, labels, buckets=buckets)


_metrics: dict[str, Any] = {}


def _get_or_create(kind: Any, name: str, doc: str, labels: tuple[str, ...], **kw: Any) -> Any:
    existing = _metrics.get(name)
    if existing is not None:
        if not isinstance(existing, kind):
            raise ValueError(f"metric {name} already registered as {type(existing).__name__}")
        return existing
    metric = kind(name, doc, labelnames=labels, registry=registry(), **kw)
    _metrics[name] = metric
    return metric


def render_metrics() -> tuple[bytes, str]:
    """The registry in Prometheus text format and its content type."""
    return prometheus_client.generate_latest(registry()), prometheus_client.CONTENT_TYPE_LATEST
