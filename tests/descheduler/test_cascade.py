"""The eviction cascade: the real round over a node agent that reports 300 s means every 60 s.

Cluster: ``hot`` (32 cores) runs 8 replicas of ``shop/web`` at 2950 m each plus 2000 m of system: 25600 m =
80 % CPU, 1600 m over the 75 % high threshold, so evicting one pod (→ 70.8 %) cures it. ``cold`` runs only
6400 m of system (20 %), the one low node. Memory stays low everywhere. 30 virtual minutes of rounds every
10 s after a 10-minute warm-up.
"""

from __future__ import annotations

from agent_model import GI, DriveResult, ModelNode, NodeAgentModel, drive

from colo.messages import PodSpec
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings, WindowLimit

ALLOC = (32_000, 128 * GI)
POD_CPU = 2950


def cascade_run(settings: DeschedulerSettings | None = None) -> DriveResult:
    model = NodeAgentModel([ModelNode("hot", ALLOC, (2000, 8 * GI), report_offset_s=0.0),
                            ModelNode("cold", ALLOC, (6400, 8 * GI), report_offset_s=30.0)])
    service = DeschedulerService(settings or DeschedulerSettings())
    for i in range(8):
        spec = PodSpec(uid=f"web-{i}", name=f"web-{i}", namespace="shop", app="web", priority=9500)
        model.add_pod(spec, "hot", (POD_CPU, 2 * GI), at=-600.0)
    return drive(service, model, duration_s=1800.0)


def test_one_eviction_cures_the_hot_node() -> None:
    """Evictions are what the excess needs (1), the target stays low, one app is not emptied in 120 s.

    On main this run evicted 7 of hot's 8 pods within 60 s, all to cold, which peaked at 84.5 % and sent 7
    back (35 evictions in 30 minutes; 7 replicas of shop/web within 120 s).
    """
    res = cascade_run()
    assert res.from_node("hot") == 1, [(e.at, e.uid, e.source) for e in res.evictions]
    assert res.from_node("cold") == 0
    assert res.peak_cpu_percent["cold"] < 30.0
    assert res.max_moved_within("shop/web", 120.0) == 1


def test_window_limits_alone_stop_the_cascade() -> None:
    """With bookings cut to 1 s, the per-workload window limit alone holds a workload of 8 replicas to
    max_unavailable(8) = 2 migrations per 5 minutes; without the window limits only the caps on running
    migrations act, and all 8 replicas move within 5 minutes (cold peaks at 93.8 %)."""
    limited = cascade_run(DeschedulerSettings(booking_ttl_s=1.0))
    assert limited.max_moved_within("shop/web", 300.0) == 2
    unlimited = cascade_run(DeschedulerSettings(booking_ttl_s=1.0, workload_window_s=0,
                                                node_window_limit=WindowLimit()))
    assert unlimited.max_moved_within("shop/web", 300.0) > 2
