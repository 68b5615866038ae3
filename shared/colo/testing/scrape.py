"""Read a service's ``/metrics`` over HTTP in tests: the samples as a dict, and their differences."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""(sample name, label pairs) → value; histogram samples keep their ``_bucket``/``_sum``/``_count`` names."""


async def scrape(port: int, host: str = "127.0.0.1") -> Samples:
    """GET ``http://host:port/metrics`` and parse it (Prometheus text format). Raises aiohttp errors, and
    AssertionError when the answer is not 200."""
    async with aiohttp.ClientSession() as http, http.get(f"http://{host}:{port}/metrics") as r:
        assert r.status == 200, r.status
        text = await r.text()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels``; 0.0 when absent (a labelled child not created yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """How much sample ``name{labels}`` moved between two scrapes."""
    return value(after, name, **labels) - value(before, name, **labels)
