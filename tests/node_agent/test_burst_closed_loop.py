"""CPU burst quota scaling in a closed loop (docs/node-agent.md "CPU burst"): the sim backend runs the strategy
every sub-step and caps each pod's demand by the quota it wrote, so the pods' usage responds to their new quotas
as throttled pods do, and the next round sees that usage in the share pool."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import CPUBurstStrategy, NodeSLO, NodeSpec, PodSpec, Resources, SimWorkload
from colo_node_agent.backends.sim import SimBackend, SimConfig
from colo_node_agent.strategies.node import NodeSnapshot, PodState, StrategyMemory, plan_node
from colo_node_agent.topology import CPUTopology

G = 10**9
ROUND_S = 10.0
THRESHOLD = 0.50  # the share pool's Overload threshold (REFERENCE.md §5)


def node(cores: int) -> NodeSpec:
    cap = Resources(cpu=cores * 1000, memory=256 * G, pods=110)
    return NodeSpec(name="n1", capacity=cap, allocatable=cap, cpus=cores)


def ls_pod(uid: str, limit: int, demand: int) -> PodSpec:
    """An LS pod with a CPU limit (base quota = limit) that wants ``demand`` milli-cores all the time."""
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500,
                   requests=Resources(cpu=limit, memory=G), limits=Resources(cpu=limit, memory=2 * G),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[1.0], cpu_scale_milli=demand,
                                   memory_util=[1.0], memory_scale_bytes=G))


@dataclass(frozen=True)
class Round:
    """What one round left behind: the share pool's use (fraction of its CPUs) that the strategy saw, and the
    quotas (µs per 100 ms period) it wrote."""

    pool: float
    quotas: tuple[int, ...]


def run(pods: int, cores: int, limit: int, demand: int, rounds: int) -> list[Round]:
    slo = NodeSLO(node="n1", cpu_burst=CPUBurstStrategy(policy="cfsQuotaBurstOnly"))
    # no system usage: the share pool holds the pods only, as in the observed case
    b = SimBackend([node(cores)], SimConfig(sub_step_s=ROUND_S, system_cpu_fraction=0.0),
                   lambda name: msgspec.structs.replace(slo, node=name))
    uids = [f"ls{i:02d}" for i in range(pods)]
    for uid in uids:
        assert b.start_pod(ls_pod(uid, limit, demand), "n1")
    out = []
    for r in range(1, rounds + 1):
        b.advance(r * ROUND_S)
        used = sum(float(b.pods.cpu_used[b.pods.where[u]]) for u in uids)
        quotas = tuple(int(b.ex[0].read(f"kubepods/burstable/pod{u}", "cpu.cfs_quota_us")) for u in uids)  # type: ignore[arg-type]
        out.append(Round(used / (cores * 1000), quotas))
    return out


def flips(rounds: list[Round], start: int) -> int:
    """Rounds in which the total quota moved against its previous move (up after down or down after up);
    ``start`` the total before the first round (µs)."""
    totals = [start, *(sum(r.quotas) for r in rounds)]
    moves = [b - a for a, b in zip(totals, totals[1:]) if b != a]
    return sum(1 for x, y in zip(moves, moves[1:]) if (x > 0) != (y > 0))


def test_fourteen_throttled_pods_stay_stable_for_twenty_rounds() -> None:
    """14 LS pods of 1 core limit, each wanting 1.5 cores, on 32 CPUs: at base they fill 43.8 % of the share
    pool (Idle), all at ×1.2 they would fill 52.5 % (Overload). Scaling them together flipped every round;
    scaled one by one within the headroom below 50 %, the pool settles in the Cooling band and stays."""
    rounds = run(pods=14, cores=32, limit=1000, demand=1500, rounds=20)
    peak = max(r.pool for r in rounds)
    assert flips(rounds, start=14 * 100_000) == 0, [(round(r.pool, 3), sorted(set(r.quotas))) for r in rounds]
    assert peak < THRESHOLD
    assert all(r.quotas == rounds[-1].quotas for r in rounds[2:])  # settled by the third round
    assert max(rounds[-1].quotas) > 100_000  # the headroom was used: some pods burst


def test_plan_node_keeps_the_unthrottled_rounds_between_rounds() -> None:
    """Through plan_node and StrategyMemory: a pod at 2× its base, no longer throttled and using less than the
    next lower quota, keeps its quota for 4 rounds and steps down in the 5th (``scale_down_unthrottled_rounds``)."""
    spec = PodSpec(uid="p", name="p", qos_class="LS", priority=9500, requests=Resources(cpu=1000, memory=G),
                   limits=Resources(cpu=1000, memory=2 * G))
    memory = StrategyMemory()
    slo = NodeSLO(node="n", cpu_burst=CPUBurstStrategy(policy="cfsQuotaBurstOnly"))
    quotas = []
    for r in range(6):
        pod = PodState(spec, "LS", cpu_used=1000, memory_used=G, quota_us=200_000, throttled=False)
        snap = NodeSnapshot("n", 16_000, 64 * G, 4000, 8 * G, (pod,), CPUTopology.flat(16))
        plan = plan_node(snap, slo, memory, now=float(r))
        memory.absorb(plan, float(r))
        quotas.append([w.value for w in plan.writes  # the last write of a file wins (burst after the kubelet's)
                       if w.cgroup == "kubepods/burstable/podp" and w.resource == "cpu.cfs_quota_us"][-1])
    assert quotas == [200_000] * 4 + [160_000, 160_000]  # the snapshot keeps showing 200000: one step each round
    assert memory.unthrottled_rounds == {"p": 6}


@settings(max_examples=25, deadline=None)
@given(cores=st.sampled_from([8, 16, 32]), limit=st.sampled_from([500, 1000, 2000]), data=st.data())
def test_constant_demand_never_flips(cores: int, limit: int, data: st.DataObject) -> None:
    """Any number of LS pods with one constant demand: the total quota never reverses in 20 rounds, and a pool
    that starts below Overload at base quotas is never driven into it."""
    pods = data.draw(st.integers(1, cores * 1000 // limit), label="pods")
    demand = data.draw(st.integers(limit * 8 // 10, limit * 4), label="demand")
    rounds = run(pods, cores, limit, demand, rounds=20)
    assert flips(rounds, start=pods * limit * 100) == 0
    if pods * min(limit, demand) < cores * 1000 * THRESHOLD:
        assert max(r.pool for r in rounds) < THRESHOLD
