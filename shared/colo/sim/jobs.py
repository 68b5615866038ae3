"""Batch tasks as jobs: a v2017 task becomes one ``Job`` whose pods form one gang, owned by a team with an
elastic quota; a few tasks are high-priority jobs (docs/scenario.md "Jobs, gangs and teams").

Pure functions over the pods :mod:`colo.sim.scenario` builds for a task; no I/O. A Job's pods are named by
admission (``<name>-<index>``, :class:`~colo.messages.WorkloadSpec`), so the scenario describes the Job and
its template only. Amounts in milli-cores and bytes, times in seconds.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass

from colo.messages import (
    DEFAULT_GANG_TIMEOUT_S,
    QUOTA_NAME_LABEL,
    ElasticQuota,
    NodeSpec,
    PodGroupSpec,
    PodSpec,
    Resources,
    WorkloadSpec,
)

TEAM_LABEL = "colo.sim/team"
"""Pod label naming the team (quota) a job belongs to, next to :data:`QUOTA_NAME_LABEL`."""
PRIORITY_LABEL = "colo.sim/priority"
"""Pod label ``high`` on the pods of high-priority jobs."""
HIGH_PRIORITY = 5900
"""Priority of the high-priority jobs: the top of koord-batch (REFERENCE.md §1, 5000–5999), above the batch
tasks' 5500. They stay batch (QoS BE, batch resources in ``colo``) and compete with the other batch pods for the
same room, so when it is taken they preempt lower-priority batch pods (Koordinator's preemption within the batch
class); a koord-prod job would take native room batch does not hold in ``colo`` and seldom need to preempt."""
BATCH_KEYS = ("batch_cpu", "batch_memory")
"""Quota resources where slo-manager translates batch pods to batch resources (the ``colo`` run)."""
NATIVE_KEYS = ("cpu", "memory")
"""Quota resources where batch pods keep native requests (``baseline``: colocation off)."""
BATCH_RECLAIM_FRACTION = (0.60, 0.65)
"""slo-manager's default ``reclaimThresholdPercent`` for CPU and memory (REFERENCE.md §3): batch is offered
below capacity × this."""
SIM_SYSTEM_FRACTION = (0.02, 0.04)
"""System usage of a simulated node, CPU and memory, as fractions of capacity (the node agent's sim backend
defaults, ``system_cpu_fraction`` / ``system_memory_fraction``)."""


@dataclass(frozen=True)
class JobParams:
    """The job modelling's part of :class:`~colo.sim.scenario.ScenarioParams` (see its docstring)."""

    teams: int
    gang_large_members: int
    gang_large_min_fraction: float
    high_priority_fraction: float
    high_priority_after_fraction: float
    quota_min_fraction: float
    quota_max_factor: float
    seed: int


def team_names(teams: int) -> list[str]:
    """``team-a``, ``team-b``, … (``teams`` ≤ 26)."""
    return [f"team-{chr(ord('a') + i)}" for i in range(teams)]


def team_of(job_id: str, teams: int) -> str:
    """The team of a v2017 job: CRC-32 of the job id modulo ``teams`` (stable across runs and Python
    versions; every task of a job belongs to the job's team, as a DAG of one team)."""
    return team_names(teams)[zlib.crc32(job_id.encode()) % teams]


def gang_min_member(members: int, large: int, fraction: float) -> int:
    """``min_member`` of a gang of ``members`` pods: all of them up to ``large`` members, else
    ``ceil(fraction × members)`` (never below ``large``): a task of hundreds of instances makes progress
    with part of them, as a Spark stage with dynamic allocation does."""
    if members <= large:
        return members
    return max(large, math.ceil(fraction * members))


def high_priority_tasks(keys: list[tuple[str, float]], fraction: float, after_s: float, seed: int) -> set[str]:
    """The task keys (of ``(key, arrival_s)``) chosen as high-priority jobs: ``max(1, round(fraction × n))``
    of the n tasks arriving at or after ``after_s`` (0 when ``fraction`` is 0 or none arrives then), drawn by
    ``Random(f"{seed}-high-priority")`` from the keys in sorted order. Late arrivals meet a busy cluster,
    where a high-priority job has to preempt to run."""
    if fraction <= 0:
        return set()
    eligible = sorted(k for k, at in keys if at >= after_s)
    if not eligible:
        return set()
    n = min(len(eligible), max(1, round(fraction * len(eligible))))
    return set(random.Random(f"{seed}-high-priority").sample(eligible, n))


def make_job(pods: list[PodSpec], job_id: str, task_id: str, team: str, high: bool, at: float,
             p: JobParams) -> WorkloadSpec:
    """The ``Job`` of one task from the (identical) pods the scenario built for it.

    ``parallelism = completions = len(pods)``; with two or more pods a ``pod_group`` of
    :func:`gang_min_member` members, Strict, the default 600 s timeout (REFERENCE.md §9). A high-priority job
    is koord-batch at :data:`HIGH_PRIORITY` (class batch, QoS BE as the other batch pods: translated to batch
    resources in ``colo``). Raises ValueError when ``pods`` is empty.
    """
    if not pods:
        raise ValueError(f"task {job_id}-{task_id} has no pods")
    first = pods[0]
    name = f"job-{job_id}-{task_id}"
    labels = {**first.labels, TEAM_LABEL: team, QUOTA_NAME_LABEL: team}
    if high:
        labels[PRIORITY_LABEL] = "high"
    template = PodSpec(
        uid=name, name=name, namespace=first.namespace, labels=labels,
        priority=HIGH_PRIORITY if high else first.priority, priority_class="batch" if high else None,
        qos_class=first.qos_class, requests=first.requests, limits=first.limits,
        app=first.app, created_at=at, sim=first.sim,
    )
    group = None
    if len(pods) >= 2:
        group = PodGroupSpec(uid=f"pg-{name}", name=name, namespace=first.namespace,
                             min_member=gang_min_member(len(pods), p.gang_large_members, p.gang_large_min_fraction),
                             timeout_s=DEFAULT_GANG_TIMEOUT_S, mode="Strict", created_at=at)
    return WorkloadSpec(kind="Job", uid=f"batch-{job_id}-{task_id}", name=name, namespace=first.namespace,
                        labels={TEAM_LABEL: team}, parallelism=len(pods), completions=len(pods),
                        template=template, pod_group=group, created_at=at)


def batch_pool(nodes: list[NodeSpec], ls_pods: list[PodSpec]) -> Resources:
    """What the online pods' requests leave of the cluster's allocatable (cpu milli-cores, memory bytes): the
    room batch runs in without co-location (``baseline``)."""
    cpu = sum(n.allocatable.cpu for n in nodes) - sum(p.requests.cpu for p in ls_pods)
    memory = sum(n.allocatable.memory for n in nodes) - sum(p.requests.memory for p in ls_pods)
    return Resources(cpu=max(0, cpu), memory=max(0, memory))


def batch_offer_estimate(nodes: list[NodeSpec], ls_pods: list[PodSpec]) -> Resources:
    """The batch resources slo-manager can be expected to offer over the run (``colo``), from the scenario alone:
    REFERENCE.md §3's ``usage`` policy summed over the cluster — Σ capacity × :data:`BATCH_RECLAIM_FRACTION` −
    Σ capacity × :data:`SIM_SYSTEM_FRACTION` − Σ the online pods' mean usage over the run (their series × limit;
    a pod without a series counts at its request). Milli-cores and bytes, floored at 0. An estimate for setting
    quotas ahead of time, as an operator would: the offer itself moves with the online load."""
    totals = []
    for k, (attr, scale_attr, util_attr) in enumerate((("cpu", "cpu_scale_milli", "cpu_util"),
                                                        ("memory", "memory_scale_bytes", "memory_util"))):
        cap = sum(getattr(n.capacity, attr) for n in nodes)
        used = 0.0
        for p in ls_pods:
            series = getattr(p.sim, util_attr) if p.sim is not None else []
            used += (sum(series) / len(series) * getattr(p.sim, scale_attr) if series and p.sim is not None
                     else getattr(p.requests, attr))
        totals.append(max(0, int(cap * (BATCH_RECLAIM_FRACTION[k] - SIM_SYSTEM_FRACTION[k]) - used)))
    return Resources(cpu=totals[0], memory=totals[1])


def team_quotas(pool: Resources, teams: int, min_fraction: float, max_factor: float,
                keys: tuple[str, str] = BATCH_KEYS, at: float = 0.0) -> list[ElasticQuota]:
    """One ``ElasticQuota`` per team, children of the root, on ``keys`` (CPU, memory resource names): ``min`` an
    equal share of ``min_fraction`` × ``pool``, ``max`` = ``max_factor`` × min (capped at the pool). The mins
    leave part of the pool unguaranteed, the maxes reach into it: a busy team borrows what is not guaranteed or
    what an idle team does not use, and an idle one reclaims its min when its jobs come (REFERENCE.md §8).
    Selected by the :data:`QUOTA_NAME_LABEL` label on the jobs' pods."""
    out = []
    totals = (pool.cpu, pool.memory)
    for team in team_names(teams):
        mins = {key: math.floor(total * min_fraction) // teams for key, total in zip(keys, totals)}
        maxs = {key: min(total, math.floor(mins[key] * max_factor)) for key, total in zip(keys, totals)}
        out.append(ElasticQuota(name=team, parent="", min=mins, max=maxs, created_at=at))
    return out
