"""The BE budget in a closed loop on the sim backend: one node, a stand-in harm model, static vs adaptive.

One 16-CPU node with an LS pod of 2 cores and BE work that wants the whole node; the LS run-queue wait the model
reports is 0.1 while BE uses at most 70 % of the node and rises by 0.5 per unit of node share above that (the
budget's limit for this baseline is 0.12). For each suppress policy (cpuset, cfsQuota), the budget off (static
65 %) and on, 2 h of 10 s sub-steps: BE CPU used, the LS signal and the sub-steps over the limit. One JSON line
per run. Not a calibration: the model is a stand-in, the point is the controller's behaviour.

``--model`` uses the sim's calibrated interference model instead (the packaged table, SimConfig.interference;
docs/node-agent.md "Sim model") with the budget's signal ``latency_inflation``, SCHED_IDLE on and off; the LS
pod takes 4 cores.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from colo.messages import (
    BEBudgetStrategy,
    CPUSuppressStrategy,
    NodeSLO,
    NodeSpec,
    PodSpec,
    Resources,
    SimWorkload,
)
from colo_node_agent.backends.interference_model import load_model
from colo_node_agent.backends.sim import SimBackend, SimConfig
from colo_node_agent.backends.sim_pods import F64
from colo_node_agent.strategies.be_budget import Signal

G = 10**9
CAP = 16_000
KNEE, SLOPE, BASE, LIMIT = 0.7, 0.5, 0.1, 0.12


class HarmModel(SimBackend):
    """LS run-queue wait = BASE + SLOPE × max(BE share of the node − KNEE, 0), per node."""

    def ls_signal(self, kind: Signal) -> F64:
        T = self.pods
        be_used = np.where(T.active & T.is_be, T.cpu_used, 0.0).sum(axis=1)
        out: F64 = BASE + SLOPE * np.maximum(be_used / self.cap_cpu - KNEE, 0.0)
        return out


def run(policy: str, budget: bool, hours: float = 2.0, model: bool = False, idle: bool = True) -> dict[str, object]:
    cap = Resources(cpu=CAP, memory=64 * G, pods=110)
    signal = "latency_inflation" if model else "runq_wait"
    slo = NodeSLO(node="n", cpu_suppress=CPUSuppressStrategy(policy=policy),  # type: ignore[arg-type]
                  be_cpu_idle=idle, be_budget=BEBudgetStrategy(enabled=budget, signal=signal))
    nodes = [NodeSpec(name="n", capacity=cap, allocatable=cap, cpus=CAP // 1000)]
    b = (SimBackend(nodes, SimConfig(sub_step_s=10.0, interference=load_model("")), lambda name: slo) if model
         else HarmModel(nodes, SimConfig(sub_step_s=10.0), lambda name: slo))
    ls_milli = 4000 if model else 2000
    b.start_pod(PodSpec(uid="ls", name="ls", qos_class="LS", priority=9500, requests=Resources(cpu=ls_milli, memory=G),
                        sim=SimWorkload(kind="series", step_s=60, cpu_util=[1.0], cpu_scale_milli=ls_milli,
                                        memory_util=[1.0], memory_scale_bytes=G)), "n")
    b.advance(60.0)  # BE-free: the baseline is learned
    b.start_pod(PodSpec(uid="be", name="be", qos_class="BE", priority=5500,
                        requests=Resources(batch_cpu=1000, batch_memory=G // 10),
                        sim=SimWorkload(kind="batch", cpu_milli=CAP, duration_s=10**6, memory_bytes=G // 10)), "n")
    be_used, signal, thresholds = [], [], []
    signal_kind = "latency_inflation" if model else "runq_wait"
    for t in range(70, int(hours * 3600), 10):
        res = b.advance(float(t))
        be_used.append(res.stats["be_cpu_used_milli"])
        signal.append(float(b.ls_signal(signal_kind)[0]))
        state = b.node_metrics(float(t))[0].be_budget
        thresholds.append(state.threshold_percent if state is not None else 65.0)
    return {"policy": policy, "be_budget": budget, "signal": signal_kind, "be_cpu_idle": idle,
            "sub_steps": len(signal),
            "be_used_percent": round(float(np.mean(be_used)) / CAP * 100, 1),
            "ls_signal_mean": round(float(np.mean(signal)), 4), "ls_signal_max": round(max(signal), 4),
            "sub_steps_over_limit": sum(s > (10.0 if model else LIMIT) for s in signal),
            "threshold_last": thresholds[-1], "threshold_min": min(thresholds), "threshold_max": max(thresholds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="store_true", help="the sim's calibrated interference model, not the stand-in")
    args = ap.parse_args()
    for idle in ((True, False) if args.model else (True,)):
        for policy in ("cpuset", "cfsQuota"):
            for budget in (False, True):
                print(json.dumps(run(policy, budget, model=args.model, idle=idle)))


if __name__ == "__main__":
    main()
