"""Online latency beside batch CPU hogs on this machine, with and without the node agent's CPU QoS.

The setup (the agent process, its servers, the LS pod, the per-window counters and the quiet checks) is
:mod:`interference_parts`, shared with ``bench/interference_calibration.py``. The node agent runs as its own process (``python -m colo_node_agent``, ``backend=host``, ``node_scope=machine``,
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
redis-server. The very first wait is for a 1-minute load average below ``--max-load`` (0.5). On cgroup v1 the
parent group weighs as much as one busy process at the root (cpu.shares 1024), so with many runnable processes
of other work the whole pod tree gets a sliver of the CPUs; ``--parent-shares`` (e.g. 8192) gives it the larger
part, as the kubepods tree has on a dedicated node (it slows the other work down while the bench runs).

Per window: ``p50_ms``, ``p90_ms``, ``p99_ms``, ``max_ms``; ``ls_cpu_cores_used`` and ``be_cpu_cores_used`` =
Δ``cpuacct.usage`` of the LS pod group and of the BE QoS group over the counted window / its length;
``other_cpu_cores``; the LS server's CPU time, run-queue wait (``/proc/<pid>/schedstat``) and involuntary
context switches per request (``ls_cpu_ms_per_request``, ``ls_runq_wait_ms_per_request``,
``ls_preempted_per_request``: how long it waited for a CPU, and how often it lost one; ``runq_wait_ratio`` the
same wait per second on the CPU); ``cpu_pressure_some`` the node's PSI ``cpu.some`` over the window (percent);
``throttled_ratio`` the LS pod group's throttled CFS periods / periods; ``load1_before``/``load1_after`` (the hogs themselves add ~4); the BE group's files; ``be_cpu_allowed_milli`` the suppress budget the agent
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
import signal
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
from interference_load import percentiles_ms
from interference_parts import (
    MI,
    NODE,
    Bench,
    add_quiet_options,
    agent_session,
    calibrate_work,
    interrupt,
    machine_facts,
    wait_for_quiet,
)

from colo.messages import CPUSuppressStrategy, NodeSLO, PodSpec, Resources

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


def hog_spec(i: int, batch_cpu: int) -> PodSpec:
    uid = f"hog-{i}"
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500, command=[sys.executable, "-c", "while True: pass"],
                   requests=Resources(batch_cpu=batch_cpu, batch_memory=64 * MI),
                   limits=Resources(batch_memory=256 * MI))


async def window(b: Bench, cfg: RunConfig, rnd: int) -> tuple[dict[str, Any], list[float]]:
    """One window of ``cfg``: (its figures, the counted latencies in seconds)."""
    if not cfg.hogs:
        b.run_only(set())
    try:
        await b.apply(cfg.slo, cfg.expect)
        await asyncio.sleep(b.args.settle_s)
        await b.wait_quiet()
        out, lat = await b.measure(cfg.name, rnd, b.args.seconds)
        if not cfg.hogs:
            out["be_group"] = {}
            out.pop("be_cpu_allowed_milli", None)
        return out, lat
    finally:
        if not cfg.hogs:
            b.run_only(set(b.hogs))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load0 = wait_for_quiet(args.max_load, args.load_wait_s)
    work_n, work_ms = calibrate_work(args)
    print(f"load average {load0:.2f}; handler work: {work_n} iterations = {work_ms:.3f} ms alone", flush=True)
    cores = psutil.cpu_count() or 1
    n_hogs = args.hogs if args.hogs > 0 else 2 * cores
    hog_shares = max(2, n_hogs * args.hog_batch_cpu * 1024 // 1000)
    configs = [c for c in run_configs(hog_shares, args.threshold) if not args.runs or c.name in args.runs.split(",")]
    windows: list[dict[str, Any]] = []
    latencies: list[list[float]] = []
    async with agent_session(args, work_n, n_hogs * 256 * MI) as b:
        await b.bind_be([hog_spec(i, args.hog_batch_cpu) for i in range(n_hogs)])
        for rnd in range(args.rounds):
            for cfg in configs:
                for attempt in range(1, args.attempts + 1):
                    out, lat = await window(b, cfg, rnd)
                    out["attempt"] = attempt
                    out["quiet"] = out["other_cpu_cores"] <= args.max_other
                    print(json.dumps(out), flush=True)
                    windows.append(out)
                    latencies.append(lat)
                    if out["quiet"]:
                        break
                    print(f"{cfg.name}: other work used {out['other_cpu_cores']} cores > {args.max_other}: "
                          "window not counted", flush=True)
    summary = {"bench": "interference", "machine": machine_facts(), "rate_rps": args.rate,
               "work_ms": round(work_ms, 3), "work_iterations": work_n, "warmup_s": args.warmup_s,
               "seconds": args.seconds, "rounds": args.rounds, "hogs": n_hogs,
               "hog_batch_cpu_milli": args.hog_batch_cpu, "be_group_shares_requests": hog_shares,
               "suppress_threshold_percent": args.threshold, "client_sched": args.client_sched,
               "max_other_cpu_cores": args.max_other,
               "parent_shares": args.parent_shares or 1024, "load1_start": round(load0, 2)}
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


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_quiet_options(ap)
    ap.add_argument("--seconds", type=float, default=20.0, help="counted part of a window, s")
    ap.add_argument("--rounds", type=int, default=4, help="rounds over every run, interleaved")
    ap.add_argument("--hogs", type=int, default=0, help="BE CPU hogs (0 = 2 x CPUs)")
    ap.add_argument("--hog-batch-cpu", type=int, default=250, help="batch-cpu request of each hog, milli-cores")
    ap.add_argument("--threshold", type=int, default=65, help="suppress threshold of the ablation runs, %%")
    ap.add_argument("--runs", default="", help="comma-separated run names (default: all)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, interrupt)  # clean up (agent, pods, groups) on SIGTERM as on Ctrl-C
    res = asyncio.run(run(args))
    print_table(res)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
