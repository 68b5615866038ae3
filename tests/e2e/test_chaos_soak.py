"""The chaos soak in small (``make chaos`` is the long one): the shortened scenario on a 3-server NATS cluster
(3 replicas) and Redis behind Sentinel (``WAIT 1``), with one SIGKILL of each kind at fixed wall times —
the scheduler, a NATS member, the Redis primary — struck from the killer's own task while steps run.
Invariants are checked after every step; nothing may be lost, bound twice or over-committed (~90 s)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from colo.sim import traces as tr
from colo.sim.chaos import PlannedKill
from colo.sim.chaos_soak import SoakParams, soak

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.ha,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

TINY = SoakParams(nodes=6, hours=0.5, seed=2, minutes=1.25, plan=(
    PlannedKill(12.0, "service", "scheduler"),
    PlannedKill(30.0, "nats", "nats-0"),
    PlannedKill(50.0, "redis", "primary"),
))


def test_one_kill_of_each_kind_loses_nothing(tmp_path: Path) -> None:
    s = asyncio.run(soak(TINY, tmp_path, say=lambda line: None))
    print("\nchaos (tiny): " + json.dumps({k: s[k] for k in ("kills_survived", "pods_submitted", "pods_bound",
                                                            "pods_lost", "double_binds", "over_commits", "binds_unannounced",
                                                            "stall_s", "first_bind_s", "wall_s")}))
    assert s["kills"] == {"service": 1, "nats": 1, "redis": 1}
    assert s["kills_survived"] == s["kills"], s["kill_log"]
    assert s["invariant_checks"] >= 31
    assert s["pods_bound"] > 0
    assert s["violations"] == []
    assert s["pods_lost"] == 0, s["lost"]
    assert s["double_binds"] == 0
    assert s["over_commits"] == 0
    assert s["binds_unannounced"] == 0
    assert s["unexpected_exits"] == []
    assert s["restarts"] == {"scheduler": 1}
    assert all(code == 0 for code in s["exit_codes"].values()), s["exit_codes"]
