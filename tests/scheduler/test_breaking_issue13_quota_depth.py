"""Issue 13, a quota tree deeper than Python's recursion limit (a chain of 1,500 quotas, each the parent of the
next): the runtime quota calculator summed the children's requests recursively and raised RecursionError in every
scheduling cycle once such a tree was applied. The tree is valid; its pods are scheduled within its quota.
The core test lowers the recursion limit to 150 frames above its own instead of applying 1,500 quotas (each
apply rebuilds the tree: quadratic, minutes)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator

import msgspec
import pytest
from sched_helpers import node, pod, scheduler

from colo.messages import ElasticQuota
from colo_scheduler.plugins.elasticquota.runtime import TreeQuota, tree_runtimes

DEPTH = sys.getrecursionlimit() + 500


def test_tree_runtimes_of_a_chain_deeper_than_the_recursion_limit() -> None:
    chain = [TreeQuota(f"q{i}", f"q{i - 1}" if i else "", 1, 10_000, 1, 0) for i in range(DEPTH)]
    chain[-1] = TreeQuota(f"q{DEPTH - 1}", f"q{DEPTH - 2}", 1, 10_000, 1, request=700)
    out = tree_runtimes(5000, chain)
    assert len(out) == DEPTH and all(v == 700 for v in out.values())  # each asks its one child's 700


@pytest.fixture
def shallow_stack() -> Iterator[int]:
    """A recursion limit 150 frames above the caller's; the depth of a quota chain that exceeds it."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 150)
    try:
        yield 300
    finally:
        sys.setrecursionlimit(limit)


def test_core_schedules_under_a_quota_chain_deeper_than_the_recursion_limit(shallow_stack: int) -> None:
    depth = shallow_stack
    s = scheduler()
    s.on_node(node("n0", cpu=10_000, memory=64 << 30, pods=110), 0.0)
    for i in range(depth):
        leaf = i == depth - 1
        spec = ElasticQuota(name=f"q{i}", parent=f"q{i - 1}" if i else "", min={"cpu": 1000}, max={"cpu": 4000},
                            namespaces=["deep"] if leaf else [])
        assert s.on_quota(spec) == []
    for k in range(6):
        s.add_pod(msgspec.structs.replace(pod(f"p{k}", cpu=1000, priority=5), namespace="deep"), 0.0)
    out = s.schedule_cycle(1.0)
    assert len(out.placements) == 4  # the chain's max, 4 cores, holds at every level
    assert s.quota is not None
    status = {st.name: st for st in s.quota.statuses(1.0)}
    assert status["q0"].used == {"cpu": 4000} and status[f"q{depth - 1}"].pending == 2
