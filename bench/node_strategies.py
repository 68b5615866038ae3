"""Node QoS strategy cost: one plan_node round, its executor pass, and the sim backend with the same strategies.

* ``plan_node_us``: one round of every strategy (all switched on) for a 32-CPU node (2 sockets × 8 cores × 2
  threads) with ``--pods`` pods (a quarter LS with limits, two LSR, one LSE, the rest BE), median of rounds;
* ``apply_settled_us``: the executor applying the next round's plan to an in-memory v2 tree where every value
  is already in place (what a steady 1 s loop costs; no write happens), median;
* ``apply_first_us``: the first application (every file written);
* ``sim_start_s`` / ``sim_tick_ms``: the ``sim`` backend with 100 nodes × 60 pods (40 LS, 20 BE batch): time to
  start all pods, and the best of five 60 s ticks;
* ``sim_tick_interference_ms``: the same with the interference model of ``--calibration FILE`` (default the
  packaged table; absent: not measured), measured in the same run, and ``interference_tick_ratio`` the two ticks'
  ratio (docs/scenario.md "The interference model").

    .venv/bin/python bench/node_strategies.py --pods 60

The last line is one JSON object. Numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

import numpy as np

from colo.messages import (
    BEBudgetStrategy,
    BlkIOLimit,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    MemoryQoSStrategy,
    NodeSLO,
    NodeSpec,
    PodSpec,
    ResctrlStrategy,
    Resources,
    SimWorkload,
    SystemStrategy,
)
from colo_node_agent.backends.interference_model import InterferenceModel, load_model
from colo_node_agent.backends.sim import SimBackend, SimConfig
from colo_node_agent.backends.sim_pods import F64
from colo_node_agent.cgroups import Executor, MemoryFS
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.cgroups.layout import CGROUPFS
from colo_node_agent.cgroups.resctrl import ResctrlInfo
from colo_node_agent.strategies.node import NodeFeatures, NodeSnapshot, PodState, StrategyMemory, plan_node
from colo_node_agent.topology import CPUTopology

G = 2**30


def node_snapshot(pods: int) -> NodeSnapshot:
    states = []
    for i in range(pods):
        if i == 0:
            qos, req, lim = "LSE", Resources(cpu=2000, memory=G), Resources(cpu=2000, memory=G)
        elif i < 3:
            qos, req, lim = "LSR", Resources(cpu=2000, memory=G), Resources(cpu=2000, memory=G)
        elif i < pods // 4:
            qos, req, lim = "LS", Resources(cpu=500, memory=G), Resources(cpu=1000, memory=2 * G)
        else:
            qos, req, lim = "BE", Resources(batch_cpu=500, batch_memory=G // 2), Resources(batch_memory=G)
        spec = PodSpec(uid=f"p{i}", name=f"p{i}", qos_class=qos, priority=9500 if qos != "BE" else 5500,  # type: ignore[arg-type]
                       requests=req, limits=lim)
        states.append(PodState(spec, qos, cpu_used=300, memory_used=G // 4, quota_us=100_000,  # type: ignore[arg-type]
                               throttled=i % 2 == 0, pids=(1000 + i,)))
    return NodeSnapshot("n", 32_000, 128 * G, 20_000, 60 * G, tuple(states), CPUTopology.smt(8, 2, 2),
                        reserved_cpus=(0, 16), features=NodeFeatures(resctrl=ResctrlInfo(0x7FF, 1, (0, 1), (0, 1)),
                                                                     sysctl=True))


SLO = NodeSLO(node="n", cpu_burst=CPUBurstStrategy(policy="auto"), cpu_evict=CPUEvictStrategy(enabled=True),
              memory_qos=MemoryQoSStrategy(enabled=True, min_percent=50, throttling_percent=80),
              resctrl=ResctrlStrategy(enabled=True), system=SystemStrategy(enabled=True),
              blkio=BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", write_bps=10**8)]))


def bench_plan(pods: int, rounds: int) -> dict[str, float]:
    snap = node_snapshot(pods)
    mem = StrategyMemory()
    times = []
    plan = plan_node(snap, SLO, mem, 0.0)
    for r in range(rounds):
        t0 = time.perf_counter()
        plan = plan_node(snap, SLO, mem, float(r))
        times.append(time.perf_counter() - t0)
    fs, rc, sysctl = MemoryFS(), MemoryFS(), MemoryFS()
    for cg in (*CGROUPFS.qos_dirs, *(CGROUPFS.pod_dir(p.qos, p.spec.uid) for p in snap.pods)):
        for path, text in default_files("v2", cg, 32).items():
            fs.seed(path, text)
    for g in ("LSR", "LS", "BE"):
        rc.seed(f"{g}/schemata", "L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
        rc.seed(f"{g}/tasks", "")
    sysctl.seed("vm/min_free_kbytes", "67584")
    sysctl.seed("vm/watermark_scale_factor", "10")
    ex = Executor(fs, "v2", trees={"resctrl": rc, "sysctl": sysctl})
    t0 = time.perf_counter()
    first = ex.apply(plan.writes)
    first_s = time.perf_counter() - t0
    n_writes = len(plan.writes)
    # the next rounds see the tasks already in their resctrl groups (as a real node reads them back)
    groups: dict[str, set[int]] = {}
    for w in plan.writes:
        if w.resource == "resctrl.tasks":
            groups.setdefault(w.cgroup, set()).add(int(w.value))
    plan = plan_node(replace(snap, resctrl_tasks={g: frozenset(p) for g, p in groups.items()}), SLO, mem, 1.0)
    settled = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        recs = ex.apply(plan.writes)
        settled.append(time.perf_counter() - t0)
    assert all(r.skipped for r in recs), [r for r in recs if not r.skipped][:3]
    return {"plan_node_us": round(statistics.median(times) * 1e6, 1), "writes": n_writes,
            "write_errors": sum(not r.ok for r in first), "apply_first_us": round(first_s * 1e6, 1),
            "apply_settled_us": round(statistics.median(settled) * 1e6, 1)}


class _SignalledSim(SimBackend):
    """The sim with a constant LS run-queue wait on every node (a stand-in interference model), so that the
    BE budget runs its rule rather than falling back."""

    def ls_signal(self, kind: str) -> F64:
        return np.full(len(self.names), 0.1)


def bench_sim(model: InterferenceModel | None = None, be_budget: bool = False) -> dict[str, float]:
    cap = Resources(cpu=32_000, memory=256 * 10**9, pods=110)
    nodes = [NodeSpec(name=f"n{i}", capacity=cap, allocatable=cap, cpus=32) for i in range(100)]
    budget = BEBudgetStrategy(enabled=be_budget)
    b = (_SignalledSim if be_budget else SimBackend)(nodes, SimConfig(sub_step_s=10.0, interference=model),
                                                     lambda name: NodeSLO(node=name, be_budget=budget))
    t0 = time.perf_counter()
    for i in range(100):
        for j in range(40):
            util = [((i * 7 + j * 13 + k * 5) % 17) / 20 for k in range(72)]
            b.start_pod(PodSpec(uid=f"ls-{i}-{j}", name="ls", qos_class="LS", priority=9500,
                                requests=Resources(cpu=500, memory=10**9),
                                limits=Resources(cpu=1000, memory=2 * 10**9),
                                sim=SimWorkload(kind="series", cpu_util=util, memory_util=[0.5],
                                                cpu_scale_milli=1000, memory_scale_bytes=10**9)), f"n{i}")
        for j in range(20):
            b.start_pod(PodSpec(uid=f"be-{i}-{j}", name="be", qos_class="BE", priority=5500,
                                requests=Resources(batch_cpu=1000, batch_memory=10**8),
                                sim=SimWorkload(kind="batch", cpu_milli=1000, duration_s=1800 + j * 60,
                                                memory_bytes=10**8)), f"n{i}")
    start_s = time.perf_counter() - t0
    b.advance(60)
    best = float("inf")
    for t in (120, 180, 240, 300, 360):
        t0 = time.perf_counter()
        b.advance(float(t))
        best = min(best, time.perf_counter() - t0)
    key = "sim_tick_be_budget_ms" if be_budget else "sim_tick_ms"
    return {"sim_start_s": round(start_s, 2), key: round(best * 1000, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--no-sim", action="store_true", help="skip the sim backend part")
    ap.add_argument("--be-budget", action="store_true",
                    help="also time a sim tick with the BE budget on (sim_tick_be_budget_ms)")
    ap.add_argument("--calibration", default="", help="interference calibration (default: the packaged one)")
    args = ap.parse_args()
    out: dict[str, float | int] = {"pods": args.pods}
    out.update(bench_plan(args.pods, args.rounds))
    if not args.no_sim:
        out.update(bench_sim())
        if args.be_budget:
            out["sim_tick_be_budget_ms"] = bench_sim(be_budget=True)["sim_tick_be_budget_ms"]
        model = load_model(args.calibration)
        if model is not None:
            out["sim_tick_interference_ms"] = bench_sim(model)["sim_tick_ms"]
            out["interference_tick_ratio"] = round(out["sim_tick_interference_ms"] / out["sim_tick_ms"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
