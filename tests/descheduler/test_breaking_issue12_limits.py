"""The time-window limits count each migration, also a pod's second migration within the window.

An evicted pod comes back with its uid (the scheduler re-queues it), so a pod may be migrated again while its
first migration still counts in a window. The limiter's history was keyed by pod uid and a later start
replaced the earlier entry: the first migration vanished from every window — from its source node's, the
workload's and the cluster's — and one more migration was let through than the limit allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from colo.messages import PodBound, PodSpec, PodStatus, Resources
from colo_descheduler.cluster import ClusterView
from colo_descheduler.limits import LimitKey, MigrationLimiter
from colo_descheduler.lownodeload import Candidate, Eviction, max_unavailable
from colo_descheduler.settings import DeschedulerSettings, WindowLimit


@dataclass(frozen=True)
class Case:
    name: str
    settings: DeschedulerSettings
    candidate: LimitKey  # a different pod asking at 60 s
    refused_by: str


# pod "a" of ns/web moves n1 → n2 (0 s, finished at 10 s), then n2 → n3 (20 s, finished at 30 s)
FIRST, SECOND = LimitKey("n1", "ns", "ns/web"), LimitKey("n2", "ns", "ns/web")
CASES = [
    Case("source-node-of-the-first-move", DeschedulerSettings(node_window_limit=WindowLimit(max_migrations=1)),
         LimitKey("n1", "ns", ""), "node n1"),
    Case("workload-4-replicas-max-2", DeschedulerSettings(), LimitKey("n9", "ns", "ns/web"), "workload ns/web"),
    Case("cluster-2-per-minute", DeschedulerSettings(global_window_limit=WindowLimit(max_migrations=2, window_s=60)),
         LimitKey("n9", "other", ""), "cluster"),
    Case("namespace-2-per-5-min", DeschedulerSettings(namespace_window_limit=WindowLimit(max_migrations=2)),
         LimitKey("n9", "ns", ""), "namespace ns"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_pod_migrated_twice_counts_twice(case: Case) -> None:
    limiter = MigrationLimiter(case.settings, max_unavailable)
    limiter.record("a", FIRST, 0.0)
    limiter.finish("a", 10.0)
    limiter.record("a", SECOND, 20.0)
    limiter.finish("a", 30.0)
    assert limiter.refuse(case.candidate, 60.0, {"ns/web": 4}).startswith(case.refused_by)


def test_rebooking_a_running_migration_counts_once() -> None:
    """A migration booked again while it runs (a resumed job) is the same migration."""
    limiter = MigrationLimiter(DeschedulerSettings(node_window_limit=WindowLimit(max_migrations=2)), max_unavailable)
    limiter.record("a", FIRST, 0.0)
    limiter.record("a", FIRST, 5.0)
    assert limiter.refuse(LimitKey("n1", "ns", ""), 6.0) == ""
    limiter.finish("a", 10.0)
    limiter.prune(10.0 + 400.0)
    assert limiter.refuse(LimitKey("n1", "ns", ""), 410.0) == ""


def test_through_the_cluster_view() -> None:
    """The same through :class:`ClusterView`: the pod moves twice, its first source stays at its limit."""
    view = ClusterView(DeschedulerSettings(node_window_limit=WindowLimit(max_migrations=1)))
    spec = PodSpec(uid="a", name="a", app="web", requests=Resources(cpu=1000))
    view.on_bound(PodBound(spec=spec, node="n1", at=0.0))
    view.start_migration(Eviction("a", "n1", "n2", "default/web", (1000, 0)), 1.0)
    view.on_bound(PodBound(spec=spec, node="n2", at=2.0))
    view.on_status(PodStatus(uid="a", node="n2", phase="Running", at=3.0))
    view.start_migration(Eviction("a", "n2", "n3", "default/web", (1000, 0)), 50.0)
    other = PodSpec(uid="b", name="b", app="db", requests=Resources(cpu=1000))
    view.on_bound(PodBound(spec=other, node="n1", at=0.0))
    cand = Candidate("b", "n1", (1000, 0), workload="default/db")
    assert view.refuse(cand, 60.0).startswith("node n1")
