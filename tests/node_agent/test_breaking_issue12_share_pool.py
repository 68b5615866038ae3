"""The share pool's use is never less than what its LS pods report using.

The share pool's use is node use − Σ LSE/LSR/BE pod use (REFERENCE.md §5). The figures are sampled apart:
a BE pod's figure that runs ahead of the node's (it started, or burst, between the two reads), or BE pods
over-reported by their cgroups, take the difference below what the LS pods themselves use, down to
negative. The pool then looks Idle with room for every throttled LS pod: quota scaling turns up pods whose
extra use takes the real pool past Overload, and the next round turns them down again — the oscillation
issue 12 item 6 removed, through one skewed sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from colo.messages import CPUBurstStrategy
from colo_node_agent.strategies.burst_scaling import ScalingPod, scaling_operations
from colo_node_agent.strategies.cpu_burst import SharePoolPod, share_pool

C = 1000
POLICY = CPUBurstStrategy(policy="cfsQuotaBurstOnly")  # Overload 50 %


@dataclass(frozen=True)
class Case:
    name: str
    node_used: int
    be_used: int
    want_used: int


# 32 CPUs, 14 LS pods each using 1 core (their limit): 14 cores of LS use
CASES = [
    Case("consistent-sample", 20 * C, 6 * C, 14 * C),
    Case("be-figure-ahead-of-node", 24 * C, 20 * C, 14 * C),
    Case("difference-negative", 10 * C, 14 * C, 14 * C),
]


def pods(be_used: int) -> list[SharePoolPod]:
    return [SharePoolPod("LS", 1 * C, 1 * C) for _ in range(14)] + [SharePoolPod("BE", 0, be_used)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_share_pool_use_holds_its_ls_pods(case: Case) -> None:
    assert share_pool(32, case.node_used, pods(case.be_used)).used == case.want_used


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ups_stay_within_the_real_headroom(case: Case) -> None:
    """Whatever the skew, the pods turned up fit under the Overload threshold with the LS pods' real use."""
    pool = share_pool(32, case.node_used, pods(case.be_used))
    scaling = [ScalingPod(f"p{i:02}", 100_000, 100_000, 300_000, 1 * C, True, 0.5) for i in range(14)]
    ups = [uid for uid, op in scaling_operations(scaling, pool, POLICY).items() if op == "up"]
    assert 14 * C + len(ups) * 200 < 32 * C * POLICY.share_pool_threshold_percent / 100
    assert len(ups) == 9  # (16000 − 14000 − 1) // 200 m
