"""Reservation owner matching: one table, checked by the Python rule, the scheduler plugin's index and (see
tests/integration/test_reservation_owners_store.py) the store's bind script; and submission validation."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from colo.messages import NodeSpec, OwnerReference, PodSpec, ReservationOwner, ReservationSpec, Resources
from colo.reservation_spec import owner_matches, reservation_problems
from colo.reservations import REASON_NOT_OWNER, Reservation, ReservationStore
from colo.store import Store

JOB = OwnerReference(kind="Job", name="train", uid="job-uid")


def pod(uid: str = "p1", namespace: str = "ml", app: str = "", labels: dict[str, str] | None = None,
        owner: OwnerReference | None = None) -> PodSpec:
    return PodSpec(uid=uid, name=uid, namespace=namespace, app=app, labels=labels or {}, owner=owner,
                   requests=Resources(cpu=100))


@dataclass(frozen=True)
class OwnerCase:
    name: str
    owner: ReservationOwner
    pod: PodSpec
    matches: bool


OWNER_CASES = [
    OwnerCase("uid-equal", ReservationOwner(uid="p1"), pod(), True),
    OwnerCase("uid-other", ReservationOwner(uid="p2"), pod(), False),
    OwnerCase("workload-from-app", ReservationOwner(workload="ml/web"), pod(app="web"), True),
    OwnerCase("workload-from-app-label", ReservationOwner(workload="ml/web"), pod(labels={"app": "web"}), True),
    OwnerCase("workload-other-namespace", ReservationOwner(workload="shop/web"), pod(app="web"), False),
    OwnerCase("controller-kind-and-name", ReservationOwner(owner_kind="Job", owner_name="train"), pod(owner=JOB),
              True),
    OwnerCase("controller-name-differs", ReservationOwner(owner_kind="Job", owner_name="eval"), pod(owner=JOB),
              False),
    OwnerCase("controller-kind-differs", ReservationOwner(owner_kind="StatefulSet", owner_name="train"),
              pod(owner=JOB), False),
    OwnerCase("controller-on-a-bare-pod", ReservationOwner(owner_kind="Job"), pod(), False),
    OwnerCase("labels-subset", ReservationOwner(match_labels={"team": "a"}),
              pod(labels={"team": "a", "tier": "x"}), True),
    OwnerCase("labels-value-differs", ReservationOwner(match_labels={"team": "a"}), pod(labels={"team": "b"}),
              False),
    OwnerCase("labels-missing-one", ReservationOwner(match_labels={"team": "a", "tier": "x"}),
              pod(labels={"team": "a"}), False),
    OwnerCase("namespace-and-labels", ReservationOwner(namespace="ml", match_labels={"team": "a"}),
              pod(labels={"team": "a"}), True),
    OwnerCase("namespace-differs", ReservationOwner(namespace="shop", match_labels={"team": "a"}),
              pod(labels={"team": "a"}), False),
    OwnerCase("every-set-field-must-match", ReservationOwner(uid="p1", workload="ml/db"), pod(app="web"), False),
    OwnerCase("empty-owner-matches-nothing", ReservationOwner(), pod(), False),
]


@pytest.mark.parametrize("case", OWNER_CASES, ids=[c.name for c in OWNER_CASES])
def test_owner_matches(case: OwnerCase) -> None:
    assert owner_matches(case.owner, case.pod) is case.matches
    rsv = Reservation(name="r", node="n1", owners=(ReservationOwner(uid="nobody"), case.owner))
    assert rsv.matches(case.pod) is case.matches  # any owner of the list


@pytest.mark.parametrize("case", OWNER_CASES, ids=[c.name for c in OWNER_CASES])
def test_scheduler_plugin_offers_exactly_the_matching_reservations(case: OwnerCase) -> None:
    from colo_scheduler.core import Scheduler
    from colo_scheduler.settings import SchedulerSettings

    s = Scheduler(SchedulerSettings(seed=1))
    rsv = Reservation(name="r", node="n1", owners=(case.owner,), expires_at=1e9)
    s.reservations.set_reservations([rsv, Reservation(name="other", node="n1", owner_uid="x", expires_at=1e9)])
    got = s.reservations.matching(s.pod_info(case.pod, 0.0))
    assert [r.name for r in got] == (["r"] if case.matches else [])


@pytest.mark.integration
@pytest.mark.parametrize("case", OWNER_CASES, ids=[c.name for c in OWNER_CASES])
async def test_store_bind_script_agrees(store: Store, case: OwnerCase) -> None:
    alloc = Resources(cpu=4000, memory=2**33)
    await store.put_node(NodeSpec(name="n1", capacity=alloc, allocatable=alloc))
    rs = ReservationStore(store.redis, store.keys)
    if not case.matches and case.owner == ReservationOwner():
        with pytest.raises(ValueError, match="each selecting something"):
            await rs.reserve("r", "n1", Resources(cpu=500), at=0.0, ttl_s=60, owners=(case.owner,))
        return
    assert (await rs.reserve("r", "n1", Resources(cpu=500), at=0.0, ttl_s=60, owners=(case.owner,))).ok
    got = await rs.bind_on("r", case.pod, "n1", 1.0)
    assert got.ok is case.matches, got.reason
    if not case.matches:
        assert got.reason.startswith(REASON_NOT_OWNER)
    rec = await rs.get("r")
    assert rec is not None and rec.owners == (case.owner,)


def test_legacy_owner_fields_still_match() -> None:
    rsv = Reservation(name="mig", node="n1", owner_uid="batch-1", owner_workload="default/batch")
    assert rsv.matches(pod(uid="batch-1", namespace="x"))
    assert rsv.matches(pod(uid="other", namespace="default", app="batch"))
    assert not rsv.matches(pod(uid="other", namespace="default", app="web"))


def spec(**kw: object) -> ReservationSpec:
    base: dict[str, object] = {"name": "r1", "requests": Resources(cpu=1000),
                               "owners": [ReservationOwner(workload="ml/web")]}
    return ReservationSpec(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("submitted", "problems"),
    [
        pytest.param(spec(), [], id="valid"),
        pytest.param(spec(name="Bad_Name"), ["name: 'Bad_Name' is not a Kubernetes object name"], id="name"),
        pytest.param(spec(requests=Resources(cpu=-1)), ["requests.cpu: must be within 0.."], id="negative"),
        pytest.param(spec(requests=Resources(pods=2)), ["requests.pods: a reservation holds one pod slot"],
                     id="pods"),
        pytest.param(spec(owners=[]), ["owners: at least one owner is needed"], id="no-owner"),
        pytest.param(spec(owners=[ReservationOwner(uid="a"), ReservationOwner()]),
                     ["owners[1]: sets none of"], id="empty-owner"),
        pytest.param(spec(ttl_s=0.0), ["ttl_s: must be a finite number of seconds > 0"], id="ttl"),
        pytest.param(spec(name="", owners=[], ttl_s=float("inf")),
                     ["name:", "owners:", "ttl_s:"], id="every-problem-listed"),
    ],
)
def test_reservation_problems(submitted: ReservationSpec, problems: list[str]) -> None:
    got = reservation_problems(submitted)
    assert len(got) == len(problems)
    for g, p in zip(got, problems):
        assert g.startswith(p)


def test_the_example_manifest_passes_the_schedulers_checks() -> None:
    """`colo submit examples/reservation.yaml` publishes what the scheduler's intake accepts."""
    from pathlib import Path

    from colo.manifests import load_manifest

    manifest = load_manifest(Path(__file__).parents[2] / "examples" / "reservation.yaml", now=100.0)
    assert manifest.reservations
    for r in manifest.reservations:
        assert reservation_problems(r) == [], r


def test_the_example_reservation_is_for_the_example_jobs_pods() -> None:
    """examples/reservation.yaml holds what examples/job-gang.yaml's pods ask for: they own it, its room covers
    their requests kind for kind, and its reserve pod passes the scheduler's QoS checks."""
    from pathlib import Path

    from colo.classes import resource_kind_problems, validate_classes
    from colo.manifests import load_manifest
    from colo.reservations import Reservation
    from colo.workloads import expand
    from colo_scheduler.plugins.reservation import covers
    from colo_scheduler.podinfo import resource_vector
    from colo_scheduler.reservations_intake import reserve_pod

    examples = Path(__file__).parents[2] / "examples"
    (spec,) = load_manifest(examples / "reservation.yaml", now=100.0).reservations
    (job,) = load_manifest(examples / "job-gang.yaml", now=100.0).workloads
    stored = Reservation(name=spec.name, node="n1", owners=tuple(spec.owners), held=spec.requests)
    rp = reserve_pod(spec)
    assert validate_classes(rp) + resource_kind_problems(rp) == []
    for p in expand(job, range(2)):
        assert stored.matches(p)
        assert covers(resource_vector(p.requests), resource_vector(spec.requests), spec.requests)
        assert spec.requests == p.requests
