"""OOM priority on this machine's real cgroups (v1 here): pods' processes get the oom_score_adj of their QoS
class, and a real memory hog in a memory-limited parent makes the kernel kill the BE process, not the LS one.
With the strategy off the kernel kills the largest process, an LS one. Each test works under its own
``colo-test-<hex>`` parent (fixture ``cgroup_parent``), removed with every process in it at teardown."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from colo.messages import MemoryEvictStrategy, NodeSLO, OOMStrategy, PodSpec, Resources
from colo_node_agent.backends.host import HostBackend, HostConfig
from colo_node_agent.backends.host_oom import read_oom_score_adj
from colo_node_agent.backends.sim import PodEnd

pytestmark = pytest.mark.cgroup

ROOT = Path("/sys/fs/cgroup")
MI = 1 << 20
NODE = "host-oom"
LIMIT = 320 * MI
"""The parent's memory limit: the node (node_scope=parent) and the memcg whose limit the hog hits."""

HOLD = "import sys, time; b = b'x' * ({mib} << 20); print('held', flush=True); time.sleep(300)"
GROW = ("import time\nchunks = []\nfor _ in range({mib} // 4):\n    chunks.append(b'x' * (4 << 20))\n"
        "    time.sleep(0.02)\nprint('grown', flush=True)\ntime.sleep(300)\n")


def can_lower_scores() -> bool:
    """Whether this process has CAP_SYS_RESOURCE (bit 24 of CapEff): needed for negative oom_score_adj."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)
    return False


def holder(uid: str, mib: int, qos: str, **kw: object) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class=qos, command=[sys.executable, "-c", HOLD.format(mib=mib)],  # type: ignore[arg-type]
                   **kw)  # type: ignore[arg-type]


class Node:
    def __init__(self, parent: str, state_dir: Path, slo: NodeSLO) -> None:
        (ROOT / "memory" / parent).mkdir(exist_ok=True)
        (ROOT / "memory" / parent / "memory.limit_in_bytes").write_text(str(LIMIT))
        self.slo = slo
        cfg = HostConfig(node_name=NODE, cgroup_parent=parent, state_dir=str(state_dir), loop_s=0.1,
                         node_scope="parent")
        self.b = HostBackend(cfg, lambda n: self.slo, start=time.time())
        self.ended: list[PodEnd] = []

    def step(self) -> None:
        self.ended += self.b.advance(time.time()).ended

    def until(self, cond: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.1)
            self.step()

    def used(self, uid: str, mib: int) -> bool:
        cg = self.b.pods[uid].state.cgroup if uid in self.b.pods else ""
        return bool(cg) and (self.b.tree.memory_used(cg) or 0) >= mib * MI

    def reasons(self) -> dict[str, str]:
        return {e.uid: e.reason for e in self.ended}


@pytest.fixture
def node(cgroup_parent: str, tmp_path: Path) -> Iterator[Callable[[NodeSLO], Node]]:
    made: list[Node] = []

    def make(slo: NodeSLO) -> Node:
        made.append(Node(cgroup_parent, tmp_path / "state", slo))
        return made[-1]

    yield make
    for n in made:
        n.b.purge()


def slo(oom: OOMStrategy) -> NodeSLO:
    # memory eviction off: the kernel's OOM killer, not the agent, has to choose
    return NodeSLO(node=NODE, memory_evict=MemoryEvictStrategy(enabled=False), oom=oom)


def run_hog(n: Node) -> None:
    """LS 'ls' holds 140 MiB (requests 64 MiB), BE 'be' 60 MiB, then LS 'hog' grows to 120 MiB: 320 MiB
    plus three interpreters does not fit the 320 MiB parent, 'ls' + 'hog' alone does."""
    n.b.start_pod(holder("ls", 140, "LS", requests=Resources(memory=64 * MI)), NODE)
    n.b.start_pod(holder("be", 60, "BE", requests=Resources(batch_cpu=100, batch_memory=32 * MI),
                         limits=Resources(batch_cpu=1000, batch_memory=256 * MI)), NODE)
    n.until(lambda: n.used("ls", 140) and n.used("be", 60), "ls and be to hold their memory")
    grow = PodSpec(uid="hog", name="hog", qos_class="LS", command=[sys.executable, "-c", GROW.format(mib=120)])
    n.b.start_pod(grow, NODE)
    n.until(lambda: bool(n.ended) or n.used("hog", 120), "the hog to grow or something to be killed")
    n.until(lambda: bool(n.ended), "an OOM kill")
    time.sleep(0.5)
    n.step()


def test_processes_get_their_class_score_also_after_a_policy_change(node: Callable[[NodeSLO], Node]) -> None:
    n = node(slo(OOMStrategy(enabled=False)))
    n.b.start_pod(holder("ls", 1, "LS", requests=Resources(memory=64 * MI)), NODE)
    n.b.start_pod(holder("be", 1, "BE", requests=Resources(batch_cpu=100, batch_memory=32 * MI)), NODE)
    n.b.start_pod(holder("lsr", 1, "LSR", requests=Resources(cpu=1000, memory=32 * MI),
                         limits=Resources(cpu=1000, memory=32 * MI)), NODE)

    def scores() -> dict[str, set[int | None]]:
        return {u: {read_oom_score_adj(p) for p in n.b.tree.procs(pod.state.cgroup)} for u, pod in n.b.pods.items()}

    n.until(lambda: all(len(n.b.tree.procs(p.state.cgroup)) == 2 for p in n.b.pods.values()),
            "wrapper and command in every pod")
    n.step()
    assert scores() == {"ls": {0}, "be": {0}, "lsr": {0}}
    n.slo = slo(OOMStrategy())
    n.b.set_slo(n.slo)
    n.step()
    # LS: -(1000 x 64 MiB // 320 MiB) = -200 (the kubelet's Burstable value 800, moved below zero);
    # without CAP_SYS_RESOURCE (this machine's container) negative values are refused: 0, still below BE
    if can_lower_scores():
        assert scores() == {"ls": {-200}, "be": {1000}, "lsr": {-997}}
    else:
        assert scores() == {"ls": {0}, "be": {1000}, "lsr": {0}}
        assert any("refused (no CAP_SYS_RESOURCE)" in p for p in n.b.oom.problems + sorted(n.b._problems_seen))
    # a pod started while the strategy is on gets its value from the wrapper, before its command runs: no
    # agent loop in between
    n.b.start_pod(holder("be2", 1, "BE", requests=Resources(batch_cpu=100, batch_memory=32 * MI)), NODE)
    cg = n.b.pods["be2"].state.cgroup
    deadline = time.monotonic() + 10
    while len(n.b.tree.procs(cg)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert scores()["be2"] == {1000}


def test_the_kernel_kills_be_before_ls(node: Callable[[NodeSLO], Node]) -> None:
    n = node(slo(OOMStrategy()))
    run_hog(n)
    assert n.reasons() == {"be": "OOMKilled"}
    assert n.b.is_running("ls") and n.b.is_running("hog")


def test_without_oom_priority_the_kernel_kills_the_largest_ls_pod(node: Callable[[NodeSLO], Node]) -> None:
    n = node(slo(OOMStrategy(enabled=False)))
    run_hog(n)
    assert n.reasons() == {"ls": "OOMKilled"}
    assert n.b.is_running("be") and n.b.is_running("hog")
