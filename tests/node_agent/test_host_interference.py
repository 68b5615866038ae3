"""Interference signals on the host backend with real processes in real cgroups: an LS spinner alone on one
CPU, then with a second spinner pinned to the same CPU; its run-queue wait per CPU second rises from near 0 to
about 1 (two equal tasks share the CPU). BE pods get no signals; CPI is −1 where the kernel has no perf
events (this machine). Each test works under its own ``colo-test-<hex>`` parent (fixture ``cgroup_parent``)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from colo.messages import InterferenceSignals, NodeSLO, PodMetric, PodSpec, Resources
from colo_node_agent.backends.host import HostBackend, HostConfig
from colo_node_agent.backends.host_perf import probe

pytestmark = pytest.mark.cgroup

NODE = "host-test"
ROOT = Path("/sys/fs/cgroup")
CPU = max(os.sched_getaffinity(0))
SPIN = f"import os\nos.sched_setaffinity(0, {{{CPU}}})\nwhile True: pass\n"
"""A busy process pinned to one CPU of this process's affinity."""


def spinner(uid: str, qos: str = "LS") -> PodSpec:
    if qos == "BE":
        return PodSpec(uid=uid, name=uid, qos_class="BE", command=["sleep", "300"],
                       requests=Resources(batch_cpu=100, batch_memory=32 << 20))
    return PodSpec(uid=uid, name=uid, qos_class=qos, command=[sys.executable, "-c", SPIN],  # type: ignore[arg-type]
                   requests=Resources(cpu=1000, memory=64 << 20))


@pytest.fixture
def backend(cgroup_parent: str, tmp_path: Path) -> Iterator[HostBackend]:
    config = HostConfig(node_name=NODE, cgroup_parent=cgroup_parent, state_dir=str(tmp_path / "state"),
                        loop_s=0.2)
    b = HostBackend(config, lambda n: NodeSLO(node=n), start=time.time())
    yield b
    b.purge()


def run_for(b: HostBackend, seconds: float) -> None:
    """Drive the loop for ``seconds`` of wall time (a measurement window, not an assertion on time)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(b.config.loop_s)
        b.advance(time.time())


def report(b: HostBackend) -> dict[str, PodMetric]:
    return {p.uid: p for p in b.node_metrics(time.time())[0].pods}


def signals(b: HostBackend, uid: str) -> InterferenceSignals:
    sig = report(b)[uid].interference
    assert sig is not None
    return sig


def test_runq_wait_ratio_rises_when_a_second_spinner_shares_the_cpu(backend: HostBackend) -> None:
    b = backend
    assert b.start_pod(spinner("ls-a"), NODE) and b.start_pod(spinner("be-x", "BE"), NODE)
    run_for(b, 1.0)
    report(b)  # the window so far includes the start: discarded
    run_for(b, 3.0)
    alone = signals(b, "ls-a")
    assert b.start_pod(spinner("ls-b"), NODE)
    run_for(b, 1.0)
    report(b)  # the second spinner's start: discarded
    run_for(b, 3.0)
    pods = report(b)
    shared = pods["ls-a"].interference
    assert shared is not None and pods["ls-b"].interference is not None
    print(f"alone {alone}\nshared {shared}")
    assert 0 <= alone.runq_wait_ratio < shared.runq_wait_ratio
    # two equal spinners on one CPU: each waits about as long as it runs (1.0), whatever else the machine runs
    assert shared.runq_wait_ratio >= alone.runq_wait_ratio + 0.5
    assert pods["ls-b"].interference.runq_wait_ratio >= 0.5
    assert pods["be-x"].interference is None  # BE pods are not measured
    perf, _ = probe()
    if perf is None:
        assert shared.cpi == alone.cpi == -1.0
    unified = ROOT / "unified" / b.tree.parent / b.pods["ls-a"].state.cgroup / "cpu.pressure"
    if b.version == "v1" and unified.exists():  # hybrid host: per-group PSI from the unified mount
        assert shared.cpu_pressure_some >= 0 and alone.cpu_pressure_some >= 0
    assert shared.latency_inflation_percent == -1.0  # modelled by the sim only


def test_signals_off_reads_nothing(cgroup_parent: str, tmp_path: Path) -> None:
    config = HostConfig(node_name=NODE, cgroup_parent=cgroup_parent, state_dir=str(tmp_path / "state"),
                        loop_s=0.2, interference_signals=False)
    b = HostBackend(config, lambda n: NodeSLO(node=n), start=time.time())
    try:
        assert b.start_pod(spinner("ls-a"), NODE)
        run_for(b, 0.6)
        assert b.interference is None and report(b)["ls-a"].interference is None
    finally:
        b.purge()


def test_ended_pods_are_forgotten(backend: HostBackend) -> None:
    b = backend
    assert b.start_pod(spinner("ls-a"), NODE)
    run_for(b, 0.6)
    assert b.interference is not None and set(b.interference.pods) == {"ls-a"}
    b.evict_pod("ls-a", "Evicted", "test", time.time(), grace_s=0.0)
    run_for(b, 0.4)
    assert b.interference.pods == {}
