"""A migration job books its move in the cluster view before its eviction goes out.

The node agent answers an eviction with ``PodStatus(Failed, Evicted)`` at once; in a run of the real services
that status can reach the descheduler's handler while its tick still awaits the store after publishing. If the
booking is made only after that, the view sees the pod leave with no booking (a departure, departures.py), and
the booking made next has no ``left_at`` and no ``ran_since``: it takes the pod's whole usage off the source for
as long as it lasts, on top of the departure's share. Which of the two orders happened decided whether the
2-hour audited run saw a relieved node as high (settling) or not, so one run differed from the next.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_migration_integration import GI, seed_cluster

from colo.messages import (
    EvictionCommand,
    NodeMetric,
    NodeSpec,
    PodBound,
    PodMetric,
    PodSpec,
    PodStatus,
    Resources,
    Usage,
)
from colo.store import Store
from colo_descheduler.cluster import ClusterView
from colo_descheduler.lownodeload import Eviction
from colo_descheduler.migration_runner import MigrationController
from colo_descheduler.settings import DeschedulerSettings

pytestmark = pytest.mark.integration
REQUEST = Resources(cpu=2000, memory=4 * GI)


def _view(settings: DeschedulerSettings) -> ClusterView:
    """``hot`` runs batch-1 (20 GiB) and prod-1 (30 GiB) since 0 s (as bound in the store by ``seed_cluster``);
    its metric at 400 s lists both."""
    v = ClusterView(settings)
    for n in ("hot", "cold"):
        v.on_node(NodeSpec(name=n, capacity=Resources(cpu=10_000, memory=100 * GI),
                           allocatable=Resources(cpu=10_000, memory=100 * GI)))
    for uid, prio, app in (("batch-1", 5500, "batch"), ("prod-1", 9500, "prod")):
        v.on_bound(PodBound(spec=PodSpec(uid=uid, name=uid, priority=prio, app=app, requests=REQUEST), node="hot",
                            at=0.0))
    v.on_metric(NodeMetric(node="hot", at=400.0, window_s=300.0, node_usage=Usage(cpu=3000, memory=50 * GI),
                           pods=[PodMetric(uid="batch-1", cpu=1500, memory=20 * GI),
                                 PodMetric(uid="prod-1", cpu=1500, memory=30 * GI)]))
    v.on_metric(NodeMetric(node="cold", at=400.0, window_s=300.0, node_usage=Usage(cpu=1000, memory=5 * GI)))
    return v


async def test_the_booking_is_made_before_the_eviction_is_sent(store: Store) -> None:
    await seed_cluster(store)
    settings = DeschedulerSettings()
    view = _view(settings)

    async def publish_and_answer(items: list[Any]) -> None:
        """Publishing, with the node agent's Failed status delivered before publish returns (the fast path
        of a real run made deterministic)."""
        for _, msg, _, _ in items:
            if isinstance(msg, EvictionCommand):
                view.on_status(PodStatus(uid=msg.uid, node=msg.node, phase="Failed", at=msg.at, reason="Evicted"))

    jobs = MigrationController(settings, store, view, publish_and_answer)
    await jobs.tick(400.0, [Eviction("batch-1", "hot", "cold", "default/batch", (1500, 20 * GI))])
    booking = view.bookings["batch-1"]
    assert (booking.left_at, booking.ran_since) == (400.0, 0.0)
    assert view.departures == {}  # the descheduler's own eviction is no departure
    view.on_metric(NodeMetric(node="hot", at=460.0, window_s=300.0,
                              node_usage=Usage(cpu=3000, memory=46 * GI),
                              pods=[PodMetric(uid="prod-1", cpu=1500, memory=30 * GI)]))
    hot = {n.name: n for n in view.fresh_loads(460.0, 180.0)}["hot"]
    # the window [160, 460] holds batch-1's run until 400 s: 240 of 300 s of its 20 GiB, taken off once
    assert hot.usage[1] == 46 * GI - round(20 * GI * 240 / 300)
