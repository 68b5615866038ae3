"""Online latency beside batch CPU hogs on this machine, with and without the node agent's CPU QoS.

The node agent runs as its own process (``python -m colo_node_agent``, ``backend=host``, ``node_scope=machine``)
under a unique cgroup parent ``colo-bench-<hex>``, against a nats-server and redis-server this script starts
(:mod:`colo.embedded`). Pods are bound the way the scheduler binds them (store binding + ``pod.bound``):

* **LS pod** ``ls-web`` (LS, request 1 CPU): this file with ``--serve``, a single-threaded stdlib HTTP server
  whose handler runs a fixed amount of pure-Python CPU work (``--work-ms``, ~1.5 ms; the iteration count is
  calibrated once in this process before anything else runs, then fixed, so interference shows as time).
* **BE hogs** (``--hogs``, default 2 × CPUs): ``python -c 'while True: pass'`` as BE pods requesting
  ``--hog-batch-cpu`` milli-cores of batch-cpu each (250: the four together make the BE group's cpu.shares
  1024, the cgroup default, REFERENCE.md §5 "BE cgroup settings").
* **Load generator**, in this process: open loop at ``--rate`` requests/s (fixed schedule, a new connection per
  request, HTTP/1.0), latency from the moment a request is sent to the end of its response. It runs as
  SCHED_FIFO (``--client-sched fifo``) so that the hogs cannot delay the client itself: it stands in for a
  client on another machine, as in Koordinator's Nginx/ffmpeg test. Requests sent during the first
  ``--warmup-s`` are not counted; the window is the next ``--seconds``.

Runs (each a NodeSLO published to the agent over NATS, the same hogs throughout; the script waits until the
BE group's files show the policy, then ``--settle-s``):

======================  ========================================================================================
``ls_alone``            the LS pod only (baseline)
``noqos``               + hogs, agent QoS off: no cpu.idle, no suppress, BE shares Σ batch-cpu (= 1024 here)
``qos``                 + hogs, the agent's default NodeSLO (cpu.idle on, suppress ``cpuset`` 65 %)
``idle_only``           cpu.idle = 1 on the BE group, suppress off
``shares_only``         BE group cpu.shares = 2 (the kubelet's besteffort MinShares), no idle, no suppress
``suppress_cpuset``     suppress ``cpuset`` only (65 %; never fewer than 2 CPUs: this machine has 2)
``suppress_cfsquota``   suppress ``cfsQuota`` only (65 %)
``all_cfsquota``        idle + BE MinShares + suppress ``cfsQuota``
``ls_alone_end``        hogs evicted: the baseline again, to see drift
======================  ========================================================================================

Per run: ``p50_ms``, ``p90_ms``, ``p99_ms``, ``max_ms`` of the counted requests; ``ls_cpu_cores_used`` and
``be_cpu_cores_used`` = Δ``cpuacct.usage`` of the LS pod group and of the BE QoS group over the window / window;
``other_cpu_cores`` = machine busy (Δ user+nice+system+irq+softirq of /proc/stat) − the agent's parent group −
this script, the agent, nats-server and redis-server (work on this machine that is not the benchmark's);
``load1_before``/``load1_after`` (the hogs add ~4 to it); the BE group's cpu.idle, cpu.shares, quota and
cpuset. Then ``p99_increase_noqos_pct`` = (p99 noqos / p99 ls_alone − 1) × 100, ``p99_increase_qos_pct`` the
same for ``qos``, ``be_cpu_cores_used`` of ``qos`` and ``be_share_of_idle`` = BE cores / (CPUs − LS cores) of
``qos``. Targets (issue 4): p99 increase with QoS ≤ 10 %, BE ≥ 50 % of the CPU the LS pod leaves idle.

The script waits (``--max-load``, ``--load-wait-s``) for the machine's 1-minute load average to fall below
0.5 before starting, since the point is CPU interference. At the end the agent gets SIGTERM and every pod
process is killed and every group under the parent removed (also on errors).

Prints one JSON line per run, a readable table, then the summary JSON line.

Run: ``.venv/bin/python bench/interference.py`` (root, writable cgroup v1 or v2; ~6 min)
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
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgspec
import numpy as np
import psutil

from colo import subjects
from colo.bus import Bus
from colo.embedded import EmbeddedServers, free_port
from colo.messages import (
    CPUSuppressStrategy,
    EvictionCommand,
    NodeResource,
    NodeSLO,
    PodBound,
    PodRecord,
    PodSpec,
    PodStatus,
    QoSEvent,
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
REQUEST = b"GET / HTTP/1.0\r\nHost: ls-web\r\n\r\n"

# ---------------------------------------------------------------------------------------------- the LS pod


def work(n: int) -> int:
    """The handler's fixed CPU work: ``n`` iterations of integer arithmetic in pure Python."""
    x = 0
    for i in range(n):
        x = (x + i * i) % 1_000_003
    return x


class _Handler(BaseHTTPRequestHandler):
    work_n = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = f"{work(self.work_n)}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class _Server(HTTPServer):
    request_queue_size = 1024  # open-loop bursts must queue, not be refused (the default is 5)
    allow_reuse_address = True


def serve(port: int, work_n: int) -> None:
    """The LS pod: serve GET on 127.0.0.1:``port``, one request at a time, each running ``work(work_n)``."""
    _Handler.work_n = work_n
    _Server(("127.0.0.1", port), _Handler).serve_forever()


def calibrate(target_ms: float, reps: int = 30) -> tuple[int, float]:
    """Iterations of :func:`work` taking ``target_ms`` on an uncontended CPU (the fastest of ``reps`` timings,
    so that other work on the machine does not shrink the count); returns (iterations, ms measured)."""
    n = 10_000
    best = min(_timed(n) for _ in range(5))
    n = max(int(n * target_ms / 1000 / best), 1)
    best = min(_timed(n) for _ in range(reps))
    return n, best * 1000


def _timed(n: int) -> float:
    t = time.perf_counter()
    work(n)
    return time.perf_counter() - t


# ---------------------------------------------------------------------------------------------- load


@dataclass
class LoadResult:
    """Latencies (seconds) of the counted requests, errors, the generator's lateness against its schedule
    (seconds, counted requests) and the window's wall-clock length."""

    latency_s: list[float] = field(default_factory=list)
    errors: int = 0
    lateness_s: list[float] = field(default_factory=list)
    window_s: float = 0.0


async def _one(port: int, timeout_s: float) -> float:
    """One request on a new connection; seconds from connect to the end of the response. Raises on a
    non-200 answer, a refused connection or a timeout."""
    t = time.perf_counter()
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout_s)
    try:
        writer.write(REQUEST)
        data = await asyncio.wait_for(reader.read(), timeout_s)
    finally:
        writer.close()
    dt = time.perf_counter() - t
    if not data.startswith(b"HTTP/1.0 200"):
        raise RuntimeError(f"bad answer {data[:40]!r}")
    return dt


async def generate(port: int, rate: float, warmup_s: float, seconds: float,
                   at_window: Callable[[str], None], timeout_s: float = 10.0) -> LoadResult:
    """Open-loop load at ``rate`` requests/s: request i is sent at t0 + i/rate whatever the earlier ones do.
    ``at_window("start")``/``("end")`` are called when the counted window opens (first counted send) and
    closes (last counted send)."""
    res = LoadResult()
    n_warm, n = int(warmup_s * rate), int((warmup_s + seconds) * rate)
    tasks: list[asyncio.Task[None]] = []

    async def send(counted: bool) -> None:
        try:
            dt = await _one(port, timeout_s)
        except (OSError, asyncio.TimeoutError, RuntimeError):
            if counted:
                res.errors += 1
            return
        if counted:
            res.latency_s.append(dt)

    t0 = time.perf_counter() + 0.05
    w0 = 0.0
    for i in range(n):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if i == n_warm:
            at_window("start")
            w0 = time.perf_counter()
        if i >= n_warm:
            res.lateness_s.append(max(time.perf_counter() - target, 0.0))
        tasks.append(asyncio.create_task(send(i >= n_warm)))
    res.window_s = time.perf_counter() - w0
    at_window("end")
    await asyncio.gather(*tasks)
    return res


def set_client_sched(policy: str) -> str:
    """Make this thread SCHED_FIFO (priority 10) for ``fifo``, SCHED_OTHER otherwise; returns what it got."""
    if policy == "fifo":
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
            return "fifo"
        except (PermissionError, OSError):
            pass
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return "other"


# ---------------------------------------------------------------------------------------------- machine


def machine_facts() -> dict[str, Any]:
    """CPUs, cgroup version, kernel, Python and CPU model of this machine."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": psutil.cpu_count(), "cgroup": detect_version(HostFS(ROOT)), "kernel": platform.release(),
            "python": platform.python_version(), "cpu_model": model,
            "cpu_idle_file": (ROOT / "cpu" / "cpu.idle").exists() or (ROOT / "cpu.idle").exists()}


class Cgroups:
    """Reads of the agent's groups under ``parent`` (v1 or v2 paths)."""

    def __init__(self, parent: str) -> None:
        self.parent = parent
        self.v1 = detect_version(HostFS(ROOT)) == "v1"

    def path(self, controller: str, cgroup: str, name: str) -> Path:
        base = ROOT / controller if self.v1 else ROOT
        return base / self.parent / cgroup / name if cgroup else base / self.parent / name

    def cpu_ns(self, cgroup: str) -> int:
        """CPU time of ``cgroup`` (\"\" = the parent) in ns: cpuacct.usage (v1) or cpu.stat usage_usec (v2)."""
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

    def be_procs(self) -> list[str]:
        """Pids listed anywhere under the BE QoS group (cgroup.procs of it and its pod groups)."""
        base = self.path("cpu", BESTEFFORT, "")
        return [pid for f in base.rglob("cgroup.procs") for pid in f.read_text().split()] if base.is_dir() else []

    def be_state(self) -> dict[str, str]:
        """The BE QoS group's CPU settings now (files as the kernel shows them)."""
        if self.v1:
            return {"cpu.idle": self.read("cpu", BESTEFFORT, "cpu.idle"),
                    "cpu.shares": self.read("cpu", BESTEFFORT, "cpu.shares"),
                    "cpu.cfs_quota_us": self.read("cpu", BESTEFFORT, "cpu.cfs_quota_us"),
                    "cpuset.cpus": self.read("cpuset", BESTEFFORT, "cpuset.cpus")}
        return {"cpu.idle": self.read("cpu", BESTEFFORT, "cpu.idle"),
                "cpu.weight": self.read("cpu", BESTEFFORT, "cpu.weight"),
                "cpu.max": self.read("cpu", BESTEFFORT, "cpu.max"),
                "cpuset.cpus": self.read("cpuset", BESTEFFORT, "cpuset.cpus")}


def busy_ns() -> tuple[int, int]:
    """(busy, steal) CPU time of the whole machine in ns: user+nice+system+irq+softirq, and steal."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + t.irq + t.softirq
    return int(busy * 1e9), int(getattr(t, "steal", 0.0) * 1e9)


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


# ---------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunConfig:
    """One run: its name, whether the hogs run, the NodeSLO (None: the LS pod alone, policy irrelevant) and the
    BE group state to wait for (file → value; ``cpu.cfs_quota_us`` ``>0`` means any positive quota)."""

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


def run_configs(hog_shares: int) -> list[RunConfig]:
    """Every run, in order (module doc)."""
    quota = {"cpu.cfs_quota_us": ">0"}
    unlimited = {"cpu.cfs_quota_us": "-1"}
    plain = {"cpu.idle": "0", "cpu.shares": str(hog_shares)}
    idle = {"cpu.idle": "1"}
    return [
        RunConfig("ls_alone", False, None, {}),
        RunConfig("noqos", True, slo_for(False, "off"), plain | unlimited),
        RunConfig("qos", True, NodeSLO(node=NODE), idle | unlimited),
        RunConfig("idle_only", True, slo_for(True, "off"), idle | unlimited),
        RunConfig("shares_only", True, slo_for(False, "off", min_shares=True),
                  {"cpu.idle": "0", "cpu.shares": "2"} | unlimited),
        RunConfig("suppress_cpuset", True, slo_for(False, "cpuset"), plain | unlimited),
        RunConfig("suppress_cfsquota", True, slo_for(False, "cfsQuota"), plain | quota),
        RunConfig("all_cfsquota", True, slo_for(True, "cfsQuota", min_shares=True), idle | quota),
        RunConfig("ls_alone_end", False, None, {}),
    ]


def matches(state: dict[str, str], expect: dict[str, str]) -> bool:
    for key, want in expect.items():
        got = state.get(key, "")
        if want == ">0":
            if not got.lstrip("-").isdigit() or int(got) <= 0:
                return False
        elif got != want:
            return False
    return True


def percentiles_ms(latency_s: list[float]) -> dict[str, float]:
    if not latency_s:
        return {"p50_ms": float("nan"), "p90_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}
    a = np.asarray(latency_s) * 1000
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"p50_ms": round(float(p50), 3), "p90_ms": round(float(p90), 3), "p99_ms": round(float(p99), 3),
            "max_ms": round(float(a.max()), 3), "mean_ms": round(float(a.mean()), 3)}


async def wait_for(cond: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


@dataclass
class Bench:
    """What one benchmark invocation holds while it runs."""

    args: argparse.Namespace
    parent: str
    cg: Cgroups
    store: Store
    bus: Bus
    agent: subprocess.Popen[bytes]
    own_pids: list[int]
    port: int
    statuses: dict[str, list[PodStatus]] = field(default_factory=dict)
    suppress_events: list[QoSEvent] = field(default_factory=list)

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
            bad = [u for u in uids if self.phase(u) in ("Failed", "Succeeded")]
            if bad:
                raise RuntimeError(f"pods ended: {[(u, self.statuses[u][-1].reason) for u in bad]}")
            return all(self.phase(u) == "Running" for u in uids)

        await wait_for(running, 60, f"{uids} to run")

    async def wait_http(self) -> None:
        async def answers() -> bool:
            try:
                await _one(self.port, 2.0)
                return True
            except (OSError, asyncio.TimeoutError, RuntimeError):
                return False

        await wait_for(answers, 30, "the LS pod to answer HTTP")

    async def apply(self, cfg: RunConfig) -> dict[str, str]:
        """Publish the run's NodeSLO and wait until the BE group shows it; returns the BE group's state."""
        if cfg.slo is not None:
            await self.bus.publish(subjects.NODE_SLO, msgspec_replace_at(cfg.slo), node=NODE)

        async def applied() -> bool:
            return matches(self.cg.be_state(), cfg.expect)

        await wait_for(applied, 20, f"the BE group to show {cfg.expect} (now {self.cg.be_state()})")
        return self.cg.be_state()

    async def measure(self, cfg: RunConfig, hog_uids: list[str]) -> dict[str, Any]:
        """One run's window: load, latency percentiles, CPU of LS/BE/other, machine load."""
        be_before = self.cg.be_state()
        await asyncio.sleep(self.args.settle_s)
        load_before = os.getloadavg()[0]
        marks: dict[str, tuple[float, int, int, int, int, int, int]] = {}
        ls_cg, agent_pid = pod_dir("LS", LS_UID), self.agent.pid

        def at_window(which: str) -> None:
            busy, steal = busy_ns()
            marks[which] = (time.perf_counter(), self.cg.cpu_ns(ls_cg), self.cg.cpu_ns(BESTEFFORT),
                            self.cg.cpu_ns(""), busy, steal, procs_cpu_ns([os.getpid(), agent_pid, *self.own_pids]))

        sched = set_client_sched(self.args.client_sched)
        try:
            res = await generate(self.port, self.args.rate, self.args.warmup_s, self.args.seconds, at_window)
        finally:
            set_client_sched("other")
        (t0, ls0, be0, par0, busy0, steal0, own0), (t1, ls1, be1, par1, busy1, steal1, own1) = \
            marks["start"], marks["end"]
        dt = t1 - t0
        cores = psutil.cpu_count() or 1
        ls_used, be_used = (ls1 - ls0) / 1e9 / dt, (be1 - be0) / 1e9 / dt
        other = ((busy1 - busy0) - (par1 - par0) - (own1 - own0)) / 1e9 / dt
        out: dict[str, Any] = {
            "run": cfg.name, "hogs": len(hog_uids) if cfg.hogs else 0, **percentiles_ms(res.latency_s),
            "requests": len(res.latency_s), "errors": res.errors, "window_s": round(dt, 2),
            "ls_cpu_cores_used": round(ls_used, 3), "be_cpu_cores_used": round(be_used, 3),
            "be_share_of_idle": round(be_used / (cores - ls_used), 3) if cfg.hogs else 0.0,
            "bench_cpu_cores": round((own1 - own0) / 1e9 / dt, 3),
            "other_cpu_cores": round(max(other, 0.0), 3),
            "steal_cores": round((steal1 - steal0) / 1e9 / dt, 3),
            "client_lateness_p99_ms": round(float(np.percentile(res.lateness_s, 99)) * 1000, 3)
            if res.lateness_s else 0.0,
            "client_sched": sched, "load1_before": round(load_before, 2), "load1_after": round(os.getloadavg()[0], 2),
            "be_group": be_before if cfg.hogs else {},
        }
        if cfg.hogs:
            ended = [u for u in hog_uids if self.phase(u) != "Running"]
            if ended:
                raise RuntimeError(f"{cfg.name}: hogs no longer running: {ended}")
            if self.suppress_events:
                out["be_cpu_allowed_milli"] = self.suppress_events[-1].detail.get("be_cpu_allowed_milli")
        return out


def msgspec_replace_at(slo: NodeSLO) -> NodeSLO:
    """The NodeSLO stamped with the current time."""
    return msgspec.structs.replace(slo, at=time.time())


def ls_spec(port: int, work_n: int) -> PodSpec:
    return PodSpec(uid=LS_UID, name=LS_UID, qos_class="LS", priority=9500,
                   command=[sys.executable, str(Path(__file__).resolve()), "--serve", str(port),
                            "--work-n", str(work_n)],
                   requests=Resources(cpu=1000, memory=256 * MI))


def hog_spec(i: int, batch_cpu: int) -> PodSpec:
    uid = f"hog-{i}"
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500,
                   command=[sys.executable, "-c", "while True: pass"],
                   requests=Resources(batch_cpu=batch_cpu, batch_memory=64 * MI),
                   limits=Resources(batch_memory=256 * MI))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load0 = wait_for_quiet(args.max_load, args.load_wait_s)
    work_n, work_ms = calibrate(args.work_ms)
    print(f"load average {load0:.2f}; handler work: {work_n} iterations = {work_ms:.3f} ms alone", flush=True)
    cores = psutil.cpu_count() or 1
    n_hogs = args.hogs if args.hogs > 0 else 2 * cores
    hog_shares = max(2, n_hogs * args.hog_batch_cpu * 1024 // 1000)
    configs = [c for c in run_configs(hog_shares) if not args.runs or c.name in args.runs.split(",")]
    parent = f"colo-bench-{uuid.uuid4().hex[:8]}"
    state_dir = tempfile.mkdtemp(prefix="colo-bench-interference-")
    config = HostConfig(node_name=NODE, cgroup_parent=parent, state_dir=state_dir, loop_s=1.0)
    problems = host_problems(config)
    if problems:
        shutil.rmtree(state_dir, ignore_errors=True)
        raise SystemExit(f"this machine cannot run the host backend: {'; '.join(problems)}")
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    port = free_port()
    results: list[dict[str, Any]] = []
    with EmbeddedServers() as servers:
        env = dict(os.environ, COLO_NATS_URL=servers.nats_url, COLO_REDIS_URL=servers.redis_url,
                   COLO_STORE_PREFIX=prefix, COLO_HTTP_PORT=str(free_port()), COLO_LOG_LEVEL="warning",
                   COLO_NODE_AGENT_BACKEND="host", COLO_NODE_AGENT_CGROUP_PARENT=parent,
                   COLO_NODE_AGENT_STATE_DIR=state_dir, COLO_NODE_AGENT_NODE_NAME=NODE,
                   COLO_NODE_AGENT_LOOP_S="1", COLO_NODE_AGENT_REPORT_INTERVAL_S="60",
                   COLO_NODE_AGENT_TERMINATION_GRACE_S="1")
        agent = subprocess.Popen([sys.executable, "-m", "colo_node_agent"], env=env, preexec_fn=_die_with_parent)
        store = await Store.connect(servers.redis_url, prefix)
        bus = await Bus.connect(servers.nats_url, "bench-driver")
        own = [p.proc.pid for p in (servers.nats, servers.redis) if p is not None]
        b = Bench(args, parent, Cgroups(parent), store, bus, agent, own, port)

        async def on_status(msg: PodStatus) -> None:
            b.statuses.setdefault(msg.uid, []).append(msg)

        async def on_qos(msg: QoSEvent) -> None:
            if msg.kind == "suppress":
                b.suppress_events.append(msg)

        try:
            await bus.ensure_streams()
            await bus.subscribe(subjects.POD_STATUS, on_status, durable="bench-status")
            await bus.subscribe(subjects.NODE_QOS, on_qos, durable="bench-qos")

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
            hog_uids = [h.uid for h in hogs]
            hogs_up = False
            for cfg in configs:
                if cfg.hogs and not hogs_up:
                    for h in hogs:
                        await b.bind(h)
                    await b.wait_running(hog_uids)
                    hogs_up = True
                if not cfg.hogs and hogs_up:
                    for h in hogs:
                        await bus.publish(subjects.POD_EVICT, EvictionCommand(uid=h.uid, node=NODE,
                                                                              reason="bench", at=time.time()),
                                          node=NODE)

                    async def gone() -> bool:
                        return all(b.phase(u) == "Failed" for u in hog_uids) and not b.cg.be_procs()

                    await wait_for(gone, 30, "the hogs to be evicted")
                    await asyncio.sleep(2.0)
                    hogs_up = False
                if cfg.hogs:
                    await b.apply(cfg)
                out = await b.measure(cfg, hog_uids)
                out["load1_start"] = round(load0, 2)
                results.append(out)
                print(json.dumps(out), flush=True)
        finally:
            set_client_sched("other")
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
    return summarize(args, results, work_n, work_ms, n_hogs, hog_shares)


def summarize(args: argparse.Namespace, results: list[dict[str, Any]], work_n: int, work_ms: float,
              n_hogs: int, hog_shares: int) -> dict[str, Any]:
    """The summary: increases against ``ls_alone``, the QoS run's BE figures, the ablation, targets."""
    by = {r["run"]: r for r in results}
    base = by.get("ls_alone")
    facts = machine_facts()

    def inc(name: str) -> float | None:
        r = by.get(name)
        if r is None or base is None:
            return None
        return round((float(r["p99_ms"]) / float(base["p99_ms"]) - 1) * 100, 1)

    qos = by.get("qos", {})
    ablation = {r["run"]: {"p99_ms": r["p99_ms"], "p99_increase_pct": inc(r["run"]),
                           "be_cpu_cores_used": r["be_cpu_cores_used"], "be_share_of_idle": r["be_share_of_idle"]}
                for r in results if r["hogs"]}
    inc_qos = inc("qos")
    share = qos.get("be_share_of_idle")
    return {
        "bench": "interference", "machine": facts, "rate_rps": args.rate, "work_ms": round(work_ms, 3),
        "work_iterations": work_n, "warmup_s": args.warmup_s, "seconds": args.seconds, "hogs": n_hogs,
        "hog_batch_cpu_milli": args.hog_batch_cpu, "be_group_shares_requests": hog_shares,
        "client_sched": args.client_sched,
        "p50_ms_alone": base["p50_ms"] if base else None, "p99_ms_alone": base["p99_ms"] if base else None,
        "p99_increase_noqos_pct": inc("noqos"), "p99_increase_qos_pct": inc_qos,
        "be_cpu_cores_used": qos.get("be_cpu_cores_used"), "be_share_of_idle": share,
        "ls_cpu_cores_used": qos.get("ls_cpu_cores_used"),
        "target_p99_increase_pct": 10.0, "target_be_share_of_idle": 0.5,
        "met": inc_qos is not None and share is not None and inc_qos <= 10.0 and share >= 0.5,
        "ablation": ablation, "runs": results,
    }


def print_table(s: dict[str, Any]) -> None:
    print(f"{'run':<18} {'p50 ms':>8} {'p99 ms':>8} {'Δp99 %':>8} {'LS cores':>9} {'BE cores':>9} "
          f"{'BE/idle':>8} {'other':>6} {'load1':>6}")
    base = s["p99_ms_alone"]
    for r in s["runs"]:
        d = (r["p99_ms"] / base - 1) * 100 if base else float("nan")
        print(f"{r['run']:<18} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {d:>8.1f} {r['ls_cpu_cores_used']:>9.3f} "
              f"{r['be_cpu_cores_used']:>9.3f} {r['be_share_of_idle']:>8.3f} {r['other_cpu_cores']:>6.2f} "
              f"{r['load1_before']:>6.2f}")
    print(f"p99 +{s['p99_increase_noqos_pct']} % without QoS, +{s['p99_increase_qos_pct']} % with QoS "
          f"(target <= 10); BE used {s['be_cpu_cores_used']} cores = {s['be_share_of_idle']} of what LS leaves "
          f"(target >= 0.5); {s['machine']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--serve", type=int, default=0, help="run the LS pod's HTTP server on this port")
    ap.add_argument("--work-n", type=int, default=0, help="(with --serve) iterations of work per request")
    ap.add_argument("--rate", type=float, default=200.0, help="requests per second (open loop)")
    ap.add_argument("--work-ms", type=float, default=1.5, help="handler CPU work per request, ms (calibrated)")
    ap.add_argument("--seconds", type=float, default=20.0, help="counted window per run, s")
    ap.add_argument("--warmup-s", type=float, default=5.0)
    ap.add_argument("--settle-s", type=float, default=3.0, help="after the BE group shows a run's policy, s")
    ap.add_argument("--hogs", type=int, default=0, help="BE CPU hogs (0 = 2 x CPUs)")
    ap.add_argument("--hog-batch-cpu", type=int, default=250, help="batch-cpu request of each hog, milli-cores")
    ap.add_argument("--client-sched", choices=("fifo", "other"), default="fifo")
    ap.add_argument("--runs", default="", help="comma-separated run names (default: all)")
    ap.add_argument("--max-load", type=float, default=0.5, help="wait for a 1-minute load average below this")
    ap.add_argument("--load-wait-s", type=float, default=900.0)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.work_n)
        return
    res = asyncio.run(run(args))
    print_table(res)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
