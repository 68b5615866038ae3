"""The sim backend runs the BE budget (strategies/be_budget.py) for all its nodes at once: the suppress threshold
follows the LS signal that an interference model reports through ``SimNodes.ls_signal`` (here a stand-in), the
state is published in NodeMetric.be_budget, and without a model every node keeps the static threshold."""

from __future__ import annotations

import msgspec
import numpy as np
import prometheus_client

from colo.messages import BEBudgetStrategy, NodeSLO, NodeSpec, PodSpec, Resources, SimWorkload
from colo_node_agent import metrics
from colo_node_agent.backends.sim import SimBackend, SimConfig
from colo_node_agent.backends.sim_pods import F64
from colo_node_agent.strategies.be_budget import Signal

G = 10**9
CAP = 16_000
ON = BEBudgetStrategy(enabled=True)


def node(name: str) -> NodeSpec:
    cap = Resources(cpu=CAP, memory=64 * G, pods=110)
    return NodeSpec(name=name, capacity=cap, allocatable=cap, cpus=CAP // 1000)


def ls(uid: str) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, requests=Resources(cpu=2000, memory=G),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[1.0], cpu_scale_milli=2000,
                                   memory_util=[1.0], memory_scale_bytes=G))


def be(uid: str) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500,
                   requests=Resources(batch_cpu=1000, batch_memory=G // 10),
                   sim=SimWorkload(kind="batch", cpu_milli=CAP, duration_s=100_000, memory_bytes=G // 10))


class Modelled(SimBackend):
    """A sim whose LS signal per node is set by the test (what an interference model would report)."""

    runq: F64

    def ls_signal(self, kind: Signal) -> F64:
        assert kind == "runq_wait"
        return self.runq


def slo_of(name: str) -> NodeSLO:
    return NodeSLO(node=name, be_budget=ON if name == "on" else BEBudgetStrategy())


def started(cls: type[SimBackend]) -> SimBackend:
    b = cls([node("on"), node("off")], SimConfig(sub_step_s=10.0), slo_of)
    for name in b.names:
        assert b.start_pod(ls(f"ls-{name}"), name)
    return b


def static_allowed(threshold: int) -> int:
    return CAP * threshold // 100 - 2000 - CAP * 2 // 100  # LS 2000 m, system 2 % of capacity


def test_budget_grows_with_the_modelled_signal_and_is_cut_on_a_violation() -> None:
    b = started(Modelled)
    assert isinstance(b, Modelled)
    b.runq = np.array([0.1, 0.1])
    b.advance(40.0)  # BE-free sub-steps: the baseline is learned
    learned = b.node_metrics(40.0)[0].be_budget
    assert learned is not None and (learned.phase, learned.baseline_samples) == ("hold", 4)
    for name in b.names:
        assert b.start_pod(be(f"be-{name}"), name)
    b.advance(100.0)
    on, off = b.node_metrics(100.0)
    assert off.be_budget is None and off.be_cpu_allowed == static_allowed(65)
    assert on.be_budget is not None and on.be_budget.phase == "grow"
    threshold = int(on.be_budget.threshold_percent)
    assert threshold > 65 and on.be_cpu_allowed == static_allowed(threshold)
    b.runq = np.array([0.2, 0.1])  # over 0.1 + 0.02 on node "on": cut to the floor (a severe rise)
    res = b.advance(110.0)
    cut = b.node_metrics(110.0)[0]
    assert cut.be_budget is not None and (cut.be_budget.phase, cut.be_budget.threshold_percent) == ("cut", 65)
    assert cut.be_cpu_allowed == static_allowed(65)
    events = [e for e in res.events if e.kind == "suppress" and e.node == "on"]
    assert events and events[-1].detail["be_budget_phase"] == "cut"


def test_without_an_interference_model_the_static_threshold_holds() -> None:
    b = started(SimBackend)
    for name in b.names:
        assert b.start_pod(be(f"be-{name}"), name)
    b.advance(120.0)
    on, off = b.node_metrics(120.0)
    assert on.be_budget is not None and on.be_budget.phase == "fallback"
    assert on.be_cpu_allowed == off.be_cpu_allowed == static_allowed(65)


def test_switching_the_budget_on_later_starts_at_the_floor() -> None:
    b = started(Modelled)
    assert isinstance(b, Modelled)
    b.runq = np.array([0.1, 0.1])
    b.advance(40.0)
    assert b.node_metrics(40.0)[1].be_budget is None
    assert b.set_slo(msgspec.structs.replace(slo_of("off"), be_budget=ON))
    b.advance(50.0)
    state = b.node_metrics(50.0)[1].be_budget
    assert state is not None and (state.threshold_percent, state.baseline_samples) == (65, 1)


def test_threshold_gauge_follows_the_node_metric() -> None:
    b = started(Modelled)
    assert isinstance(b, Modelled)
    b.runq = np.array([0.1, 0.1])
    b.advance(40.0)
    on, off = b.node_metrics(40.0)
    for m in (on, off):
        metrics.observe_node_metric(m, CAP)
    value = prometheus_client.REGISTRY.get_sample_value
    assert value("colo_node_be_budget_threshold_percent", {"node": "on"}) == 65.0
    assert value("colo_node_be_budget_threshold_percent", {"node": "off"}) is None
    metrics.observe_node_metric(msgspec.structs.replace(on, be_budget=None), CAP)
    assert value("colo_node_be_budget_threshold_percent", {"node": "on"}) is None


class TwoSignals(SimBackend):
    """Run-queue wait 0.1 and CPI 1.5 on every node: two signals in different units."""

    def ls_signal(self, kind: Signal) -> F64:
        return np.full(len(self.names), {"runq_wait": 0.1, "cpi": 1.5}[kind])


def test_a_new_signal_kind_learns_its_own_baseline() -> None:
    """A NodeSLO that changes ``be_budget.signal`` used to keep the baseline learned in the old signal's units:
    a run-queue baseline of 0.1 judged a CPI of 1.5 a severe violation (cut to the floor for good), and the other
    way round a CPI baseline would let any run-queue wait pass."""
    b = started(TwoSignals)
    b.advance(40.0)  # BE-free: the run-queue baseline is learned
    for name in b.names:
        assert b.start_pod(be(f"be-{name}"), name)
    b.advance(100.0)
    grown = b.node_metrics(100.0)[0].be_budget
    assert grown is not None and grown.phase == "grow"
    assert b.set_slo(msgspec.structs.replace(slo_of("on"), be_budget=msgspec.structs.replace(ON, signal="cpi")))
    b.advance(110.0)
    state = b.node_metrics(110.0)[0].be_budget
    assert state is not None and (state.phase, state.threshold_percent) == ("fallback", 65)
    assert (state.baseline, state.baseline_samples) == (-1.0, 0)


def test_debug_state_shows_each_nodes_budget_with_every_field() -> None:
    """``/debug/state`` (``SimBackend.debug``, under ``nodes`` of the service's state) carries each node's budget
    as NodeMetric.be_budget has it, None while the budget is off; encoded as the HTTP route does, a field at its
    default (phase ``fallback``, the signal −1 of a node without an LS pod) is not left out."""
    b = SimBackend([node("on"), node("off")], SimConfig(sub_step_s=10.0), slo_of)
    assert b.start_pod(be("be-on"), "on")  # no LS pod: nothing reports the signal
    b.advance(40.0)
    on, _ = b.node_metrics(40.0)
    state = msgspec.json.decode(msgspec.json.encode(b.debug()))
    assert on.be_budget is not None and state["on"]["be_budget"] == msgspec.structs.asdict(on.be_budget)
    assert state["on"]["be_budget"]["phase"] == "fallback" and state["on"]["be_budget"]["signal"] == -1.0
    assert state["off"]["be_budget"] is None
