"""Modelled interference on the ``sim`` backend's nodes (docs/scenario.md "The interference model").

After each sub-step's CPU sharing, :meth:`SimInterference.step` asks the :class:`InterferenceModel` for every
node at once what the BE cores used do to its LS pods under the isolation applied (the BE group's ``cpu.idle``
as read back from the node's cgroup tree, i.e. NodeSLO ``be_cpu_idle``): their p99 latency inflation and
interference signals, and the share of their CPU demand they are served. The values are kept for the
sub-step (:meth:`ls_signal`, the seam of the SLO-driven BE budget) and over the NodeMetric window
(:meth:`window`, ``PodMetric.interference`` of the LS pods). Without a model nothing is harmed and every
signal is −1.
"""

from __future__ import annotations

import numpy as np

from colo.messages import InterferenceSignals
from colo_node_agent.backends.interference_model import Harm, InterferenceModel
from colo_node_agent.backends.sim_pods import BOOL, F64
from colo_node_agent.windows import Ring

SIGNAL_FIELDS: dict[str, str] = {"runq_wait": "runq_wait_ratio", "cpu_pressure": "cpu_pressure_some",
                                 "cpi": "cpi", "latency_inflation": "p99_inflation_pct"}
""":meth:`SimInterference.ls_signal` kinds (NodeSLO ``be_budget.signal`` names, plus the modelled p99
inflation) → the :class:`Harm` field."""
WINDOW_FIELDS: tuple[str, ...] = ("p99_inflation_pct", "runq_wait_ratio", "cpu_pressure_some", "cpi")

STAT_KEYS: tuple[str, ...] = ("ls_p99_inflation_mean_pct", "ls_p99_inflation_max_pct", "ls_runq_wait_ratio",
                              "ls_cpu_pressure_some")
"""Tick stats of the model (:meth:`SimInterference.sums`): over LS pods, the mean and max modelled p99
inflation (percent), the mean run-queue wait ratio and PSI ``cpu.some`` (percent); −1 without a model (or
for a signal the table does not know), 0 while no LS pod runs."""


class SimInterference:
    """Per-node modelled interference for ``nodes`` nodes, windows of ``window_n`` sub-steps; ``model`` None =
    no harm, signals −1. Arrays ``(nodes,)``."""

    def __init__(self, nodes: int, window_n: int, model: InterferenceModel | None) -> None:
        self.model = model
        self.window_n = window_n
        unknown = np.full(nodes, -1.0)
        self.last = Harm(unknown, unknown, unknown, unknown, unknown)
        """The last sub-step's model output (−1 where no LS pod runs)."""
        self.rings = {name: Ring(nodes, window_n) for name in WINDOW_FIELDS}
        self.present = Ring(nodes, window_n)
        """1 for the sub-steps in which the node ran an LS pod (the windows average over those only)."""

    def step(self, be_used: F64, cap_cpu: F64, be_idle: BOOL, has_ls: BOOL) -> F64:
        """Model one sub-step: ``be_used`` BE milli-cores used, ``cap_cpu`` node capacity (milli-cores),
        ``be_idle`` BE group SCHED_IDLE, ``has_ls`` the node runs an LS pod. Returns the share of their demand
        the LS pods of each node are served (1 without a model)."""
        if self.model is None:
            return np.ones_like(be_used)
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(cap_cpu > 0, be_used / cap_cpu, 0.0)
        harm = self.model.predict(fraction, be_idle)
        self.last = Harm(*(np.where(has_ls, getattr(harm, f), -1.0) for f in
                           ("p99_inflation_pct", "p50_inflation_pct", "runq_wait_ratio", "cpu_pressure_some",
                            "cpi")))
        for name, ring in self.rings.items():
            ring.push(np.where(has_ls, getattr(harm, name), 0.0))
        self.present.push(has_ls.astype(np.float64))
        return harm.served_fraction()

    def ls_signal(self, kind: str) -> F64:
        """Per node ``(nodes,)``: the LS pods' modelled signal ``kind`` in the last sub-step — ``runq_wait``
        (s waited for a CPU per s run), ``cpu_pressure`` (PSI ``cpu.some``, percent), ``cpi``, or
        ``latency_inflation`` (p99, percent); −1 where no LS pod runs, without a model, or for a signal the
        calibration does not know. Raises ValueError for another kind."""
        field = SIGNAL_FIELDS.get(kind)
        if field is None:
            raise ValueError(f"unknown LS signal {kind!r}: expected one of {', '.join(SIGNAL_FIELDS)}")
        out: F64 = getattr(self.last, field).copy()
        return out

    def window(self) -> list[InterferenceSignals | None]:
        """Per node: the LS pods' signals averaged over the sub-steps of the NodeMetric window in which the
        node ran an LS pod (a signal the table lacks −1); None without a model or without such a
        sub-step."""
        if self.model is None:
            return [None] * self.present.data.shape[0]
        n = self.window_n
        count = self.present.last(n).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            means = {name: np.where(count > 0, ring.last(n).sum(axis=1) / count, -1.0).tolist()
                     for name, ring in self.rings.items()}
        out: list[InterferenceSignals | None] = []
        for i, c in enumerate(count.tolist()):
            if c <= 0:
                out.append(None)
                continue
            v = {name: float(means[name][i]) for name in WINDOW_FIELDS}  # an unknown signal averages its −1s
            out.append(InterferenceSignals(runq_wait_ratio=v["runq_wait_ratio"],
                                           cpu_pressure_some=v["cpu_pressure_some"], cpi=v["cpi"],
                                           latency_inflation_percent=v["p99_inflation_pct"]))
        return out

    def sums(self, ls_pods: F64) -> dict[str, float]:
        """This sub-step's :data:`STAT_KEYS` over the LS pods (``ls_pods`` LS pods per node ``(nodes,)``)."""
        if self.model is None:
            return dict.fromkeys(STAT_KEYS, -1.0)
        total = float(ls_pods.sum())
        if total <= 0:
            return dict.fromkeys(STAT_KEYS, 0.0)
        on = ls_pods > 0
        h = self.last

        def mean(values: F64) -> float:
            return -1.0 if bool((values[on] < 0).any()) else float((values * ls_pods).sum() / total)

        return {"ls_p99_inflation_mean_pct": mean(h.p99_inflation_pct),
                "ls_p99_inflation_max_pct": float(h.p99_inflation_pct[on].max()),
                "ls_runq_wait_ratio": mean(h.runq_wait_ratio), "ls_cpu_pressure_some": mean(h.cpu_pressure_some)}
