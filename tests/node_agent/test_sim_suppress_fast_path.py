"""The sim backend's suppress fast path (unchanged cpuset rounds are skipped) behaves as full planning."""

from __future__ import annotations

import pytest

from colo.messages import CPUSuppressStrategy, NodeSLO, NodeSpec, PodSpec, Resources, SimWorkload
from colo_node_agent.backends import sim_strategies as sim_module
from colo_node_agent.backends.sim import SimBackend, SimConfig

G = 10**9


class FullPlanningBackend(SimBackend):
    """Reference: never takes the fast path, every round is planned and applied."""

    def _reload_be(self, nodes: range | list[int]) -> None:
        super()._reload_be(nodes)
        self.be_settled = [False] * len(self.names)


def _nodes() -> list[NodeSpec]:
    out = []
    for i, cores in enumerate((8, 16, 32)):
        cap = Resources(cpu=cores * 1000, memory=64 * G, pods=110)
        out.append(NodeSpec(name=f"n{i}", capacity=cap, allocatable=cap, cpus=cores))
    return out


def _run(cls: type[SimBackend], policy: CPUSuppressStrategy, until_s: int) -> tuple[list[object], SimBackend]:
    b = cls(_nodes(), SimConfig(sub_step_s=10.0),
            lambda name: NodeSLO(node=name, cpu_suppress=policy, be_cpu_idle=False))
    trace: list[object] = []
    for i, name in enumerate(b.names):
        cores = b.logical[i]
        # LS load that swings between 10 % and 90 % of the node so the BE cpuset shrinks and grows
        util = [0.1, 0.5, 0.9, 0.9, 0.3, 0.1, 0.7]
        b.start_pod(PodSpec(uid=f"ls-{name}", name="ls", qos_class="LS", priority=9500,
                            requests=Resources(cpu=cores * 500, memory=G),
                            sim=SimWorkload(kind="series", step_s=40 + 10 * i, cpu_util=util,
                                            cpu_scale_milli=cores * 1000, memory_util=[0.5],
                                            memory_scale_bytes=G)), name)
        for j in range(3):
            b.start_pod(PodSpec(uid=f"be-{name}-{j}", name="be", qos_class="BE", priority=5500,
                                requests=Resources(batch_cpu=1000, batch_memory=G // 10),
                                sim=SimWorkload(kind="batch", cpu_milli=4000, duration_s=300 + 200 * j,
                                                memory_bytes=G // 10)), name)
    for t in range(60, until_s + 1, 60):
        res = b.advance(float(t))
        trace.append((t, sorted(res.stats.items()), [(e.kind, e.node, e.at, e.reason, sorted(e.detail.items()))
                                                     for e in res.events],
                      [(e.uid, e.reason, e.at) for e in res.ended], list(b.be_allowed), list(b.be_cpus),
                      list(b.be_quota_us)))
    return trace, b


@pytest.mark.parametrize("policy", [
    CPUSuppressStrategy(policy="cpuset"),
    CPUSuppressStrategy(policy="cpuset", threshold_percent=40, min_percent=10),
    CPUSuppressStrategy(policy="cfsQuota"),
    CPUSuppressStrategy(enabled=False),
], ids=["cpuset-default", "cpuset-low-threshold", "cfs-quota", "disabled"])
def test_fast_path_matches_full_planning(policy: CPUSuppressStrategy, monkeypatch: pytest.MonkeyPatch) -> None:
    want, ref = _run(FullPlanningBackend, policy, 1200)
    planned = 0
    real = sim_module.suppress

    def counting(*args: object) -> object:
        nonlocal planned
        planned += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sim_module, "suppress", counting)
    got, fast = _run(SimBackend, policy, 1200)
    assert got == want
    for i in range(len(fast.names)):
        assert fast.ex[i].audit == ref.ex[i].audit
        assert fast.fs[i].read("cpuset/kubepods/besteffort/cpuset.cpus") == \
            ref.fs[i].read("cpuset/kubepods/besteffort/cpuset.cpus")
    rounds = 1200 // 10 * len(fast.names)
    if policy.enabled and policy.policy == "cpuset":
        assert planned < rounds, "the fast path was never taken"
        assert any(e[0] == "suppress" for step in got for e in step[2]), "the cpuset never changed"  # type: ignore[index]
    else:
        assert planned == rounds
