"""What the coordinator submits in each step (:mod:`colo.sim.run`): the teams' quotas first, then the pods and
workloads whose arrival time has come (docs/scenario.md "The runs", "Jobs, gangs and teams")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colo import subjects as S
from colo.bus import Bus
from colo.messages import ElasticQuota
from colo.sim.metrics import RunMetrics
from colo.sim.scenario import Scenario

Item = tuple[S.Subject[Any], Any, str, Mapping[str, str]]
"""One publish: (subject, message, msg_id for de-duplication, subject keys)."""


def run_quotas(scenario: Scenario, env: Mapping[str, str]) -> list[ElasticQuota]:
    """The scenario's team quotas for a run with ``env``: ``quotas`` (batch-cpu/batch-memory) when slo-manager
    translates batch pods to batch resources, ``baseline_quotas`` (cpu/memory) when colocation is off
    (``baseline``: its batch pods keep native requests)."""
    if env.get("COLO_SLO_MANAGER_COLOCATION_ENABLED", "1") == "0":
        return list(scenario.baseline_quotas)
    return list(scenario.quotas)


class Submissions:
    """The scenario's arrivals in time order, handed out step by step.

    :meth:`start` publishes the quotas of :func:`run_quotas` (``quota.spec.<name>``, msg_id ``quota-<name>``);
    :meth:`publish_due` publishes every pod (``pod.submitted``, msg_id = uid) and workload
    (``workload.submitted``, msg_id = uid) with arrival ≤ ``now`` not published yet, and records them in
    ``metrics``. Raises BusError as :meth:`colo.bus.Bus.publish_many`.
    """

    def __init__(self, scenario: Scenario, env: Mapping[str, str], metrics: RunMetrics) -> None:
        self.scenario = scenario
        self.env = env
        self.metrics = metrics
        self._pod = 0
        self._workload = 0

    async def start(self, bus: Bus) -> list[ElasticQuota]:
        """Publish the run's quotas (before any job arrives); returns them."""
        quotas = run_quotas(self.scenario, self.env)
        if quotas:
            await bus.publish_many([(S.QUOTA_SPEC, q, f"quota-{q.name}", {"name": q.name}) for q in quotas])
        return quotas

    def due(self, now: float) -> list[Item]:
        """The items that arrived by ``now`` (virtual seconds) and were not handed out yet, recorded as submitted."""
        items: list[Item] = []
        arrivals, workloads = self.scenario.arrivals, self.scenario.workloads
        while self._pod < len(arrivals) and arrivals[self._pod].at <= now:
            a = arrivals[self._pod]
            items.append((S.POD_SUBMITTED, a.pod, a.pod.uid, {}))
            self.metrics.submitted(a.pod, a.at)
            self._pod += 1
        while self._workload < len(workloads) and workloads[self._workload].at <= now:
            w = workloads[self._workload]
            items.append((S.WORKLOAD_SUBMITTED, w.workload, w.workload.uid, {}))
            self.metrics.submitted_workload(w.workload, w.at)
            self._workload += 1
        return items

    async def publish_due(self, bus: Bus, now: float) -> int:
        """Publish :meth:`due` items; returns how many."""
        items = self.due(now)
        if items:
            await bus.publish_many(items)
        return len(items)
