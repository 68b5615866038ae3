"""Valid messages per consumed subject (the seeds the mutations start from) and the subject keys to use.

:data:`CASES` maps each subject pattern some service consumes to a :class:`Case`. A service that starts
consuming a new subject makes ``test_every_consumed_subject_has_a_fuzz_case`` fail until a case is added here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from colo import messages as m
from colo import subjects
from colo.subjects import Subject

G = 10**9
NODES = ("n1", "n2")
"""The node agent's nodes (its consumers filter on them)."""
NODE_TOKENS = ("n1", "n2", "n1", "n2", "n3", "ghost")
"""Subject tokens for ``{node}``: mostly the agent's nodes, sometimes a node nobody runs."""

CAP = m.Resources(cpu=8000, memory=16 * G, pods=110)


def _node(rng: random.Random) -> str:
    return rng.choice(NODES)


def _uid(rng: random.Random) -> str:
    return f"p{rng.randrange(40)}"  # few uids: duplicates and replays of the same pod are common


def _pod(rng: random.Random) -> m.PodSpec:
    uid = _uid(rng)
    if rng.random() < 0.5:
        return m.PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500,
                         requests=m.Resources(cpu=rng.choice([100, 500, 1000]), memory=G),
                         limits=m.Resources(cpu=1000, memory=G),
                         sim=m.SimWorkload(kind="series", step_s=60, cpu_util=[0.5, 0.2], cpu_scale_milli=1000,
                                           memory_util=[0.5], memory_scale_bytes=G), app="web")
    return m.PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500, priority_class="batch",
                     requests=m.Resources(batch_cpu=rng.choice([500, 2000]), batch_memory=G),
                     limits=m.Resources(batch_cpu=2000, batch_memory=G),
                     sim=m.SimWorkload(kind="batch", cpu_milli=500, memory_bytes=G // 2, duration_s=60))


def _metric(rng: random.Random) -> m.NodeMetric:
    n = _node(rng)
    return m.NodeMetric(node=n, at=1000.0 + rng.randrange(600),
                        node_usage=m.Usage(cpu=rng.randrange(8000), memory=rng.randrange(16) * G),
                        system_usage=m.Usage(cpu=500, memory=G),
                        pods=[m.PodMetric(uid=_uid(rng), cpu=rng.randrange(2000), memory=G)])


def _podgroup(rng: random.Random) -> m.PodGroupSpec:
    name = f"g{rng.randrange(10)}"
    return m.PodGroupSpec(uid=name, name=name, min_member=rng.randint(1, 4))


def _workload(rng: random.Random) -> m.WorkloadSpec:
    name = f"w{rng.randrange(10)}"
    return m.WorkloadSpec(kind=rng.choice(["Deployment", "StatefulSet", "Job"]), uid=name, name=name,
                          replicas=rng.randint(1, 3), template=_pod(rng))


def _quota(rng: random.Random) -> m.ElasticQuota:
    return m.ElasticQuota(name=f"q{rng.randrange(5)}", namespaces=["default"],
                          min={"cpu": 1000}, max={"cpu": rng.choice([2000, 8000])})


def _migration(rng: random.Random) -> m.PodMigrationJob:
    uid = _uid(rng)
    return m.PodMigrationJob(id=f"mig-{uid}-1000", uid=uid, source="n1", target="n2",
                             phase=rng.choice(["Pending", "Running", "Succeeded", "Failed", "Aborted"]),
                             created_at=1000.0)


@dataclass(frozen=True)
class Case:
    """How to make valid messages for one subject and which subject keys to publish them on."""

    subject: Subject[Any]
    valid: Callable[[random.Random], Any]
    keys: Callable[[random.Random, Any], dict[str, str]]


def _no_keys(_: random.Random, __: Any) -> dict[str, str]:
    return {}


def _node_key(rng: random.Random, msg: Any) -> dict[str, str]:
    """Usually the message's own node, sometimes another (a report on the wrong subject)."""
    own = getattr(msg, "node", "")
    if rng.random() < 0.8 and isinstance(own, str) and own in NODES:
        return {"node": own}
    return {"node": rng.choice(NODE_TOKENS)}


def _case(subject: Subject[Any], valid: Callable[[random.Random], Any],
          keys: Callable[[random.Random, Any], dict[str, str]] = _no_keys) -> Case:
    return Case(subject, valid, keys)


CASES: dict[str, Case] = {c.subject.pattern: c for c in (
    _case(subjects.POD_SUBMITTED, _pod),
    _case(subjects.POD_ADMITTED, lambda r: m.PodAdmitted(spec=_pod(r), at=1000.0)),
    _case(subjects.POD_BOUND, lambda r: m.PodBound(spec=_pod(r), node=_node(r), at=1000.0), _node_key),
    _case(subjects.POD_STATUS, lambda r: m.PodStatus(uid=_uid(r), node=_node(r),
                                                     phase=r.choice(["Running", "Succeeded", "Failed"]),
                                                     at=1000.0 + r.randrange(100)), _node_key),
    _case(subjects.POD_EVICT, lambda r: m.EvictionCommand(uid=_uid(r), node=_node(r), reason="fuzz", at=1000.0),
          _node_key),
    _case(subjects.POD_DELETED, lambda r: m.PodDeleted(uid=_uid(r), at=1000.0, by="fuzz")),
    _case(subjects.NODE_REGISTERED, lambda r: m.NodeSpec(name=_node(r), capacity=CAP, allocatable=CAP, cpus=8),
          lambda r, msg: {"node": msg.name if r.random() < 0.8 else r.choice(NODE_TOKENS)}),
    _case(subjects.NODE_DELETED, lambda r: m.NodeDeleted(node=r.choice(NODE_TOKENS), at=1000.0, by="fuzz",
                                                         force=r.random() < 0.5), _node_key),
    _case(subjects.NODE_RESOURCE, lambda r: m.NodeResource(node=_node(r), at=1000.0, batch_cpu=r.randrange(8000),
                                                           batch_memory=r.randrange(8) * G), _node_key),
    _case(subjects.NODE_SLO, lambda r: m.NodeSLO(node=_node(r), at=1000.0), _node_key),
    _case(subjects.NODE_METRIC, _metric, _node_key),
    _case(subjects.PROFILE_NODE, lambda r: m.NodeProfile(node=_node(r), at=1000.0,
                                                         prod_reclaimable=m.Usage(cpu=r.randrange(4000))),
          _node_key),
    _case(subjects.MIGRATION, _migration, lambda r, msg: {"phase": msg.phase}),
    _case(subjects.WORKLOAD_SUBMITTED, _workload),
    _case(subjects.PODGROUP_SUBMITTED, _podgroup),
    _case(subjects.RESERVATION_SUBMITTED,
          lambda r: m.ReservationSpec(name=f"r{r.randrange(5)}", requests=m.Resources(cpu=500, memory=G),
                                      owners=[m.ReservationOwner(match_labels={"app": "web"})])),
    _case(subjects.QUOTA_SPEC, _quota, lambda r, msg: {"name": msg.name}),
)}
