"""Metrics of jobs in a run: gang wait times, preemptions and quota reclaims, per-team quota use over time.

:class:`JobMetrics` is fed by :class:`colo.sim.metrics.RunMetrics` with the events the coordinator sees
(``pod.admitted``, ``pod.bound``, ``pod.evict``, ``quota.status``, ``workload.rejected``) and sampled once
a step; pure bookkeeping, no I/O. Definitions in docs/scenario.md "Jobs in the report". Times in seconds
(virtual), CPU in milli-cores (cores in the report), memory in bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from colo.messages import EvictionCommand, PodAdmitted, PodBound, QuotaStatus, WorkloadRejected

SCHEDULER = "scheduler"
"""``EvictionCommand.by`` of the scheduler's evictions (priority preemption and quota reclaim)."""
RECLAIM_REASON = re.compile(r"quota|reclaim", re.IGNORECASE)
"""An eviction by the scheduler whose reason names the quota (or a reclaim) gives back a quota's min; every
other one (``"Preempted by …"``) is a priority preemption."""


@dataclass
class GangWait:
    """One gang's timeline: ``first_admitted`` (first member's ``PodAdmitted.at``), the members bound so far,
    and ``placed_at`` — the ``PodBound.at`` that brought the distinct bound members to ``min_member``."""

    min_member: int
    first_admitted: float
    bound: set[str] = field(default_factory=set)
    placed_at: float | None = None

    @property
    def wait_s(self) -> float | None:
        """Seconds from the first member admitted to the gang placed (None while it is not)."""
        return None if self.placed_at is None else self.placed_at - self.first_admitted


@dataclass(frozen=True)
class QuotaSample:
    """A quota's state at the end of one step (``t`` virtual seconds): the latest ``QuotaStatus`` seen."""

    t: float
    quota: str
    min: dict[str, int]
    max: dict[str, int]
    used: dict[str, int]
    request: dict[str, int]
    runtime: dict[str, int]
    pods: int
    pending: int


def cpu_key(amounts: dict[str, int]) -> str:
    """The CPU resource a quota is expressed in: ``batch_cpu`` when it names it, else ``cpu``."""
    return "batch_cpu" if "batch_cpu" in amounts else "cpu"


def memory_key(amounts: dict[str, int]) -> str:
    """The memory resource a quota is expressed in: ``batch_memory`` when it names it, else ``memory``."""
    return "batch_memory" if "batch_memory" in amounts else "memory"


@dataclass
class JobMetrics:
    """Gangs, scheduler evictions and quota samples of one run."""

    gangs: dict[str, GangWait] = field(default_factory=dict)
    preemptions: int = 0
    quota_reclaims: int = 0
    eviction_reasons: dict[str, int] = field(default_factory=dict)
    """Scheduler eviction reason (text before any ``:``) → count."""
    workloads_rejected: dict[str, list[str]] = field(default_factory=dict)
    """Workload uid → admission's errors."""
    quota_latest: dict[str, QuotaStatus] = field(default_factory=dict)
    quota_series: list[QuotaSample] = field(default_factory=list)
    victims: dict[str, float] = field(default_factory=dict)
    """Uid of every pod the scheduler ordered out (preemption or reclaim) → the first order's time."""
    victims_rebound: set[str] = field(default_factory=set)
    """Those of :attr:`victims` bound again after their first order."""
    _evicted: set[tuple[str, float]] = field(default_factory=set)

    def on_admitted(self, msg: PodAdmitted) -> None:
        """A pod admitted; the first member of a gang starts its wait."""
        gang = msg.spec.gang
        if gang is None:
            return
        g = self.gangs.get(gang.name)
        if g is None:
            self.gangs[gang.name] = GangWait(min_member=max(1, gang.min_member), first_admitted=msg.at)
        elif msg.at < g.first_admitted:
            g.first_admitted = msg.at

    def on_bound(self, msg: PodBound) -> None:
        """A binding; the gang is placed when ``min_member`` distinct members are bound; a victim bound again."""
        ordered = self.victims.get(msg.spec.uid)
        if ordered is not None and msg.at > ordered:
            self.victims_rebound.add(msg.spec.uid)
        gang = msg.spec.gang
        if gang is None:
            return
        g = self.gangs.setdefault(gang.name, GangWait(min_member=max(1, gang.min_member), first_admitted=msg.at))
        g.bound.add(msg.spec.uid)
        if g.placed_at is None and len(g.bound) >= g.min_member:
            g.placed_at = msg.at

    def on_evict(self, msg: EvictionCommand) -> None:
        """An eviction order; those of the scheduler count, split by reason (:data:`RECLAIM_REASON`). The same
        order seen twice (uid and time) counts once."""
        if msg.by != SCHEDULER or (msg.uid, msg.at) in self._evicted:
            return
        self._evicted.add((msg.uid, msg.at))
        self.victims.setdefault(msg.uid, msg.at)
        if RECLAIM_REASON.search(msg.reason):
            self.quota_reclaims += 1
        else:
            self.preemptions += 1
        key = msg.reason.split(":", 1)[0].strip()
        self.eviction_reasons[key] = self.eviction_reasons.get(key, 0) + 1

    def on_workload_rejected(self, msg: WorkloadRejected) -> None:
        """A workload refused by admission."""
        self.workloads_rejected[msg.uid] = list(msg.errors)

    def on_quota(self, msg: QuotaStatus) -> None:
        """A quota status; the latest per quota is sampled at the end of each step."""
        self.quota_latest[msg.name] = msg

    def sample(self, t: float) -> None:
        """Record every quota's latest status at ``t``."""
        for name in sorted(self.quota_latest):
            q = self.quota_latest[name]
            self.quota_series.append(QuotaSample(t=t, quota=name, min=dict(q.min), max=dict(q.max),
                                                 used=dict(q.used), request=dict(q.request),
                                                 runtime=dict(q.runtime), pods=q.pods, pending=q.pending))

    # ------------------------------------------------------------------ results

    def gang_waits(self) -> list[float]:
        """Wait of every placed gang, seconds."""
        return [w for g in self.gangs.values() if (w := g.wait_s) is not None]

    def summary(self) -> dict[str, float]:
        """``gangs_placed``, ``gangs_waiting`` (admitted, not placed at the end), ``gang_wait_p50_s``/``p95``/
        ``max`` (0 without placed gangs), ``preemptions``, ``quota_reclaims``, ``workloads_rejected``."""
        waits = np.array(self.gang_waits()) if self.gang_waits() else np.zeros(1)
        placed = sum(1 for g in self.gangs.values() if g.placed_at is not None)
        return {
            "gangs_placed": float(placed),
            "gangs_waiting": float(len(self.gangs) - placed),
            "gang_wait_p50_s": float(np.percentile(waits, 50)),
            "gang_wait_p95_s": float(np.percentile(waits, 95)),
            "gang_wait_max_s": float(waits.max()),
            "preemptions": float(self.preemptions),
            "quota_reclaims": float(self.quota_reclaims),
            "workloads_rejected": float(len(self.workloads_rejected)),
        }

    def victim_outcomes(self, completed_at: dict[str, float]) -> dict[str, int]:
        """What became of the scheduler's victims: ``victims`` (pods ordered out), ``rebound`` (bound again
        after their first order), ``completed`` (``Succeeded`` after it, from ``completed_at``: uid → time): a
        preempted pod is requeued and its work is still done, later."""
        done = sum(1 for uid, t in self.victims.items() if completed_at.get(uid, -1.0) > t)
        return {"victims": len(self.victims), "rebound": len(self.victims_rebound), "completed": done}

    def quota_table(self) -> dict[str, dict[str, Any]]:
        """Per quota over the samples, in cores and GiB: ``resources`` (the CPU and memory resource names the
        quota is expressed in, e.g. ``batch_cpu/batch_memory``), ``min_cores``, ``used_avg_cores``, ``used_max_cores``,
        ``runtime_avg_cores``, ``min_gib``, ``used_avg_gib``, ``used_max_gib``, ``runtime_avg_gib`` and
        ``borrowed_ticks`` (samples with CPU or memory used above min)."""
        out: dict[str, dict[str, Any]] = {}
        by_quota: dict[str, list[QuotaSample]] = {}
        for s in self.quota_series:
            by_quota.setdefault(s.quota, []).append(s)
        for name, samples in sorted(by_quota.items()):
            ck, mk = cpu_key(samples[-1].min), memory_key(samples[-1].min)
            used_c = np.array([s.used.get(ck, 0) for s in samples], dtype=float) / 1000.0
            run_c = np.array([s.runtime.get(ck, 0) for s in samples], dtype=float) / 1000.0
            used_m = np.array([s.used.get(mk, 0) for s in samples], dtype=float) / float(1 << 30)
            run_m = np.array([s.runtime.get(mk, 0) for s in samples], dtype=float) / float(1 << 30)
            out[name] = {
                "resources": f"{ck}/{mk}",
                "min_cores": samples[-1].min.get(ck, 0) / 1000.0,
                "used_avg_cores": float(used_c.mean()), "used_max_cores": float(used_c.max()),
                "runtime_avg_cores": float(run_c.mean()),
                "min_gib": samples[-1].min.get(mk, 0) / float(1 << 30),
                "used_avg_gib": float(used_m.mean()), "used_max_gib": float(used_m.max()),
                "runtime_avg_gib": float(run_m.mean()),
                "borrowed_ticks": float(sum(1 for s in samples if s.used.get(ck, 0) > s.min.get(ck, 0)
                                            or s.used.get(mk, 0) > s.min.get(mk, 0))),
            }
        return out

    def quota_rows(self) -> list[dict[str, Any]]:
        """The quota time series as JSON objects, one per (step, quota) (``<run>-quotas.jsonl``)."""
        return [{"t": s.t, "quota": s.quota, "min": s.min, "max": s.max, "used": s.used, "request": s.request,
                 "runtime": s.runtime, "pods": s.pods, "pending": s.pending} for s in self.quota_series]
