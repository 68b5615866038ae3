"""telemetry.observe_many gives the samples of observing one by one (bucket edges included)."""

from __future__ import annotations

import prometheus_client

from colo import telemetry


def _samples(h: prometheus_client.Histogram) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels.get("le", "")): s.value for m in h.collect() for s in m.samples
            if not s.name.endswith("_created")}


def test_observe_many_equals_observe_one_by_one() -> None:
    buckets = (0.001, 0.01, 0.1, 1.0)
    amounts = [0.0, 0.0005, 0.001, 0.0010001, 0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 30.0, 0.001]
    registry = prometheus_client.CollectorRegistry()
    one = prometheus_client.Histogram("one_seconds", "x", buckets=buckets, registry=registry)
    many = prometheus_client.Histogram("many_seconds", "x", buckets=buckets, registry=registry)
    for a in amounts:
        one.observe(a)
    telemetry.observe_many(many, amounts)
    telemetry.observe_many(many, [])
    got = {(n.replace("many", "one"), le): v for (n, le), v in _samples(many).items()}
    assert got == _samples(one)
