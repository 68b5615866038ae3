"""Online latency beside batch CPU hogs on this machine, with and without the node agent's CPU QoS.

The node agent runs as its own process (``python -m colo_node_agent``, ``backend=host``, ``node_scope=machine``,
1 s loop) under a unique cgroup parent ``colo-bench-<hex>``, against a nats-server and redis-server this script
starts (:mod:`colo.embedded`). Pods are bound the way the scheduler binds them (store binding + ``pod.bound``):

* **LS pod** ``ls-web`` (LS, request 1 CPU): ``bench/interference_load.py`` as a single-threaded HTTP server
  whose handler runs a fixed amount of pure-Python CPU work (``--work-ms``, 1.5 ms: the iteration count is
  calibrated in this process before anything else runs, then fixed).
* **BE hogs** (``--hogs``, default 2 × CPUs): ``python -c 'while True: pass'`` as BE pods requesting
  ``--hog-batch-cpu`` milli-cores of batch-cpu each (250: four make the BE group's cpu.shares 1024, the cgroup
  default, REFERENCE.md §5 "BE cgroup settings").
* **Load generator** in this process: open loop at ``--rate`` requests/s (200: the LS pod then uses ~0.4 of a
  core), a new connection per request, latency from the connect to the end of the response. It runs as
  SCHED_FIFO (``--client-sched fifo``) so that nothing on the machine delays the client itself: it stands in for
  a client on another machine, as in Koordinator's Nginx/ffmpeg test.

Each **window** sends ``--warmup-s`` of uncounted requests, then counts ``--seconds`` (≥ 20 s). The runs below
(one NodeSLO each, published to the agent over NATS; the same hogs throughout; the script waits until the BE
group's files show the policy, then ``--settle-s``) are repeated for ``--rounds`` rounds, interleaved, so that
slow drifts of the machine spread over every run. ``ls_alone`` stops the hogs (SIGSTOP to the processes the
kernel lists in their pod groups, SIGCONT after): the LS pod alone, without restarting the hogs.

======================  ========================================================================================
``ls_alone``            the LS pod alone (baseline)
``noqos``               + hogs, agent QoS off: no cpu.idle, no suppress, BE shares Σ batch-cpu (= 1024 here)
``qos``                 + hogs, the agent's default NodeSLO (cpu.idle on, suppress ``cpuset`` 65 %)
``idle_only``           cpu.idle = 1 on the BE group, suppress off
``shares_only``         BE group cpu.shares = 2 (``be_cpu_shares: min``, the kubelet's MinShares), no idle/suppress
``suppress_cpuset``     suppress ``cpuset`` only (65 %; never fewer than 2 CPUs, so a no-op on a 2-CPU machine)
``suppress_cfsquota``   suppress ``cfsQuota`` only (65 %)
``all_cfsquota``        idle + BE MinShares + suppress ``cfsQuota`` (65 %)
======================  ========================================================================================

Other work on a shared machine competes with the whole pod tree at the root of the hierarchy, so a window
starts once a 3 s probe shows ``other_cpu_cores`` ≤ ``--max-other`` (0.2; waiting up to ``--quiet-wait-s``) and
counts only when it stayed so during the window; otherwise it is retried (up to ``--attempts``; a run without
any quiet window pools all of its windows and says so). ``other_cpu_cores`` = machine busy (Δ
user+nice+system+irq+softirq of /proc/stat) − the agent's parent group − this script, the agent, nats-server and
redis-server. The very first wait is for a 1-minute load average below ``--max-load`` (0.5).

Per window: ``p50_ms``, ``p90_ms``, ``p99_ms``, ``max_ms``; ``ls_cpu_cores_used`` and ``be_cpu_cores_used`` =
Δ``cpuacct.usage`` of the LS pod group and of the BE QoS group over the counted window / its length;
``other_cpu_cores``; the LS server's CPU time, run-queue wait (``/proc/<pid>/schedstat``) and involuntary
context switches per request (``ls_cpu_ms_per_request``, ``ls_runq_wait_ms_per_request``,
``ls_preempted_per_request``: how long it waited for a CPU, and how often it lost one); ``load1_before``/``load1_after`` (the hogs themselves add ~4); the BE group's files; ``be_cpu_allowed_milli`` the suppress budget the agent
reported (NodeMetric every 5 s) during the window. Per run
(the counted requests of its quiet windows pooled): the same, ``p99_increase_pct`` = (p99 / p99 of ``ls_alone`` − 1) × 100
and ``be_share_of_idle`` = BE cores / (CPUs − LS cores). Summary: ``p99_increase_noqos_pct``,
``p99_increase_qos_pct``, ``be_cpu_cores_used`` and ``be_share_of_idle`` of ``qos``. Targets (issue 4): p99
increase with QoS ≤ 10 %, BE ≥ 50 % of the CPU the LS pod leaves idle.

At the end (also on errors) the agent gets SIGTERM, every pod process is killed and every group under the
parent removed. Prints one JSON line per window, a table, then the summary JSON line.

Run: ``.venv/bin/python bench/interference.py`` (root, writable cgroup v1 or v2; ~15 min on a quiet machine)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgspec
import numpy as np
import psutil
from interference_load import calibrate, generate, percentiles_ms, request, set_sched

from colo import subjects
from colo.bus import Bus
from colo.embedded import EmbeddedServers, free_port
from colo.messages import (
    CPUSuppressStrategy,
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

# ---------------------------------------------------------------------------------------------- machine


def machine_facts() -> dict[str, Any]:
    """CPUs, cgroup version, kernel, Python, CPU model, whether the kernel has cpu.idle, the scheduler's base
    slice where debugfs shows it."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "")
    slice_ns = Path("/sys/kernel/debug/sched/base_slice_ns")
    return {"cpus": psutil.cpu_count(), "cgroup": detect_version(HostFS(ROOT)), "kernel": platform.release(),
            "python": platform.python_version(), "cpu_model": model,
            "hypervisor": "hypervisor" in Path("/proc/cpuinfo").read_text(),
            "cpu_idle_file": (ROOT / "cpu" / "cpu.idle").exists() or (ROOT / "cpu.idle").exists(),
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
        for line in self.path("cpu", cgroup, "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
        raise OSError(f"no usage_usec in {self.path('cpu', cgroup, 'cpu.stat')}")

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


# ---------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunConfig:
    """One run: its name, whether the hogs run, the NodeSLO (None: leave the policy) and the BE group state to
    wait for (file → value; ``>0`` any positive value)."""

    name: str
    hogs: bool
    slo: NodeSLO | None
    expect: dict[str, str]


def slo_for(idle: bool, suppress: str, min_shares: bool = False, threshold: int = 65) -> NodeSLO:
    """A NodeSLO with SCHED_IDLE ``idle``, suppress ``off``/``cpuset``/``cfsQuota`` at ``threshold`` %, and the BE
    group's shares at the kubelet's MinShares (``be_cpu_shares="min"``) when ``min_shares``."""
    policy = CPUSuppressStrategy(enabled=suppress != "off", threshold_percent=threshold,
                                 policy="cfsQuota" if suppress == "cfsQuota" else "cpuset")
    return NodeSLO(node=NODE, be_cpu_idle=idle, cpu_suppress=policy, be_cpu_shares="min" if min_shares else "requests")


def run_configs(hog_shares: int, threshold: int) -> list[RunConfig]:
    """Every run of a round, in order (module doc); ``threshold`` the suppress threshold of the ablation runs."""
    quota, unlimited = {"cpu.cfs_quota_us": ">0"}, {"cpu.cfs_quota_us": "-1"}
    plain, idle = {"cpu.idle": "0", "cpu.shares": str(hog_shares)}, {"cpu.idle": "1"}
    return [
        RunConfig("ls_alone", False, None, {}),
        RunConfig("noqos", True, slo_for(False, "off"), plain | unlimited),
        RunConfig("qos", True, NodeSLO(node=NODE), idle | unlimited),
        RunConfig("idle_only", True, slo_for(True, "off"), idle | unlimited),
        RunConfig("shares_only", True, slo_for(False, "off", min_shares=True),
                  {"cpu.idle": "0", "cpu.shares": "2"} | unlimited),
        RunConfig("suppress_cpuset", True, slo_for(False, "cpuset", threshold=threshold), plain | unlimited),
        RunConfig("suppress_cfsquota", True, slo_for(False, "cfsQuota", threshold=threshold), plain | quota),
        RunConfig("all_cfsquota", True, slo_for(True, "cfsQuota", True, threshold), idle | quota),
    ]


def matches(state: dict[str, str], expect: dict[str, str]) -> bool:
    """Whether the BE group's ``state`` shows every value of ``expect``."""
    for key, want in expect.items():
        got = state.get(key, "")
        if want == ">0" and not (got.isdigit() and int(got) > 0):
            return False
        if want != ">0" and got != want:
            return False
    return True


def ls_spec(port: int, work_n: int) -> PodSpec:
    return PodSpec(uid=LS_UID, name=LS_UID, qos_class="LS", priority=9500,
                   command=[sys.executable, str(SERVER), str(port), str(work_n)],
                   requests=Resources(cpu=1000, memory=256 * MI))


def hog_spec(i: int, batch_cpu: int) -> PodSpec:
    uid = f"hog-{i}"
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500, command=[sys.executable, "-c", "while True: pass"],
                   requests=Resources(batch_cpu=batch_cpu, batch_memory=64 * MI),
                   limits=Resources(batch_memory=256 * MI))


@dataclass
class Bench:
    """What one benchmark invocation holds while it runs."""

    args: argparse.Namespace
    cg: Cgroups
    store: Store
    bus: Bus
    agent: subprocess.Popen[bytes]
    server_pids: list[int]
    port: int
    hogs: list[str] = field(default_factory=list)
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

    def signal_hogs(self, sig: signal.Signals) -> None:
        """Send ``sig`` to every process of the hog pods (members confirmed by /proc)."""
        for uid in self.hogs:
            for pid in self.cg.members(pod_dir("BE", uid)):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def own_pids(self) -> list[int]:
        return [os.getpid(), self.agent.pid, *self.server_pids]

    async def other_cores(self, seconds: float) -> float:
        """Cores used over ``seconds`` by work that is not the benchmark's (module doc)."""
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

    async def apply(self, cfg: RunConfig) -> None:
        """Publish the run's NodeSLO and wait until the BE group shows it."""
        if cfg.slo is not None:
            await self.bus.publish(subjects.NODE_SLO, msgspec.structs.replace(cfg.slo, at=time.time()), node=NODE)

        async def applied() -> bool:
            return matches(self.cg.be_state(), cfg.expect)

        await wait_for(applied, 20, f"the BE group to show {cfg.expect} (now {self.cg.be_state()})")

    async def window(self, cfg: RunConfig, rnd: int) -> tuple[dict[str, Any], list[float]]:
        """One window of ``cfg``: (its figures, the counted latencies in seconds)."""
        if not cfg.hogs:
            self.signal_hogs(signal.SIGSTOP)
        try:
            await self.apply(cfg)
            await asyncio.sleep(self.args.settle_s)
            await self.wait_quiet()
            return await self._measure(cfg, rnd)
        finally:
            if not cfg.hogs:
                self.signal_hogs(signal.SIGCONT)

    async def _measure(self, cfg: RunConfig, rnd: int) -> tuple[dict[str, Any], list[float]]:
        be_state, load_before = self.cg.be_state(), os.getloadavg()[0]
        marks: dict[str, tuple[float, ...]] = {}
        ls_cg, own = pod_dir("LS", LS_UID), self.own_pids()

        ls_pids = self.cg.members(ls_cg)

        def at_window(which: str) -> None:
            marks[which] = (time.perf_counter(), self.cg.cpu_ns(ls_cg), self.cg.cpu_ns(BESTEFFORT),
                            self.cg.cpu_ns(""), busy_ns(), procs_cpu_ns(own), *sched_counters(ls_pids))

        t_start = time.time()
        sched = set_sched(self.args.client_sched)
        cpus = os.sched_getaffinity(0)
        if self.args.client_cpu >= 0:
            os.sched_setaffinity(0, {self.args.client_cpu})
        try:
            res = await generate(self.port, self.args.rate, self.args.warmup_s, self.args.seconds, at_window)
        finally:
            set_sched("other")
            os.sched_setaffinity(0, cpus)
        d = [b - a for a, b in zip(marks["start"], marks["end"])]
        dt = d[0]
        ls, be, other = d[1] / 1e9 / dt, d[2] / 1e9 / dt, (d[4] - d[3] - d[5]) / 1e9 / dt
        out: dict[str, Any] = {
            "run": cfg.name, "round": rnd, **percentiles_ms(res.latency_s), "requests": len(res.latency_s),
            "errors": res.errors, "window_s": round(dt, 2), "ls_cpu_cores_used": round(ls, 3),
            "be_cpu_cores_used": round(be, 3), "bench_cpu_cores": round(d[5] / 1e9 / dt, 3),
            "other_cpu_cores": round(max(other, 0.0), 3),
            "client_lateness_p99_ms": round(float(np.percentile(res.lateness_s, 99)) * 1000, 3),
            "ls_cpu_ms_per_request": round(d[6] / 1e6 / max(len(res.latency_s), 1), 3),
            "ls_runq_wait_ms_per_request": round(d[7] / 1e6 / max(len(res.latency_s), 1), 3),
            "ls_preempted_per_request": round(d[8] / max(len(res.latency_s), 1), 3),
            "client_sched": sched, "load1_before": round(load_before, 2),
            "load1_after": round(os.getloadavg()[0], 2), "be_group": be_state if cfg.hogs else {},
        }
        budgets = [v for at, v in self.budgets if at >= t_start and v >= 0]
        if cfg.hogs and budgets:
            out["be_cpu_allowed_milli"] = round(float(np.mean(budgets)))
        ended = [u for u in self.hogs if self.phase(u) != "Running"]
        if ended:
            raise RuntimeError(f"{cfg.name}: hogs no longer running: {ended}")
        return out, res.latency_s


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load0 = wait_for_quiet(args.max_load, args.load_wait_s)
    work_n, work_ms = calibrate(args.work_ms)
    if abs(work_ms / args.work_ms - 1) > 0.25:
        raise SystemExit(f"calibration unstable: {work_n} iterations took {work_ms:.3f} ms, not {args.work_ms}; "
                         "is the machine busy?")
    print(f"load average {load0:.2f}; handler work: {work_n} iterations = {work_ms:.3f} ms alone", flush=True)
    cores = psutil.cpu_count() or 1
    n_hogs = args.hogs if args.hogs > 0 else 2 * cores
    hog_shares = max(2, n_hogs * args.hog_batch_cpu * 1024 // 1000)
    configs = [c for c in run_configs(hog_shares, args.threshold) if not args.runs or c.name in args.runs.split(",")]
    parent = f"colo-bench-{uuid.uuid4().hex[:8]}"
    state_dir = tempfile.mkdtemp(prefix="colo-bench-interference-")
    config = HostConfig(node_name=NODE, cgroup_parent=parent, state_dir=state_dir, loop_s=1.0)
    problems = host_problems(config)
    if problems:
        shutil.rmtree(state_dir, ignore_errors=True)
        raise SystemExit(f"this machine cannot run the host backend: {'; '.join(problems)}")
    prefix, port = f"bench-{uuid.uuid4().hex[:8]}", free_port()
    windows: list[dict[str, Any]] = []
    latencies: list[list[float]] = []
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
                                                       batch_memory=n_hogs * 256 * MI))
            await b.bind(ls_spec(port, work_n))
            await b.wait_running([LS_UID])
            await b.wait_http()
            hogs = [hog_spec(i, args.hog_batch_cpu) for i in range(n_hogs)]
            for h in hogs:
                await b.bind(h)
            b.hogs = [h.uid for h in hogs]
            await b.wait_running(b.hogs)
            for rnd in range(args.rounds):
                for cfg in configs:
                    for attempt in range(1, args.attempts + 1):
                        out, lat = await b.window(cfg, rnd)
                        out["attempt"] = attempt
                        out["quiet"] = out["other_cpu_cores"] <= args.max_other
                        print(json.dumps(out), flush=True)
                        windows.append(out)
                        latencies.append(lat)
                        if out["quiet"]:
                            break
                        print(f"{cfg.name}: other work used {out['other_cpu_cores']} cores > {args.max_other}: "
                              "window not counted", flush=True)
        finally:
            set_sched("other")
            b.signal_hogs(signal.SIGCONT)
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
    summary = {"bench": "interference", "machine": machine_facts(), "rate_rps": args.rate,
               "work_ms": round(work_ms, 3), "work_iterations": work_n, "warmup_s": args.warmup_s,
               "seconds": args.seconds, "rounds": args.rounds, "hogs": n_hogs,
               "hog_batch_cpu_milli": args.hog_batch_cpu, "be_group_shares_requests": hog_shares,
               "suppress_threshold_percent": args.threshold, "client_sched": args.client_sched,
               "max_other_cpu_cores": args.max_other, "load1_start": round(load0, 2)}
    return summarize(summary, windows, latencies, cores)


def summarize(summary: dict[str, Any], windows: list[dict[str, Any]], latencies: list[list[float]],
              cores: int) -> dict[str, Any]:
    """Per run: percentiles of its quiet windows' requests pooled (of all its windows when none was quiet), CPU,
    increase against ``ls_alone``; the summary figures. ``latencies[i]`` belongs to ``windows[i]``."""
    runs: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(w["run"] for w in windows):
        mine = [i for i, w in enumerate(windows) if w["run"] == name]
        quiet = [i for i in mine if windows[i]["quiet"]] or mine
        ws = [windows[i] for i in quiet]
        lat = [x for i in quiet for x in latencies[i]]
        ls = float(np.mean([w["ls_cpu_cores_used"] for w in ws]))
        be = float(np.mean([w["be_cpu_cores_used"] for w in ws]))
        sched = {k: round(float(np.mean([w[k] for w in ws])), 3) for k in
                 ("ls_cpu_ms_per_request", "ls_runq_wait_ms_per_request", "ls_preempted_per_request")}
        runs[name] = {**percentiles_ms(lat), "requests": len(lat), "errors": sum(w["errors"] for w in ws),
                      "ls_cpu_cores_used": round(ls, 3), "be_cpu_cores_used": round(be, 3),
                      "be_share_of_idle": round(be / (cores - ls), 3), **sched,
                      "other_cpu_cores": round(float(np.mean([w["other_cpu_cores"] for w in ws])), 3),
                      "quiet_windows": sum(bool(windows[i]["quiet"]) for i in mine), "windows": len(mine),
                      "p99_ms_by_window": [w["p99_ms"] for w in ws]}
        budgets = [w["be_cpu_allowed_milli"] for w in ws if "be_cpu_allowed_milli" in w]
        if budgets:
            runs[name]["be_cpu_allowed_milli"] = round(float(np.mean(budgets)))
    base = runs.get("ls_alone", {}).get("p99_ms")
    for r in runs.values():
        r["p99_increase_pct"] = round((r["p99_ms"] / base - 1) * 100, 1) if base else None
    qos, noqos = runs.get("qos", {}), runs.get("noqos", {})
    inc_qos, share = qos.get("p99_increase_pct"), qos.get("be_share_of_idle")
    return {**summary, "p50_ms_alone": runs.get("ls_alone", {}).get("p50_ms"), "p99_ms_alone": base,
            "p99_increase_noqos_pct": noqos.get("p99_increase_pct"), "p99_increase_qos_pct": inc_qos,
            "be_cpu_cores_used": qos.get("be_cpu_cores_used"), "be_share_of_idle": share,
            "ls_cpu_cores_used": qos.get("ls_cpu_cores_used"),
            "target_p99_increase_pct": 10.0, "target_be_share_of_idle": 0.5,
            "met": inc_qos is not None and share is not None and inc_qos <= 10.0 and share >= 0.5,
            "runs": runs, "windows": windows}


def print_table(s: dict[str, Any]) -> None:
    print(f"{'run':<18} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'Δp99 %':>7} {'LS cores':>8} {'BE cores':>8} "
          f"{'BE/idle':>7} {'other':>6} {'quiet':>5}")
    for name, r in s["runs"].items():
        print(f"{name:<18} {r['p50_ms']:>7.2f} {r['p90_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['p99_increase_pct']:>7.1f} "
              f"{r['ls_cpu_cores_used']:>8.3f} {r['be_cpu_cores_used']:>8.3f} {r['be_share_of_idle']:>7.3f} "
              f"{r['other_cpu_cores']:>6.3f} {r['quiet_windows']:>2}/{r['windows']}")
    print(f"p99 +{s['p99_increase_noqos_pct']} % without QoS, +{s['p99_increase_qos_pct']} % with the agent's QoS "
          f"(target <= 10); BE used {s['be_cpu_cores_used']} cores = {s['be_share_of_idle']} of the CPU the LS pod "
          f"leaves (target >= 0.5); {s['machine']}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rate", type=float, default=200.0, help="requests per second (open loop)")
    ap.add_argument("--work-ms", type=float, default=1.5, help="handler CPU work per request, ms (calibrated)")
    ap.add_argument("--seconds", type=float, default=20.0, help="counted part of a window, s")
    ap.add_argument("--warmup-s", type=float, default=3.0, help="uncounted start of a window, s")
    ap.add_argument("--settle-s", type=float, default=2.0, help="after the BE group shows a run's policy, s")
    ap.add_argument("--rounds", type=int, default=4, help="rounds over every run, interleaved")
    ap.add_argument("--hogs", type=int, default=0, help="BE CPU hogs (0 = 2 x CPUs)")
    ap.add_argument("--hog-batch-cpu", type=int, default=250, help="batch-cpu request of each hog, milli-cores")
    ap.add_argument("--threshold", type=int, default=65, help="suppress threshold of the ablation runs, %%")
    ap.add_argument("--client-sched", choices=("fifo", "other"), default="fifo")
    ap.add_argument("--client-cpu", type=int, default=-1, help="pin the load generator to this CPU (-1: none)")
    ap.add_argument("--runs", default="", help="comma-separated run names (default: all)")
    ap.add_argument("--max-load", type=float, default=0.5, help="wait for a 1-minute load average below this")
    ap.add_argument("--load-wait-s", type=float, default=900.0)
    ap.add_argument("--max-other", type=float, default=0.2, help="accept a window when other work used <= this")
    ap.add_argument("--attempts", type=int, default=4, help="tries per window")
    ap.add_argument("--quiet-wait-s", type=float, default=600.0, help="most to wait for quiet before a window, s")
    ap.add_argument("--retry-wait-s", type=float, default=10.0, help="between quiet probes, s")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)  # clean up (agent, pods, groups) on SIGTERM as on Ctrl-C
    res = asyncio.run(run(args))
    print_table(res)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
