"""What the interference benchmarks share: machine facts, cgroup and /proc counters, the quiet-machine checks,
and :class:`Bench`, a real node agent process (host backend) with an LS HTTP pod and BE pods bound to it.

Used by ``bench/interference.py`` (BE CPU hogs, eight NodeSLO ablations) and ``bench/interference_calibration.py``
(three BE kinds × intensities × isolation settings → the calibration file). :func:`agent_session` starts
nats-server and redis-server (:mod:`colo.embedded`), the agent as ``python -m colo_node_agent`` (``backend=host``,
``node_scope=machine``, 1 s loop, NodeMetrics every 5 s) under a unique cgroup parent ``colo-bench-<hex>``, binds
the LS pod the way the scheduler binds (store binding + ``pod.bound``) and, at the end (also on errors), sends
the agent SIGTERM, kills every pod process and removes every group under the parent.

Per window (:meth:`Bench.measure`): LS latency percentiles (ms) of an open-loop load (``interference_load.py``),
LS/BE/other CPU cores, the LS server's schedstat counters (run-queue wait per request and per CPU second), the
node's PSI ``cpu.some`` over the window (percent of wall time) and the LS pod group's CFS throttled ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import msgspec
import numpy as np
import psutil
from interference_load import calibrate, generate, percentiles_ms, request, set_sched

from colo import subjects
from colo.bus import Bus
from colo.embedded import EmbeddedServers, free_port
from colo.messages import (
    NodeMetric,
    NodeResource,
    NodeSLO,
    PodBound,
    PodRecord,
    PodSpec,
    PodStatus,
    Resources,
)
from colo.store import Store
from colo_node_agent.backends.host import HostBackend, HostConfig, host_problems
from colo_node_agent.cgroups.fs import HostFS, detect_version
from colo_node_agent.cgroups.layout import BESTEFFORT, pod_dir

MI = 1 << 20
NODE = "bench-node"
ROOT = Path("/sys/fs/cgroup")
LS_UID = "ls-web"
SERVER = Path(__file__).resolve().parent / "interference_load.py"
PSI_CPU = Path("/proc/pressure/cpu")
CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")

# ---------------------------------------------------------------------------------------------- machine


def llc_bytes() -> int:
    """Size in bytes of the highest-level data/unified cache of CPU 0 (``/sys/devices/system/cpu/cpu0/cache``,
    ``size`` like ``32768K``); 0 when the kernel does not list caches."""
    best_level, best = 0, 0
    for index in sorted(CACHE_DIR.glob("index*")):
        try:
            level, kind = int((index / "level").read_text()), (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or level < best_level:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        best_level, best = level, int(size.rstrip("KMG")) * unit
    return best


def machine_facts() -> dict[str, Any]:
    """CPUs, cgroup version, kernel, Python, CPU model, LLC bytes, whether the kernel has cpu.idle and PSI, the
    scheduler's base slice where debugfs shows it."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "")
    slice_ns = Path("/sys/kernel/debug/sched/base_slice_ns")
    return {"cpus": psutil.cpu_count(), "cgroup": detect_version(HostFS(ROOT)), "kernel": platform.release(),
            "python": platform.python_version(), "cpu_model": model, "llc_bytes": llc_bytes(),
            "hypervisor": "hypervisor" in Path("/proc/cpuinfo").read_text(),
            "cpu_idle_file": (ROOT / "cpu" / "cpu.idle").exists() or (ROOT / "cpu.idle").exists(),
            "psi": PSI_CPU.exists(),
            "base_slice_ns": int(slice_ns.read_text()) if slice_ns.exists() else None}


class Cgroups:
    """Reads of the agent's groups under ``parent`` (v1 or v2 paths)."""

    def __init__(self, parent: str) -> None:
        self.parent = parent
        self.v1 = detect_version(HostFS(ROOT)) == "v1"

    def path(self, controller: str, cgroup: str, name: str) -> Path:
        base = (ROOT / controller if self.v1 else ROOT) / self.parent
        return base / cgroup / name if cgroup else base / name

    def cpu_ns(self, cgroup: str) -> int:
        """CPU time of ``cgroup`` ("" = the parent) in ns: cpuacct.usage (v1) or cpu.stat usage_usec (v2)."""
        if self.v1:
            return int(self.path("cpuacct", cgroup, "cpuacct.usage").read_text())
        usage = self.cpu_stat(cgroup).get("usage_usec")
        if usage is None:
            raise OSError(f"no usage_usec in {self.path('cpu', cgroup, 'cpu.stat')}")
        return usage * 1000

    def cpu_stat(self, cgroup: str) -> dict[str, int]:
        """``cpu.stat`` of ``cgroup`` as key → integer (``nr_periods``, ``nr_throttled``, ...); {} if unreadable."""
        out = {}
        for line in self.read("cpu", cgroup, "cpu.stat").splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
        return out

    def read(self, controller: str, cgroup: str, name: str) -> str:
        try:
            return self.path(controller, cgroup, name).read_text().strip()
        except OSError:
            return ""

    def members(self, cgroup: str) -> list[int]:
        """Pids listed in ``cgroup`` that /proc confirms are in this parent (never a stranger's process)."""
        out = []
        for pid in self.read("cpu", cgroup, "cgroup.procs").split():
            try:
                if f"/{self.parent}/{cgroup}" in Path(f"/proc/{pid}/cgroup").read_text():
                    out.append(int(pid))
            except OSError:
                pass
        return out

    def set_parent_shares(self, shares: int) -> None:
        """Write the parent group's CPU weight: ``cpu.shares`` (v1) or the equivalent ``cpu.weight`` (v2,
        1 + (shares − 2) × 9999 / 262142, the kubelet's conversion). Raises OSError when the kernel refuses."""
        if self.v1:
            self.path("cpu", "", "cpu.shares").write_text(str(shares))
        else:
            self.path("cpu", "", "cpu.weight").write_text(str(1 + (max(shares, 2) - 2) * 9999 // 262142))

    def be_state(self) -> dict[str, str]:
        """The BE QoS group's CPU settings now, as the kernel shows them."""
        files = ("cpu.idle", "cpu.shares", "cpu.cfs_quota_us") if self.v1 else ("cpu.idle", "cpu.weight", "cpu.max")
        state = {f: self.read("cpu", BESTEFFORT, f) for f in files}
        state["cpuset.cpus"] = self.read("cpuset", BESTEFFORT, "cpuset.cpus")
        return state


def busy_ns() -> int:
    """Busy CPU time of the whole machine in ns: user + nice + system + irq + softirq (/proc/stat)."""
    t = psutil.cpu_times()
    return int((t.user + t.nice + t.system + t.irq + t.softirq) * 1e9)


def procs_cpu_ns(pids: list[int]) -> int:
    """User + system CPU time of ``pids`` in ns (processes that ended count 0)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return int(total * 1e9)


def sched_counters(pids: list[int]) -> tuple[int, int, int]:
    """Summed over ``pids``: time on the CPU and time runnable but waiting on a run queue (ns,
    /proc/<pid>/schedstat), and involuntary context switches (/proc/<pid>/status: preempted while runnable)."""
    run = wait = preempted = 0
    for pid in pids:
        try:
            on_cpu, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
            status = Path(f"/proc/{pid}/status").read_text()
        except (OSError, ValueError):
            continue
        run, wait = run + int(on_cpu), wait + int(waited)
        preempted += next((int(line.split()[1]) for line in status.splitlines()
                           if line.startswith("nonvoluntary_ctxt_switches")), 0)
    return run, wait, preempted


def psi_cpu_some() -> tuple[int, float]:
    """The node's PSI ``cpu.some`` (``/proc/pressure/cpu``): (``total`` µs, ``avg10`` percent); (−1, −1.0) where
    the kernel has no PSI."""
    try:
        line = PSI_CPU.read_text().splitlines()[0]
    except (OSError, IndexError):
        return -1, -1.0
    fields = dict(part.split("=", 1) for part in line.split()[1:])
    return int(fields["total"]), float(fields["avg10"])


def _die_with_parent() -> None:
    """In the agent's child process before exec: SIGTERM when this script dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def wait_for_quiet(max_load: float, wait_s: float) -> float:
    """Wait up to ``wait_s`` for the 1-minute load average to fall below ``max_load``; returns it."""
    deadline = time.monotonic() + wait_s
    load = os.getloadavg()[0]
    while load >= max_load and time.monotonic() < deadline:
        print(f"load average {load:.2f} >= {max_load}: waiting", flush=True)
        time.sleep(15)
        load = os.getloadavg()[0]
    return load


async def wait_for(cond: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


def matches(state: dict[str, str], expect: dict[str, str]) -> bool:
    """Whether the BE group's ``state`` shows every value of ``expect`` (``>0``: any positive integer)."""
    for key, want in expect.items():
        got = state.get(key, "")
        if want == ">0" and not (got.isdigit() and int(got) > 0):
            return False
        if want != ">0" and got != want:
            return False
    return True


def calibrate_work(args: argparse.Namespace) -> tuple[int, float]:
    """Iterations of the LS handler's work taking ``--work-ms``, timed as SCHED_FIFO (``--client-sched fifo``)
    so that other work on a busy machine cannot stretch the timings; returns (iterations, ms measured).
    Raises SystemExit when the measured time is off ``--work-ms`` by more than ``--work-tolerance``."""
    got = set_sched(args.client_sched)
    try:
        work_n, work_ms = calibrate(args.work_ms)
    finally:
        set_sched("other")
    if abs(work_ms / args.work_ms - 1) > args.work_tolerance:
        raise SystemExit(f"calibration unstable: {work_n} iterations took {work_ms:.3f} ms ({got}), not "
                         f"{args.work_ms}; is the machine busy? (--work-tolerance)")
    return work_n, work_ms


def ls_spec(port: int, work_n: int) -> PodSpec:
    """The LS pod: ``interference_load.py`` serving on ``port`` with ``work_n`` iterations per request."""
    return PodSpec(uid=LS_UID, name=LS_UID, qos_class="LS", priority=9500,
                   command=[sys.executable, str(SERVER), str(port), str(work_n)],
                   requests=Resources(cpu=1000, memory=256 * MI))


def add_quiet_options(ap: argparse.ArgumentParser) -> None:
    """The quiet-machine thresholds and the load generator's options, shared by both benchmarks."""
    ap.add_argument("--rate", type=float, default=200.0, help="requests per second (open loop)")
    ap.add_argument("--work-ms", type=float, default=1.5, help="handler CPU work per request, ms (calibrated)")
    ap.add_argument("--work-tolerance", type=float, default=0.25,
                    help="refuse to run when the calibrated work differs from --work-ms by more than this share")
    ap.add_argument("--warmup-s", type=float, default=3.0, help="uncounted start of a window, s")
    ap.add_argument("--settle-s", type=float, default=2.0, help="after the BE group shows a run's policy, s")
    ap.add_argument("--client-sched", choices=("fifo", "other"), default="fifo")
    ap.add_argument("--client-cpu", type=int, default=-1, help="pin the load generator to this CPU (-1: none)")
    ap.add_argument("--max-load", type=float, default=0.5, help="wait for a 1-minute load average below this")
    ap.add_argument("--load-wait-s", type=float, default=900.0, help="most to wait for --max-load, s")
    ap.add_argument("--max-other", type=float, default=0.2, help="accept a window when other work used <= this")
    ap.add_argument("--attempts", type=int, default=4, help="tries per window")
    ap.add_argument("--quiet-wait-s", type=float, default=600.0, help="most to wait for quiet before a window, s")
    ap.add_argument("--retry-wait-s", type=float, default=10.0, help="between quiet probes, s")
    ap.add_argument("--parent-shares", type=int, default=0,
                    help="cpu.shares of the agent's parent group (0: leave the kernel's 1024); on a shared machine "
                         "a higher value gives the pod tree the larger part of the CPUs, as on a dedicated node")


# ---------------------------------------------------------------------------------------------- the bench


@dataclass
class Bench:
    """What one benchmark invocation holds while it runs: the agent process, its store and bus, the BE pods."""

    args: argparse.Namespace
    cg: Cgroups
    store: Store
    bus: Bus
    agent: subprocess.Popen[bytes]
    server_pids: list[int]
    port: int
    hogs: list[str] = field(default_factory=list)
    """uids of the BE pods bound so far."""
    statuses: dict[str, list[PodStatus]] = field(default_factory=dict)
    budgets: list[tuple[float, int]] = field(default_factory=list)
    """(time.time(), NodeMetric.be_cpu_allowed) as the agent reports them (−1 = suppress off)."""

    async def bind(self, spec: PodSpec) -> None:
        now = time.time()
        await self.store.put_pod(PodRecord(spec=spec))
        res = await self.store.bind(spec.uid, NODE, spec.requests, now)
        if not res.ok:
            raise RuntimeError(f"{spec.uid}: {res.reason}")
        await self.bus.publish(subjects.POD_BOUND, PodBound(spec=spec, node=NODE, at=now),
                               msg_id=f"bound-{spec.uid}", node=NODE)

    async def bind_be(self, specs: list[PodSpec]) -> None:
        """Bind BE pods and wait until they run."""
        for spec in specs:
            await self.bind(spec)
        self.hogs += [s.uid for s in specs]
        await self.wait_running([s.uid for s in specs])

    def phase(self, uid: str) -> str:
        seen = self.statuses.get(uid, [])
        return seen[-1].phase if seen else ""

    async def wait_running(self, uids: list[str]) -> None:
        async def running() -> bool:
            if self.agent.poll() is not None:
                raise RuntimeError(f"the agent exited with {self.agent.returncode}")
            ended = [(u, self.statuses[u][-1].reason) for u in uids if self.phase(u) in ("Failed", "Succeeded")]
            if ended:
                raise RuntimeError(f"pods ended: {ended}")
            return all(self.phase(u) == "Running" for u in uids)

        await wait_for(running, 60, f"{uids} to run")

    async def wait_http(self) -> None:
        async def answers() -> bool:
            try:
                await request(self.port, 2.0)
                return True
            except (OSError, asyncio.TimeoutError, RuntimeError):
                return False

        await wait_for(answers, 30, "the LS pod to answer HTTP")

    def signal_pods(self, uids: list[str], sig: signal.Signals) -> None:
        """Send ``sig`` to every process of the BE pods ``uids`` (members confirmed by /proc)."""
        for uid in uids:
            for pid in self.cg.members(pod_dir("BE", uid)):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def run_only(self, active: set[str]) -> None:
        """Let the BE pods in ``active`` run (SIGCONT) and stop every other BE pod (SIGSTOP)."""
        self.signal_pods([u for u in self.hogs if u not in active], signal.SIGSTOP)
        self.signal_pods([u for u in self.hogs if u in active], signal.SIGCONT)

    def own_pids(self) -> list[int]:
        return [os.getpid(), self.agent.pid, *self.server_pids]

    async def other_cores(self, seconds: float) -> float:
        """Cores used over ``seconds`` by work that is not the benchmark's: machine busy (Δ /proc/stat) − the
        agent's parent group − this script, the agent, nats-server and redis-server."""
        own = self.own_pids()
        b0, p0, o0, t0 = busy_ns(), self.cg.cpu_ns(""), procs_cpu_ns(own), time.perf_counter()
        await asyncio.sleep(seconds)
        b1, p1, o1, t1 = busy_ns(), self.cg.cpu_ns(""), procs_cpu_ns(own), time.perf_counter()
        return max((b1 - b0) - (p1 - p0) - (o1 - o0), 0) / 1e9 / (t1 - t0)

    async def wait_quiet(self) -> float:
        """Wait (≤ ``--quiet-wait-s``) until other work uses ≤ ``--max-other`` cores over a 3 s probe; returns
        the last probe."""
        deadline = time.monotonic() + self.args.quiet_wait_s
        while True:
            other = await self.other_cores(3.0)
            if other <= self.args.max_other or time.monotonic() > deadline:
                return other
            print(f"other work uses {other:.2f} cores > {self.args.max_other}: waiting", flush=True)
            await asyncio.sleep(self.args.retry_wait_s)

    async def apply(self, slo: NodeSLO | None, expect: dict[str, str]) -> None:
        """Publish ``slo`` (None: leave the policy) and wait until the BE group shows ``expect``."""
        if slo is not None:
            await self.bus.publish(subjects.NODE_SLO, msgspec.structs.replace(slo, at=time.time()), node=NODE)

        async def applied() -> bool:
            return matches(self.cg.be_state(), expect)

        await wait_for(applied, 20, f"the BE group to show {expect} (now {self.cg.be_state()})")

    async def measure(self, name: str, rnd: int, seconds: float) -> tuple[dict[str, Any], list[float]]:
        """One counted window of ``seconds`` (after ``--warmup-s``): (its figures, the latencies in seconds).

        Raises RuntimeError when a BE pod stopped running."""
        be_state, load_before = self.cg.be_state(), os.getloadavg()[0]
        marks: dict[str, tuple[float, ...]] = {}
        ls_cg, own = pod_dir("LS", LS_UID), self.own_pids()
        ls_pids = self.cg.members(ls_cg)

        def at_window(which: str) -> None:
            st = self.cg.cpu_stat(ls_cg)
            marks[which] = (time.perf_counter(), self.cg.cpu_ns(ls_cg), self.cg.cpu_ns(BESTEFFORT),
                            self.cg.cpu_ns(""), busy_ns(), procs_cpu_ns(own), *sched_counters(ls_pids),
                            psi_cpu_some()[0], st.get("nr_periods", 0), st.get("nr_throttled", 0))

        t_start = time.time()
        sched = set_sched(self.args.client_sched)
        cpus = os.sched_getaffinity(0)
        if self.args.client_cpu >= 0:
            os.sched_setaffinity(0, {self.args.client_cpu})
        try:
            res = await generate(self.port, self.args.rate, self.args.warmup_s, seconds, at_window)
        finally:
            set_sched("other")
            os.sched_setaffinity(0, cpus)
        d = [b - a for a, b in zip(marks["start"], marks["end"])]
        dt, n = d[0], max(len(res.latency_s), 1)
        ls, be, other = d[1] / 1e9 / dt, d[2] / 1e9 / dt, (d[4] - d[3] - d[5]) / 1e9 / dt
        psi_ok = marks["start"][9] >= 0
        out: dict[str, Any] = {
            "run": name, "round": rnd, **percentiles_ms(res.latency_s), "requests": len(res.latency_s),
            "errors": res.errors, "window_s": round(dt, 2), "ls_cpu_cores_used": round(ls, 3),
            "be_cpu_cores_used": round(be, 3), "bench_cpu_cores": round(d[5] / 1e9 / dt, 3),
            "other_cpu_cores": round(max(other, 0.0), 3),
            "client_lateness_p99_ms": round(float(np.percentile(res.lateness_s, 99)) * 1000, 3),
            "ls_cpu_ms_per_request": round(d[6] / 1e6 / n, 3),
            "ls_runq_wait_ms_per_request": round(d[7] / 1e6 / n, 3),
            "ls_preempted_per_request": round(d[8] / n, 3),
            "runq_wait_ratio": round(d[7] / d[6], 4) if d[6] > 0 else -1.0,
            "cpu_pressure_some": round(d[9] / 1e6 / dt * 100, 2) if psi_ok else -1.0,
            "cpu_pressure_some_avg10_end": psi_cpu_some()[1],
            "throttled_ratio": round(d[11] / d[10], 4) if d[10] > 0 else 0.0,
            "client_sched": sched, "load1_before": round(load_before, 2),
            "load1_after": round(os.getloadavg()[0], 2), "be_group": be_state,
        }
        budgets = [v for at, v in self.budgets if at >= t_start and v >= 0]
        if budgets:
            out["be_cpu_allowed_milli"] = round(float(np.mean(budgets)))
        ended = [u for u in self.hogs if self.phase(u) != "Running"]
        if ended:
            raise RuntimeError(f"{name}: BE pods no longer running: {ended}")
        return out, res.latency_s


@asynccontextmanager
async def agent_session(args: argparse.Namespace, work_n: int, batch_memory_bytes: int) -> AsyncIterator[Bench]:
    """A running node agent with the LS pod answering HTTP (module doc); the node offers every CPU as batch-cpu
    and ``batch_memory_bytes`` of batch-memory. Cleans everything up on exit. Raises SystemExit when this
    machine cannot run the host backend (not root, no writable cgroups), RuntimeError/TimeoutError when the
    agent or a pod does not come up."""
    cores = psutil.cpu_count() or 1
    parent = f"colo-bench-{uuid.uuid4().hex[:8]}"
    state_dir = tempfile.mkdtemp(prefix="colo-bench-interference-")
    config = HostConfig(node_name=NODE, cgroup_parent=parent, state_dir=state_dir, loop_s=1.0)
    problems = host_problems(config)
    if problems:
        shutil.rmtree(state_dir, ignore_errors=True)
        raise SystemExit(f"this machine cannot run the host backend: {'; '.join(problems)}")
    prefix, port = f"bench-{uuid.uuid4().hex[:8]}", free_port()
    with EmbeddedServers() as servers:
        env = dict(os.environ, COLO_NATS_URL=servers.nats_url, COLO_REDIS_URL=servers.redis_url,
                   COLO_STORE_PREFIX=prefix, COLO_HTTP_PORT=str(free_port()), COLO_LOG_LEVEL="warning",
                   COLO_NODE_AGENT_BACKEND="host", COLO_NODE_AGENT_CGROUP_PARENT=parent,
                   COLO_NODE_AGENT_STATE_DIR=state_dir, COLO_NODE_AGENT_NODE_NAME=NODE,
                   COLO_NODE_AGENT_LOOP_S="1", COLO_NODE_AGENT_REPORT_INTERVAL_S="5",
                   COLO_NODE_AGENT_TERMINATION_GRACE_S="1")
        agent = subprocess.Popen([sys.executable, "-m", "colo_node_agent"], env=env, preexec_fn=_die_with_parent)
        store = await Store.connect(servers.redis_url, prefix)
        bus = await Bus.connect(servers.nats_url, "bench-driver")
        servers_pids = [p.proc.pid for p in (servers.nats, servers.redis) if p is not None]
        b = Bench(args, Cgroups(parent), store, bus, agent, servers_pids, port)

        async def on_status(msg: PodStatus) -> None:
            b.statuses.setdefault(msg.uid, []).append(msg)

        async def on_metric(msg: NodeMetric) -> None:
            b.budgets.append((time.time(), msg.be_cpu_allowed))

        try:
            await bus.ensure_streams()
            await bus.subscribe(subjects.POD_STATUS, on_status, durable="bench-status")
            await bus.subscribe(subjects.NODE_METRIC, on_metric, durable="bench-metric")

            async def registered() -> bool:
                if agent.poll() is not None:
                    raise RuntimeError(f"the agent exited with {agent.returncode}")
                return await store.get_node(NODE) is not None

            await wait_for(registered, 30, "the agent to register its node")
            await store.put_node_resource(NodeResource(node=NODE, batch_cpu=cores * 1000,
                                                       batch_memory=batch_memory_bytes))
            await b.bind(ls_spec(port, work_n))
            await b.wait_running([LS_UID])
            await b.wait_http()
            if args.parent_shares > 0:
                b.cg.set_parent_shares(args.parent_shares)
            yield b
        finally:
            set_sched("other")
            b.signal_pods(b.hogs, signal.SIGCONT)
            if agent.poll() is None:
                agent.send_signal(signal.SIGTERM)
                try:
                    agent.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    agent.kill()
                    agent.wait()
            await bus.close()
            await store.delete_all()
            await store.close()
            # adopt what the agent left running, then kill every pod and remove every group
            HostBackend(config, lambda n: NodeSLO(node=n), start=time.time()).purge()
            shutil.rmtree(state_dir, ignore_errors=True)


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM handler: clean up (agent, pods, groups) as on Ctrl-C."""
    raise KeyboardInterrupt
