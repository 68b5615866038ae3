"""Node agent overhead on the host backend: its CPU and memory with N real pods at a 1 s loop.

Starts its own nats-server and redis-server (:mod:`colo.embedded`), runs the agent as a separate process
(``python -m colo_node_agent``, ``backend=host``) under a unique cgroup parent ``colo-bench-<hex>``, binds
``--pods`` pods (sleep processes; 70 % LS, 30 % BE with batch resources) the way the scheduler does (store
binding + ``pod.bound``), waits until every pod reported Running, lets the agent settle for ``--warmup-s``,
then samples the agent process with psutil for ``--seconds``:

* ``cpu_pct_of_one_core`` = Δ(user + system CPU seconds of the agent) / Δwall × 100;
* ``rss_mib`` = the largest resident set seen (sampled every second), ``rss_mib_mean`` its mean.

Every loop the agent checks each pod's process, reads its CPU, memory and throttling counters, samples the
node, reads the LS pods' interference counters (``/proc/<tid>/schedstat`` of each thread; setting
``interference_signals``), runs CPU suppress and the eviction checks; NodeMetrics are published every
``--report-s`` (10 s, six times the production rate, to include their cost). The pods themselves are not
counted. Target (issues 4 and 17): ≤ 2 % of one core and ≤ 100 MiB, with the interference signals on. At the
end the agent gets SIGTERM, every pod process is killed and every group removed.

``--be-budget`` has the NodeSLO switch the SLO-driven BE budget on (docs/node-agent.md "BE budget": the
agent then differences the interference counters and runs the budget every loop). ``--signals both`` (default) runs the bench ``--rounds`` times each with the signals off and on, alternating
(off, on, off, on ...: a busy machine's drift hits both alike), and reports each run, the mean of each setting
and the difference; ``on`` / ``off`` run one setting. Prints a readable summary per run, then one JSON line
(with ``both``: ``{"off": [...], "on": [...], "mean_off", "mean_on", "delta_pct_points", ...}``).

Run: ``.venv/bin/python bench/agent_overhead.py`` (root, writable cgroups; ~50 s per run, 4 runs)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import psutil

from colo import subjects
from colo.bus import Bus
from colo.embedded import EmbeddedServers, free_port
from colo.messages import (
    BEBudgetStrategy,
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

MI = 1 << 20
NODE = "bench-node"


def _die_with_parent() -> None:
    """In the agent's child process before exec: SIGTERM when this driver dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def make_pods(n: int) -> list[PodSpec]:
    """``n`` sleep pods: 70 % LS (20 m, 32 Mi), 30 % BE (batch 100 m, 32 Mi)."""
    pods = []
    for i in range(n):
        uid = f"bench-{i:03d}"
        if i % 10 < 7:
            pods.append(PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, command=["sleep", "3600"],
                                requests=Resources(cpu=20, memory=32 * MI)))
        else:
            pods.append(PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500, command=["sleep", "3600"],
                                requests=Resources(batch_cpu=100, batch_memory=32 * MI),
                                limits=Resources(batch_memory=64 * MI)))
    return pods


def machine_facts() -> dict[str, Any]:
    """CPUs, kernel and cgroup version of this machine."""
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    return {"cpus": psutil.cpu_count(), "kernel": platform.release(), "cgroup": "v2" if v2 else "v1",
            "python": platform.python_version()}


async def wait_for(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def run(args: argparse.Namespace, signals: bool) -> dict[str, Any]:
    parent = f"colo-bench-{uuid.uuid4().hex[:8]}"
    state_dir = tempfile.mkdtemp(prefix="colo-bench-agent-")
    config = HostConfig(node_name=NODE, cgroup_parent=parent, state_dir=state_dir, loop_s=args.loop_s)
    problems = host_problems(config)
    if problems:
        raise SystemExit(f"this machine cannot run the host backend: {'; '.join(problems)}")
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    with EmbeddedServers() as servers:
        env = dict(os.environ, COLO_NATS_URL=servers.nats_url, COLO_REDIS_URL=servers.redis_url,
                   COLO_STORE_PREFIX=prefix, COLO_HTTP_PORT=str(free_port()), COLO_LOG_LEVEL="warning",
                   COLO_NODE_AGENT_BACKEND="host", COLO_NODE_AGENT_CGROUP_PARENT=parent,
                   COLO_NODE_AGENT_STATE_DIR=state_dir, COLO_NODE_AGENT_NODE_NAME=NODE,
                   COLO_NODE_AGENT_LOOP_S=str(args.loop_s), COLO_NODE_AGENT_REPORT_INTERVAL_S=str(args.report_s),
                   COLO_NODE_AGENT_WINDOW_S=str(max(args.report_s, 300.0)),
                   COLO_NODE_AGENT_INTERFERENCE_SIGNALS="true" if signals else "false")
        agent = subprocess.Popen([sys.executable, "-m", "colo_node_agent"], env=env, preexec_fn=_die_with_parent)
        store = await Store.connect(servers.redis_url, prefix)
        bus = await Bus.connect(servers.nats_url, "bench-driver")
        running: set[str] = set()
        metrics = 0

        async def on_status(msg: PodStatus) -> None:
            if msg.phase == "Running":
                running.add(msg.uid)

        async def on_metric(_: Any) -> None:
            nonlocal metrics
            metrics += 1

        try:
            await bus.ensure_streams()
            await bus.subscribe(subjects.POD_STATUS, on_status, durable="bench-status")
            await bus.subscribe(subjects.NODE_METRIC, on_metric, durable="bench-metric")

            async def registered() -> bool:
                assert agent.poll() is None, f"the agent exited with {agent.returncode}"
                return await store.get_node(NODE) is not None

            await wait_for(registered, 30, "the agent to register its node")
            await store.put_node_resource(NodeResource(node=NODE, batch_cpu=args.pods * 100,
                                                       batch_memory=args.pods * 64 * MI))
            # the default NodeSLO, as slo-manager would send it
            await bus.publish(subjects.NODE_SLO, NodeSLO(node=NODE, be_budget=BEBudgetStrategy(
                enabled=args.be_budget)), node=NODE)
            pods = make_pods(args.pods)
            now = time.time()
            await store.put_pods([PodRecord(spec=p) for p in pods])
            for p in pods:
                res = await store.bind(p.uid, NODE, p.requests, now)
                assert res.ok, f"{p.uid}: {res.reason}"
                await bus.publish(subjects.POD_BOUND, PodBound(spec=p, node=NODE, at=now),
                                  msg_id=f"bound-{p.uid}", node=NODE)

            async def all_running() -> bool:
                return len(running) == len(pods)

            await wait_for(all_running, 60, f"{len(pods)} pods to run")
            await asyncio.sleep(args.warmup_s)
            proc = psutil.Process(agent.pid)
            cpu0, t0 = proc.cpu_times(), time.monotonic()
            metrics0 = metrics
            rss: list[float] = []
            while time.monotonic() - t0 < args.seconds:
                rss.append(proc.memory_info().rss / MI)
                await asyncio.sleep(1.0)
            cpu1, t1 = proc.cpu_times(), time.monotonic()
            cpu_s = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
            return {
                "interference_signals": signals,
                "be_budget": args.be_budget,
                "cpu_pct_of_one_core": round(cpu_s / (t1 - t0) * 100, 2),
                "rss_mib": round(max(rss), 1),
                "rss_mib_mean": round(sum(rss) / len(rss), 1),
                "pods": len(pods),
                "loop_s": args.loop_s,
                "seconds": round(t1 - t0, 1),
                "agent_cpu_s": round(cpu_s, 3),
                "node_metrics_published": metrics - metrics0,
                "report_s": args.report_s,
                "target_cpu_pct": 2.0,
                "target_rss_mib": 100.0,
                "machine": machine_facts(),
            }
        finally:
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


def summary(res: dict[str, Any]) -> str:
    return (f"signals {'on ' if res['interference_signals'] else 'off'}: agent with {res['pods']} pods at a "
            f"{res['loop_s']} s loop over {res['seconds']} s: {res['cpu_pct_of_one_core']} % of one core (target "
            f"<= {res['target_cpu_pct']}), RSS max {res['rss_mib']} MiB / mean {res['rss_mib_mean']} MiB (target "
            f"<= {res['target_rss_mib']}); {res['node_metrics_published']} NodeMetrics published")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--loop-s", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup-s", type=float, default=5.0)
    ap.add_argument("--report-s", type=float, default=10.0)
    ap.add_argument("--signals", choices=("both", "on", "off"), default="both")
    ap.add_argument("--rounds", type=int, default=2, help="runs per setting with --signals both")
    ap.add_argument("--be-budget", action="store_true",
                    help="the NodeSLO switches the SLO-driven BE budget on (it then reads the signals every loop)")
    args = ap.parse_args()
    if args.signals != "both":
        res = asyncio.run(run(args, args.signals == "on"))
        print(summary(res), res["machine"])
        print(json.dumps(res))
        return
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        for key in ("off", "on"):
            res = asyncio.run(run(args, key == "on"))
            print(summary(res), flush=True)
            runs[key].append(res)
    mean = {k: round(sum(r["cpu_pct_of_one_core"] for r in v) / len(v), 2) for k, v in runs.items()}
    rss = {k: round(max(r["rss_mib"] for r in v), 1) for k, v in runs.items()}
    out = {"mean_off": mean["off"], "mean_on": mean["on"],
           "delta_pct_points": round(mean["on"] - mean["off"], 2), "rss_mib_max_off": rss["off"],
           "rss_mib_max_on": rss["on"], "target_cpu_pct": 2.0, "pods": args.pods, "loop_s": args.loop_s,
           "rounds": args.rounds, "machine": runs["on"][0]["machine"],
           "load_avg_1m_end": round(os.getloadavg()[0], 2), **runs}
    print(f"signals off {mean['off']} % / on {mean['on']} % of one core (mean of {args.rounds} runs each, "
          f"alternating; target <= 2 % with them on); {out['machine']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
