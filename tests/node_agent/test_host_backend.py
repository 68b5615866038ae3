"""The host backend on this machine's real cgroups: processes in pod groups, limits, exits, OOM, eviction,
adoption after a restart. Each test works under its own ``colo-test-<hex>`` parent (fixture ``cgroup_parent``),
removed with every process in it at teardown."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import psutil
import pytest

from colo.messages import BEBudgetState, BEBudgetStrategy, InterferenceSignals, NodeSLO, PodSpec, Resources
from colo_node_agent.backends.host import HostBackend, HostConfig
from colo_node_agent.backends.sim import AdvanceResult, PodEnd

pytestmark = pytest.mark.cgroup

ROOT = Path("/sys/fs/cgroup")
MI = 1 << 20
NODE = "host-test"


def pod(uid: str, command: list[str], qos: str = "LS", **kw: object) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class=qos, command=command, **kw)  # type: ignore[arg-type]


def sleeper(uid: str, qos: str = "LS", **kw: object) -> PodSpec:
    return pod(uid, ["sleep", "300"], qos, **kw)


class Host:
    """A backend under test plus helpers to drive its loop."""

    def __init__(self, parent: str, state_dir: Path, slo: NodeSLO | None = None, **config: object) -> None:
        self.parent = parent
        self.config = HostConfig(node_name=NODE, cgroup_parent=parent, state_dir=str(state_dir), loop_s=0.1,
                                 termination_grace_s=1.0, **config)  # type: ignore[arg-type]
        self.slo = slo or NodeSLO(node=NODE)
        self.b = HostBackend(self.config, lambda n: self.slo, start=time.time())
        self.ended: list[PodEnd] = []
        self.results: list[AdvanceResult] = []

    def step(self) -> AdvanceResult:
        res = self.b.advance(time.time())
        self.ended += res.ended
        self.results.append(res)
        return res

    def until(self, cond: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(self.config.loop_s)
            self.step()

    def end_of(self, uid: str) -> PodEnd | None:
        return next((e for e in self.ended if e.uid == uid), None)


@pytest.fixture
def host(cgroup_parent: str, tmp_path: Path) -> Iterator[Callable[..., Host]]:
    made: list[Host] = []

    def make(**kw: object) -> Host:
        h = Host(cgroup_parent, tmp_path / "state", **kw)  # type: ignore[arg-type]
        made.append(h)
        return h

    yield make
    if made:
        made[-1].b.purge()


def cg_file(parent: str, controller: str, cgroup: str, name: str) -> str:
    return (ROOT / controller / parent / cgroup / name).read_text().strip()


def cgroup_lines(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        for c in ctls.split(","):
            out[c] = path
    return out


def test_pod_runs_inside_its_groups_with_the_kubelet_limits(host: Callable[..., Host]) -> None:
    h = host()
    spec = pod("ls-1", ["sleep", "300"], requests=Resources(cpu=500, memory=64 * MI),
               limits=Resources(cpu=1500, memory=256 * MI))
    assert h.b.start_pod(spec, NODE)
    assert not h.b.start_pod(spec, NODE), "a second start of the same pod must be refused"
    cg = "kubepods/burstable/podls-1"
    h.until(lambda: len(h.b.tree.procs(cg)) == 2, what="wrapper and command in the pod group")
    pid = h.b.pid_of("ls-1")
    for c in ("cpu", "cpuacct", "cpuset", "memory"):
        assert cgroup_lines(pid)[c] == f"/{h.parent}/{cg}"
        child = [p for p in h.b.tree.procs(cg) if p != pid][0]
        assert cgroup_lines(child)[c] == f"/{h.parent}/{cg}"
    assert cg_file(h.parent, "cpu", cg, "cpu.shares") == "512"
    assert cg_file(h.parent, "cpu", cg, "cpu.cfs_quota_us") == "150000"
    assert cg_file(h.parent, "memory", cg, "memory.limit_in_bytes") == str(256 * MI)
    assert cg_file(h.parent, "cpuset", cg, "cpuset.cpus") == cg_file(h.parent, "cpuset", "", "cpuset.cpus")
    assert cg_file(h.parent, "cpu", "kubepods/besteffort", "cpu.idle") == "1"
    assert os.getpgid(pid) == pid, "the pod leads its own process group"
    if (ROOT / "unified" / "cgroup.procs").exists():  # hybrid host: per-pod PSI from the cgroup2 mount
        assert cgroup_lines(pid)[""] == f"/{h.parent}/{cg}"
        assert set(h.b.tree.pressure(cg)) >= {"cpu.some", "memory.some", "io.some"}
    assert not h.b.cgroup_failures


def test_exit_codes_become_pod_phases(host: Callable[..., Host]) -> None:
    h = host()
    h.b.start_pod(pod("ok", ["true"]), NODE)
    h.b.start_pod(pod("bad", ["sh", "-c", "echo boom >&2; exit 3"]), NODE)
    h.b.start_pod(pod("missing", ["/nonexistent/binary"]), NODE)
    h.b.start_pod(pod("job", ["true"], qos="BE"), NODE)
    h.until(lambda: len(h.ended) == 4, what="four pods to end")
    got = {e.uid: (e.phase, e.reason) for e in h.ended}
    assert got == {"ok": ("Succeeded", "Completed"), "bad": ("Failed", "Error"),
                   "missing": ("Failed", "Error"), "job": ("Succeeded", "Completed")}
    assert h.end_of("bad").message == "exit code 3: boom"  # type: ignore[union-attr]
    assert h.end_of("missing").message.startswith("exit code 127")  # type: ignore[union-attr]
    assert sum(r.stats["batch_completed"] for r in h.results) == 1
    h.until(lambda: not h.b.terminating, what="groups of ended pods removed")
    assert not (ROOT / "cpu" / h.parent / "kubepods/burstable/podok").exists()
    assert not (Path(h.config.state_dir) / "pods" / "ok").exists()


def test_oom_kill_is_reported_as_oomkilled(host: Callable[..., Host]) -> None:
    h = host()
    hog = pod("hog", [sys.executable, "-c", "b = bytearray(200 << 20); import time; time.sleep(60)"], qos="BE",
              requests=Resources(batch_cpu=100, batch_memory=32 * MI),
              limits=Resources(batch_cpu=1000, batch_memory=32 * MI))
    h.b.start_pod(hog, NODE)
    h.until(lambda: h.end_of("hog") is not None, what="the hog to be OOM-killed")
    end = h.end_of("hog")
    assert end is not None and (end.phase, end.reason) == ("Failed", "OOMKilled")
    assert "exit code 137" in end.message
    assert [(ev.kind, ev.pods) for r in h.results for ev in r.events if ev.kind == "oom"] == [("oom", ["hog"])]
    assert sum(r.stats["oom_kills"] for r in h.results) == 1


def test_eviction_kills_the_process_group_after_the_grace_period(host: Callable[..., Host]) -> None:
    h = host()
    # every process ignores SIGTERM (inherited), so only the SIGKILL after the grace period ends them
    h.b.start_pod(pod("stubborn", ["sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & wait"]), NODE)
    cg = "kubepods/burstable/podstubborn"
    h.until(lambda: len(h.b.tree.procs(cg)) == 4, what="sh wrapper, sh and two sleeps")
    pids = h.b.tree.procs(cg)
    command = [p for p in pids if p != h.b.pid_of("stubborn")]
    t0 = time.time()
    end = h.b.evict_pod("stubborn", "Evicted", "descheduled", t0, grace_s=0.6)
    assert end is not None and (end.phase, end.reason, end.message) == ("Failed", "Evicted", "descheduled")
    assert not h.b.is_running("stubborn") and h.b.has_pod("stubborn")
    time.sleep(0.3)
    h.step()
    # the wrapper ends on SIGTERM; the command's processes ignore it and are still in the group
    assert sorted(h.b.tree.procs(cg)) == sorted(command)
    h.until(lambda: not h.b.terminating, what="SIGKILL after the grace period and cleanup")
    assert time.time() - t0 >= 0.6
    for p in pids:
        assert not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE
    for c in ("cpu", "cpuacct", "cpuset", "memory"):
        assert not (ROOT / c / h.parent / cg).exists()
    assert not h.b.has_pod("stubborn")


def test_restart_adopts_running_pods_and_reports_those_that_ended(host: Callable[..., Host]) -> None:
    h = host()
    for spec in (sleeper("ls-1"), sleeper("be-1", "BE"), sleeper("lsr-1", "LSR"),
                 pod("short", ["sh", "-c", "sleep 1.5; exit 4"])):
        assert h.b.start_pod(spec, NODE)
    groups = {u: h.b.pods[u].state.cgroup for u in ("ls-1", "be-1", "lsr-1")}
    h.until(lambda: all(len(h.b.tree.procs(cg)) == 2 for cg in groups.values()), what="pods in their groups")
    pids = {u: sorted(h.b.tree.procs(cg)) for u, cg in groups.items()}
    h.b.close()
    # a group nobody recorded (an agent that died between mkdir and the state write) is an orphan
    orphan_cg = "kubepods/burstable/podorphan"
    h.b.tree.ensure(orphan_cg)
    stray = subprocess.Popen(["sh", "-c", 'for f in "$@"; do echo $$ > "$f"; done; exec sleep 300', "sh",
                              *h.b.tree.procs_files(orphan_cg)])
    deadline = time.monotonic() + 5
    while not h.b.tree.procs(orphan_cg) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(2.0)  # "short" exits while no agent runs
    h2 = Host(h.parent, Path(h.config.state_dir))
    assert sorted(h2.b.adopted) == ["be-1", "ls-1", "lsr-1"]
    for uid, before in pids.items():
        assert sorted(h2.b.tree.procs(h2.b.pods[uid].state.cgroup)) == before, f"{uid} was restarted"
    assert stray.wait(timeout=5) == -9, "the orphan group's process is killed"
    assert not (ROOT / "cpu" / h.parent / orphan_cg).exists()
    assert h2.b.has_pod("short") and not h2.b.is_running("short")
    res = h2.step()
    assert [(e.uid, e.phase, e.reason, e.message) for e in res.ended] == [("short", "Failed", "Error", "exit code 4")]
    assert not h2.b.start_pod(sleeper("ls-1"), NODE), "an adopted pod is never started twice"
    end = h2.b.evict_pod("be-1", "Evicted", "test", time.time(), grace_s=0)
    assert end is not None
    h2.until(lambda: "be-1" not in h2.b.terminating, what="adopted pod killed and cleaned")
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in pids["be-1"])
    h2.b.purge()


def test_parent_scope_takes_capacity_and_usage_from_the_parent_group(host: Callable[..., Host],
                                                                       cgroup_parent: str) -> None:
    for c in ("cpu", "memory", "cpuset", "cpuacct"):
        (ROOT / c / cgroup_parent).mkdir()
    for name in ("cpuset.cpus", "cpuset.mems"):
        (ROOT / "cpuset" / cgroup_parent / name).write_text((ROOT / "cpuset" / name).read_text())
    (ROOT / "cpu" / cgroup_parent / "cpu.cfs_quota_us").write_text("150000")
    (ROOT / "memory" / cgroup_parent / "memory.limit_in_bytes").write_text(str(512 * MI))
    h = host(node_scope="parent")
    assert (h.b.spec.capacity.cpu, h.b.spec.capacity.memory) == (1500, 512 * MI)
    h.b.start_pod(pod("mem", [sys.executable, "-c", "b = bytearray(64 << 20); import time; time.sleep(60)"]), NODE)
    h.step()
    h.until(lambda: h.results[-1].stats["mem_used_bytes"] > 64 * MI, what="the parent's memory to show the pod")
    assert h.results[-1].stats["mem_used_bytes"] < 128 * MI, "a parent-scope node counts only its own groups"


def test_be_budget_follows_the_ls_signals_of_real_pods(host: Callable[..., Host]) -> None:
    slo = msgspec.structs.replace(NodeSLO(node=NODE), be_budget=BEBudgetStrategy(enabled=True))
    h = host(slo=slo, interference_signals=False)  # the signals are set by the test, through the HostPod seam
    h.b.start_pod(sleeper("ls-1"), NODE)
    signal = [0.1]

    def step() -> BEBudgetState:
        ls = h.b.pods["ls-1"]
        ls.interference, ls.interference_at = InterferenceSignals(runq_wait_ratio=signal[0]), time.time()
        time.sleep(h.config.loop_s)
        h.step()
        budget = h.b.node_metrics(time.time())[0].be_budget
        assert budget is not None
        return budget

    states = [step() for _ in range(4)]  # no BE work: the baseline is learned, nothing to grow by
    assert states[-1].phase == "hold" and states[-1].baseline == pytest.approx(0.1)
    h.b.start_pod(pod("be-1", ["sh", "-c", "while :; do :; done"], "BE"), NODE)
    grown: list[float] = []

    def grows() -> bool:  # a loop in which the SCHED_IDLE spinner got no CPU on a busy machine holds instead
        st = step()
        if st.phase == "grow":
            grown.append(st.threshold_percent)
        return len(grown) >= 3

    h.until(grows, timeout_s=60.0, what="the budget to grow in three loops with BE work running")
    assert grown[0] < grown[1] < grown[2] <= 95
    signal[0] = 0.3  # over 0.1 x 1.1 and 0.1 + 0.02: cut
    cut = step()
    assert cut.phase == "cut" and cut.threshold_percent < grown[2]
    suppress = [e for r in h.results for e in r.events if e.kind == "suppress" and "be_budget_phase" in e.detail]
    assert suppress, "suppress events carry the budget"
    h.b.pods["ls-1"].interference = None  # the signal stops: the static threshold
    time.sleep(h.config.loop_s)
    h.step()
    budget = h.b.node_metrics(time.time())[0].be_budget
    assert budget is not None and (budget.phase, budget.threshold_percent) == ("fallback", 65)



def test_debug_state_shows_the_budget_with_every_field(host: Callable[..., Host]) -> None:
    """``/debug/state`` of the host backend carries the node's budget as NodeMetric.be_budget has it, phase
    ``fallback`` included (the field's default, left out of the wire encoding), None with the budget off."""
    slo = msgspec.structs.replace(NodeSLO(node=NODE), be_budget=BEBudgetStrategy(enabled=True))
    h = host(slo=slo, interference_signals=False)
    h.step()
    budget = h.b.node_metrics(time.time())[0].be_budget
    shown = msgspec.json.decode(msgspec.json.encode(h.b.debug()))[NODE]["be_budget"]
    assert budget is not None and shown == msgspec.structs.asdict(budget) and shown["phase"] == "fallback"
    h.slo = NodeSLO(node=NODE)
    assert h.b.set_slo(h.slo)
    h.step()
    assert h.b.debug()[NODE]["be_budget"] is None  # type: ignore[index]

def test_be_budget_learns_from_the_interference_readers_each_loop(host: Callable[..., Host]) -> None:
    slo = msgspec.structs.replace(NodeSLO(node=NODE), be_budget=BEBudgetStrategy(enabled=True))
    h = host(slo=slo)
    busy = "import time\nwhile True:\n    t = time.time()\n    while time.time() - t < 0.01: pass\n    time.sleep(0.01)"
    h.b.start_pod(pod("ls-1", [sys.executable, "-c", busy]), NODE)

    def learned() -> bool:
        budget = h.b.node_metrics(time.time())[0].be_budget
        return budget is not None and budget.baseline_samples >= 3

    h.until(learned, timeout_s=30.0, what="a baseline from the LS pod's run-queue wait, loop by loop")
    ls = h.b.pods["ls-1"]
    assert ls.interference is not None and ls.interference.runq_wait_ratio >= 0
    budget = h.b.node_metrics(time.time())[0].be_budget
    # judged on real signals: hold (no BE work to grow by), or cut when other load on the machine moved the wait
    assert budget is not None and budget.phase in ("hold", "cut") and budget.baseline >= 0


def test_be_budget_relearns_when_the_nodeslo_changes_its_signal(host: Callable[..., Host]) -> None:
    """A baseline learned in run-queue seconds judged a CPI of 1.5 a severe violation after the NodeSLO switched the
    budget's signal to ``cpi`` (cut to the floor, never learned again while BE runs)."""
    slo = msgspec.structs.replace(NodeSLO(node=NODE), be_budget=BEBudgetStrategy(enabled=True))
    h = host(slo=slo, interference_signals=False)  # the signals are set by the test, through the HostPod seam
    h.b.start_pod(sleeper("ls-1"), NODE)

    def step() -> BEBudgetState:
        ls = h.b.pods["ls-1"]
        ls.interference, ls.interference_at = InterferenceSignals(runq_wait_ratio=0.1, cpi=1.5), time.time()
        time.sleep(h.config.loop_s)
        h.step()
        budget = h.b.node_metrics(time.time())[0].be_budget
        assert budget is not None
        return budget

    h.until(lambda: step().baseline_samples >= 3, what="a run-queue baseline")
    assert step().baseline == pytest.approx(0.1)
    h.b.set_slo(msgspec.structs.replace(slo, be_budget=BEBudgetStrategy(enabled=True, signal="cpi")))
    state = step()
    assert state.phase != "cut" and state.baseline == pytest.approx(1.5) and state.baseline_samples == 1
