"""Bad input at scale (issue 15 item 6): every subject a service consumes, fuzzed against the running services.

``FUZZ_N`` payloads per subject (default 150 here; ``make fuzz`` sets 10,000) — see :mod:`run` for what is
generated and checked. Each subject's counts are appended as one JSON line to ``FUZZ_REPORT``
(default ``out/fuzz/fuzz.jsonl``); ``python tests/fuzz/report.py`` prints them as a table.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cluster import start_cluster
from run import fuzz_subject
from seeds import CASES

pytestmark = pytest.mark.integration

N = int(os.environ.get("FUZZ_N", "150"))
SEED = int(os.environ.get("FUZZ_SEED", "1"))
REPORT = Path(os.environ.get("FUZZ_REPORT", "out/fuzz/fuzz.jsonl"))


async def test_every_consumed_subject_has_a_fuzz_case(nats_url: str, redis_url: str, bus_factory: Any) -> None:
    cluster = await start_cluster(nats_url, redis_url, bus_factory)
    try:
        consumed = cluster.consumed()
    finally:
        assert await cluster.close() == []
    assert consumed, "no service consumes anything: the cluster did not start its consumers"
    assert consumed - set(CASES) == set(), "consumed subjects without a fuzz case (add one to tests/fuzz/seeds.py)"
    assert set(CASES) - consumed == set(), "fuzz cases for subjects nobody consumes"


@pytest.mark.parametrize("pattern", sorted(CASES))
async def test_fuzz_subject(pattern: str, nats_url: str, redis_url: str, bus_factory: Any) -> None:
    cluster = await start_cluster(nats_url, redis_url, bus_factory)
    try:
        out = await fuzz_subject(cluster, nats_url, pattern, N, SEED)
    finally:
        stopped = await cluster.close()
    out.problems.extend(stopped)
    out.crashes += len(stopped)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as f:
        f.write(json.dumps(out.row()) + "\n")
    print(json.dumps(out.row()))
    assert out.problems == [], "\n".join(out.problems[:20])
    assert out.crashes == 0
    assert out.sent >= N * 0.9, f"only {out.sent} payloads generated"
