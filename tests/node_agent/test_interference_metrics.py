"""The node's LS interference gauges on /metrics: max and mean over LS pods of each known signal, in the
gauges' units; unknown signals (−1), BE and SYSTEM pods do not count; no series once no LS pod knows one."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from colo import telemetry
from colo.messages import InterferenceSignals, NodeMetric, PodMetric, Usage
from colo_node_agent import metrics

NODE = "sig-node"


def pod(uid: str, qos: str, sig: InterferenceSignals | None) -> PodMetric:
    return PodMetric(uid=uid, cpu=100, memory=1, qos_class=qos, interference=sig)  # type: ignore[arg-type]


def metric(*pods: PodMetric) -> NodeMetric:
    return NodeMetric(node=NODE, at=1.0, window_s=60.0, node_usage=Usage(cpu=1, memory=1),
                      system_usage=Usage(), pods=list(pods))


def value(name: str, stat: str) -> float | None:
    return telemetry.registry().get_sample_value(name, {"node": NODE, "stat": stat})


@dataclass(frozen=True)
class Case:
    name: str
    pods: tuple[PodMetric, ...]
    want: dict[str, tuple[float, float] | None]
    """gauge name → (max, mean), None = no series."""


S = InterferenceSignals
RUNQ, PSI, CPI, LAT = ("colo_node_ls_runq_wait_ratio", "colo_node_ls_cpu_pressure_ratio",
                       "colo_node_ls_cycles_per_instruction", "colo_node_ls_latency_inflation_ratio")
CASES = [
    Case("two LS pods", (pod("a", "LS", S(runq_wait_ratio=0.2, cpu_pressure_some=10.0)),
                         pod("b", "LSR", S(runq_wait_ratio=1.0, cpu_pressure_some=30.0))),
         {RUNQ: (1.0, 0.6), PSI: (0.3, 0.2), CPI: None, LAT: None}),
    Case("unknown values skipped", (pod("a", "LS", S(runq_wait_ratio=-1.0, cpi=2.0)),
                                    pod("b", "LSE", S(runq_wait_ratio=0.5, cpi=-1.0))),
         {RUNQ: (0.5, 0.5), PSI: None, CPI: (2.0, 2.0), LAT: None}),
    Case("BE and SYSTEM pods do not count", (pod("a", "BE", S(runq_wait_ratio=5.0)),
                                             pod("s", "SYSTEM", S(runq_wait_ratio=5.0)),
                                             pod("b", "LS", S(latency_inflation_percent=12.0))),
         {RUNQ: None, PSI: None, CPI: None, LAT: (0.12, 0.12)}),
    Case("no signals (sim, signals off): no series", (pod("a", "LS", None),),
         {RUNQ: None, PSI: None, CPI: None, LAT: None}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_ls_interference_gauges(case: Case) -> None:
    metrics.observe_node_metric(metric(pod("x", "LS", S(1, 1, 1, 1))), 1000)  # a previous report's series
    metrics.observe_node_metric(metric(*case.pods), 1000)
    for name, want in case.want.items():
        got = (value(name, "max"), value(name, "mean"))
        if want is None:
            assert got == (None, None), name
        else:
            assert got == pytest.approx(want), name
