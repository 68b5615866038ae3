"""Telemetry: OpenTelemetry tracing (OTLP export only when configured) and Prometheus metrics.

Nothing here is required to run: without an endpoint (or without an OTLP exporter
package) a TracerProvider is still installed so that W3C ``traceparent`` headers are
created and propagated over NATS (DESIGN.md §4), but no span leaves the process.
"""

from __future__ import annotations

import bisect
import logging
import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import prometheus_client
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.metrics import MetricWrapperBase

log = logging.getLogger("colo.telemetry")

# No ``*_created`` series beside every counter and histogram: a creation timestamp per series doubles what is
# scraped and Prometheus does not use it (docs/metrics.md "Conventions").
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

_provider: TracerProvider | None = None
_exporting = False


def setup(service_name: str, otlp_endpoint: str = "") -> TracerProvider:
    """Install a TracerProvider for ``service_name`` (once per process; later calls return it).

    With ``otlp_endpoint`` set and ``opentelemetry-exporter-otlp`` importable, spans are
    exported in batches over OTLP/gRPC; otherwise a warning is logged and nothing is exported.
    """
    global _provider, _exporting
    if _provider is not None:
        return _provider
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if otlp_endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter,
            )
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
            _exporting = True
        except ImportError:
            log.warning("OTLP endpoint %s set but opentelemetry-exporter-otlp is not installed; "
                        "traces are not exported", otlp_endpoint)
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def tracing_enabled() -> bool:
    """True once :func:`setup` installed a provider (the bus then propagates traceparent)."""
    return _provider is not None


def exporting() -> bool:
    """True when spans leave the process (an OTLP exporter was installed by :func:`setup`)."""
    return _exporting


_rng = random.Random()


def _parse_traceparent(value: str) -> tuple[int, int, int] | None:
    """(trace_id, parent span_id, flags) of a W3C ``traceparent`` header; None when malformed."""
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16 or len(parts[3]) != 2 or parts[0] == "ff":
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id, flags


@contextmanager
def consume_span(name: str, headers: Mapping[str, str]) -> Iterator[None]:
    """Make a span for handling one message the current span (DESIGN.md §4: one trace per pod).

    The span continues the trace of the message's ``traceparent`` (a new trace when absent or
    malformed), so anything published inside carries the same trace id. When spans are exported
    (:func:`exporting`) it is a full SDK span named ``name``; otherwise nothing would ever read
    it, so a non-recording span with the same trace id, a fresh span id and the parent's flags is
    used instead — it propagates identically at a fraction of the cost (this runs per message).
    """
    if _exporting:
        with tracer("colo.bus").start_as_current_span(name, context=extract(dict(headers))):
            yield
        return
    parent = _parse_traceparent(headers.get("traceparent", ""))
    if parent is None:
        trace_id, flags, state = _rng.getrandbits(128) or 1, trace.TraceFlags.SAMPLED, None
    else:
        trace_id, flags = parent[0], parent[2]
        raw_state = headers.get("tracestate")
        state = trace.TraceState.from_header([raw_state]) if raw_state else None
    ctx = trace.SpanContext(trace_id=trace_id, span_id=_rng.getrandbits(64) or 1, is_remote=False,
                            trace_flags=trace.TraceFlags(flags), trace_state=state)
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(ctx)))
    try:
        yield
    finally:
        otel_context.detach(token)


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


def observe_many(child: prometheus_client.Histogram, amounts: Sequence[float]) -> None:
    """``child.observe(a)`` for every ``a`` of ``amounts`` (a histogram without labels, or one labelled child),
    with one increment per bucket touched and one of the sum: what a cycle of a hundred pods observes costs a
    few bucket increments instead of a hundred locked bucket walks. The samples are those of observing one by
    one (tests/unit/test_telemetry_observe_many.py). Falls back to one by one on a prometheus_client without
    the attributes relied on (``_upper_bounds``, ``_buckets``, ``_sum``, as of 0.20–0.26)."""
    if not amounts:
        return
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if bounds is None or buckets is None or total is None or len(buckets) != len(bounds):
        for a in amounts:
            child.observe(a)
        return
    counts: dict[int, int] = {}
    for a in amounts:
        i = bisect.bisect_left(bounds, a)  # the first bound >= a: observe()'s "amount <= bound"
        counts[i] = counts.get(i, 0) + 1
    for i, n in counts.items():
        if i < len(buckets):
            buckets[i].inc(n)
    total.inc(float(sum(amounts)))


_metrics: dict[str, MetricWrapperBase] = {}
_M = TypeVar("_M", bound=MetricWrapperBase)


def _get_or_create(kind: type[_M], name: str, doc: str, labels: tuple[str, ...], **kw: Any) -> _M:
    existing = _metrics.get(name)
    if existing is not None:
        if not isinstance(existing, kind):
            raise ValueError(f"metric {name} already registered as {type(existing).__name__}")
        return existing
    metric = kind(name, doc, labelnames=labels, registry=registry(), **kw)
    _metrics[name] = metric
    return metric


def definitions() -> dict[str, MetricWrapperBase]:
    """Every metric made by :func:`counter`, :func:`gauge` or :func:`histogram` in this process, by name."""
    return dict(_metrics)


def prune(metric: MetricWrapperBase, label: str, keep: Collection[str]) -> int:
    """Remove every series of ``metric`` whose ``label`` value is not in ``keep`` (e.g. the nodes that
    disappeared, so that no stale series stays exported); returns how many were removed. Raises ValueError
    when ``metric`` has no such label."""
    names = list(metric._labelnames)
    if label not in names:
        raise ValueError(f"metric {metric._name} has no label {label!r}")
    i = names.index(label)
    with metric._lock:
        stale = [values for values in metric._metrics if values[i] not in keep]
    for values in stale:
        metric.remove(*values)
    return len(stale)


def render_metrics() -> tuple[bytes, str]:
    """The registry in Prometheus text format and its content type."""
    return prometheus_client.generate_latest(registry()), prometheus_client.CONTENT_TYPE_LATEST
