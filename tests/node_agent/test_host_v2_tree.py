"""The host backend on a fake cgroup v2 tree in a temp dir: paths, converted values, controllers enabled,
statistics, PSI, exits and OOM read from v2 files. Pods are real processes (their wrapper writes its pid into
the fake ``cgroup.procs``, which confines nothing); no real cgroup is touched, so this runs anywhere."""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from colo.messages import CPUSuppressStrategy, GPUInfo, NodeSLO, PodSpec, Resources
from colo_node_agent.backends.host import HostBackend, HostConfig
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.cgroups.resources import shares_to_weight

MI = 1 << 20
NODE = "v2-node"
PARENT = "colo"
PSI = "some avg10={:.2f} avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def seed(path: Path) -> None:
    """The files the kernel puts in a new v2 group (statistics zeroed)."""
    for rel, text in default_files("v2", "x", 2, stats=True).items():
        (path / rel[2:]).write_text(text)
    for name, text in (("cgroup.procs", ""), ("cgroup.controllers", "cpuset cpu io memory pids\n"),
                       ("cgroup.subtree_control", ""), ("memory.events", "oom 0\noom_kill 0\n"),
                       ("memory.peak", "0\n")):
        (path / name).write_text(text)


class FakeV2Tree(CgroupTree):
    """A v2 tree whose directories get the kernel's files on mkdir and lose them on rmdir."""

    def _mkdir(self, path: Path) -> bool:
        created = super()._mkdir(path)
        if created:
            seed(path)
        return created

    def remove(self, cgroup: str) -> bool:
        shutil.rmtree(self.path("", cgroup), ignore_errors=True)
        return True


@pytest.fixture
def tree(tmp_path: Path) -> FakeV2Tree:
    root = tmp_path / "cgroup"
    root.mkdir()
    seed(root)
    t = FakeV2Tree(root, PARENT, "v2")
    t.ensure("")
    (root / PARENT / "cpu.max").write_text("150000 100000\n")
    (root / PARENT / "memory.max").write_text(f"{1024 * MI}\n")
    return t


@pytest.fixture
def backend(tree: FakeV2Tree, tmp_path: Path) -> Iterator[HostBackend]:
    slo = NodeSLO(node=NODE, cpu_suppress=CPUSuppressStrategy(policy="cfsQuota"))
    config = HostConfig(node_name=NODE, cgroup_root=str(tree.root), cgroup_parent=PARENT,
                        state_dir=str(tmp_path / "state"), loop_s=1.0, node_scope="parent")
    b = HostBackend(config, lambda n: slo, start=1000.0, tree=tree, clock=lambda: 1000.0)
    yield b
    for pod in list(b.pods.values()) + list(b.terminating.values()):
        if pod.popen is not None and pod.popen.poll() is None:
            pod.popen.send_signal(signal.SIGKILL)
            pod.popen.wait(timeout=5)


def read(tree: FakeV2Tree, cgroup: str, name: str) -> str:
    return (tree.path("", cgroup) / name).read_text().strip()


def write(tree: FakeV2Tree, cgroup: str, name: str, text: str) -> None:
    (tree.path("", cgroup) / name).write_text(text)


def wait_pid_in(tree: FakeV2Tree, cgroup: str) -> int:
    deadline = time.monotonic() + 5
    while not tree.procs(cgroup):
        assert time.monotonic() < deadline, "the wrapper never joined its group"
        time.sleep(0.01)
    return tree.procs(cgroup)[0]


def be_pod(uid: str, command: list[str]) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="BE", command=command,
                   requests=Resources(batch_cpu=1000, batch_memory=64 * MI),
                   limits=Resources(batch_cpu=2000, batch_memory=256 * MI))


def test_groups_and_values_follow_the_v2_layout(backend: HostBackend, tree: FakeV2Tree) -> None:
    assert backend.version == "v2"
    assert (backend.spec.capacity.cpu, backend.spec.capacity.memory) == (1500, 1024 * MI)
    for cg in ("", "kubepods", "kubepods/burstable"):
        assert tree.path("", cg).is_dir()
    assert read(tree, "..", "cgroup.subtree_control") == "+cpu +cpuset +memory +io"
    assert read(tree, "kubepods", "cgroup.subtree_control") == "+cpu +cpuset +memory +io"
    assert read(tree, "kubepods/besteffort", "cpu.idle") == "1"
    assert backend.start_pod(be_pod("be-1", ["sleep", "300"]), NODE)
    cg = "kubepods/besteffort/podbe-1"
    assert wait_pid_in(tree, cg) == backend.pid_of("be-1")
    assert read(tree, cg, "cpu.weight") == str(shares_to_weight(1024))
    assert read(tree, cg, "cpu.max") == "200000 100000"
    assert read(tree, cg, "memory.max") == str(256 * MI)
    assert read(tree, "kubepods/besteffort", "memory.max") == str(256 * MI)
    assert read(tree, cg, "cpuset.cpus") == "0-1", "v2 pod cpusets are left to inherit the BE group's"
    assert not backend.cgroup_failures


def test_usage_psi_and_suppress_from_v2_files(backend: HostBackend, tree: FakeV2Tree) -> None:
    backend.start_pod(be_pod("be-1", ["sleep", "300"]), NODE)
    cg = "kubepods/besteffort/podbe-1"
    wait_pid_in(tree, cg)
    write(tree, "", "cpu.stat", "usage_usec 1000000\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
    write(tree, cg, "cpu.stat", "usage_usec 400000\nnr_periods 10\nnr_throttled 1\nthrottled_usec 5\n")
    backend.advance(1001.0)
    write(tree, "", "cpu.stat", "usage_usec 1800000\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
    write(tree, cg, "cpu.stat", "usage_usec 900000\nnr_periods 20\nnr_throttled 6\nthrottled_usec 9\n")
    write(tree, "", "memory.stat", f"anon {300 * MI}\nactive_anon {200 * MI}\ninactive_anon {100 * MI}\n"
                                   "unevictable 0\n")
    write(tree, cg, "memory.stat", f"active_anon {50 * MI}\ninactive_anon {10 * MI}\nunevictable {4 * MI}\n")
    write(tree, "", "cpu.pressure", PSI.format(12.5))
    write(tree, cg, "memory.pressure", PSI.format(3.25))
    res = backend.advance(1002.0)
    assert res.stats["cpu_used_milli"] == pytest.approx(800)
    assert res.stats["be_cpu_used_milli"] == pytest.approx(500)
    assert res.stats["mem_used_bytes"] == 300 * MI
    assert backend.pressure["cpu.some"] == 12.5
    # BEAllowed = 1500 × 65 % − 0 (LS) − (800 − 500) (system) = 675 m → cpu.max quota 67500 µs
    assert backend.be_allowed == 675
    assert read(tree, "kubepods/besteffort", "cpu.max") == "67500 100000"
    assert [e.kind for e in res.events] == ["suppress"]
    (metric,) = backend.node_metrics(1002.0)
    (pm,) = metric.pods
    # memory averaged over the window (0 then 64 MiB); throttling over the report interval: 6 of 20 periods
    assert (pm.uid, pm.memory, pm.cpu_throttled_ratio) == ("be-1", 32 * MI, 0.3)
    assert metric.be_cpu_allowed == 675
    assert (metric.pressure["cpu.some"], pm.pressure["memory.some"], pm.pressure["cpu.some"]) == (12.5, 3.25, 0.0)


def test_oom_kill_counted_in_memory_events_means_oomkilled(backend: HostBackend, tree: FakeV2Tree) -> None:
    backend.start_pod(be_pod("hog", ["sleep", "300"]), NODE)
    cg = "kubepods/besteffort/podhog"
    wrapper = psutil.Process(wait_pid_in(tree, cg))
    deadline = time.monotonic() + 5
    while not wrapper.children():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    write(tree, cg, "memory.events", "oom 1\noom_kill 1\n")
    wrapper.children()[0].send_signal(signal.SIGKILL)  # what the kernel's OOM killer does
    deadline = time.monotonic() + 5
    while backend.is_running("hog"):
        assert time.monotonic() < deadline
        res = backend.advance(1001.0)
        time.sleep(0.02)
    assert [(e.uid, e.phase, e.reason) for e in res.ended] == [("hog", "Failed", "OOMKilled")]
    assert res.ended[0].message.startswith("exit code 137: 1 OOM kill(s)")
    assert [e.kind for e in res.events if e.kind == "oom"] == ["oom"]


def test_eviction_and_adoption_on_v2(backend: HostBackend, tree: FakeV2Tree, tmp_path: Path) -> None:
    backend.start_pod(be_pod("a", ["sleep", "300"]), NODE)
    backend.start_pod(be_pod("b", ["sleep", "300"]), NODE)
    pid_a = wait_pid_in(tree, "kubepods/besteffort/poda")
    wait_pid_in(tree, "kubepods/besteffort/podb")
    backend.close()
    again = HostBackend(backend.config, lambda n: NodeSLO(node=n), start=1001.0, tree=tree, clock=lambda: 1001.0)
    assert sorted(again.adopted) == ["a", "b"] and again.pid_of("a") == pid_a
    assert again.evict_pod("a", "Evicted", "test", 1001.0, grace_s=0) is not None
    deadline = time.monotonic() + 5
    while again.has_pod("a"):
        assert time.monotonic() < deadline, "evicted pod never cleaned up"
        again.advance(1002.0)
        time.sleep(0.02)
    assert not tree.path("", "kubepods/besteffort/poda").exists()
    assert read(tree, "kubepods/besteffort", "memory.max") == str(256 * MI), "BE limit follows the pods left"
    again.evict_pod("b", "Evicted", "test", 1002.0, grace_s=0)
    while again.has_pod("b"):
        assert time.monotonic() < deadline
        again.advance(1003.0)
        time.sleep(0.02)


def test_interference_signals_from_v2_files(backend: HostBackend, tree: FakeV2Tree) -> None:
    ls = PodSpec(uid="ls-1", name="ls-1", qos_class="LS", command=["sleep", "300"],
                 requests=Resources(cpu=500, memory=64 * MI))
    backend.start_pod(ls, NODE)
    backend.start_pod(be_pod("be-1", ["sleep", "300"]), NODE)
    cg = "kubepods/burstable/podls-1"
    pid = wait_pid_in(tree, cg)
    write(tree, cg, "cgroup.threads", f"{pid}\n")  # the v2 thread list the run-queue wait is read from
    backend.advance(1001.0)
    assert backend.interference is not None and list(backend.interference.pods["ls-1"].tasks) == [pid]
    write(tree, cg, "cpu.pressure", PSI.format(7.5))
    write(tree, "kubepods/besteffort/podbe-1", "cpu.pressure", PSI.format(40.0))
    backend.advance(1002.0)
    pods = {p.uid: p for p in backend.node_metrics(1002.0)[0].pods}
    sig = pods["ls-1"].interference
    assert sig is not None and sig.cpu_pressure_some == 7.5 and sig.cpi == -1.0
    assert sig.runq_wait_ratio == -1.0 or sig.runq_wait_ratio >= 0  # a sleeping wrapper may not run at all
    assert pods["be-1"].interference is None


def test_the_host_registers_the_gpus_it_finds(tree: FakeV2Tree, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = tmp_path / "proc-nvidia-gpus"
    for bus, minor in (("0000:3b:00.0", 1), ("0000:af:00.0", 0)):  # as the driver writes the file
        (gpus / bus).mkdir(parents=True)
        (gpus / bus / "information").write_text(
            f"Model: \t\t Tesla V100-PCIE-16GB\nIRQ:   \t\t 80\nBus Type: \t PCIe\nBus Location: \t {bus}\n"
            f"Device Minor: \t {minor}\nBlacklisted:\t No\n")
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no nvidia-smi: memory unknown
    base = HostConfig(node_name=NODE, cgroup_root=str(tree.root), cgroup_parent=PARENT,
                      state_dir=str(tmp_path / "state"), node_scope="parent", gpu_proc_root=str(gpus))
    b = HostBackend(base, lambda n: NodeSLO(node=n), start=1000.0, tree=tree, clock=lambda: 1000.0)
    assert b.spec.gpus == [GPUInfo(index=0, model="Tesla V100-PCIE-16GB"),
                           GPUInfo(index=1, model="Tesla V100-PCIE-16GB")]
    assert b.spec.topology is not None and b.spec.topology.cpus, "the CPU topology is registered as before"
    given = '[{"index": 0, "model": "V100M16", "memory_bytes": 17179869184}]'
    for setting, want in (("off", []), (given, [GPUInfo(index=0, model="V100M16", memory_bytes=16 << 30)])):
        again = HostBackend(replace(base, gpus=setting), lambda n: NodeSLO(node=n), start=1000.0, tree=tree,
                            clock=lambda: 1000.0)
        assert again.spec.gpus == want, setting
