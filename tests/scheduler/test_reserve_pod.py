"""The reserve pod a node-less reservation is placed as (:func:`colo_scheduler.reservations_intake.reserve_pod`):
it carries the classes of the pods the room is for, so QoSAdmission (REFERENCE.md §1) lets batch room through."""

from __future__ import annotations

import pytest

from colo.classes import priority_class_of, qos_class_of, resource_kind_problems, validate_classes
from colo.manifests import parse_manifest
from colo.messages import ReservationOwner, ReservationSpec, Resources
from colo_scheduler.reservations_intake import reserve_pod

GI = 1 << 30
OWNER = [ReservationOwner(owner_kind="Job", owner_name="train", namespace="ml")]

BATCH_MANIFEST = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: batch-room, namespace: ml}
spec:
  template:
    metadata:
      labels: {koordinator.sh/qosClass: BE}
    spec:
      priorityClassName: koord-batch
      containers:
      - resources: {requests: {kubernetes.io/batch-cpu: "16000", kubernetes.io/batch-memory: 32Gi}}
  owners:
  - controller: {kind: Job, name: train}
    namespace: ml
"""


def _problems(spec: ReservationSpec) -> list[str]:
    pod = reserve_pod(spec)
    return validate_classes(pod) + resource_kind_problems(pod)


def test_a_manifest_reservation_of_batch_room_carries_its_templates_classes() -> None:
    (spec,) = parse_manifest(BATCH_MANIFEST).reservations
    assert (spec.qos_class, spec.priority_class, spec.labels.get("koordinator.sh/qosClass")) == (None, "batch", "BE")
    pod = reserve_pod(spec)
    assert (qos_class_of(pod), pod.priority_class, pod.priority) == ("BE", "batch", 5500)
    assert _problems(spec) == []


@pytest.mark.parametrize(("requests", "qos", "prio"), [
    pytest.param(Resources(batch_cpu=4000, batch_memory=8 * GI), "BE", "batch", id="batch-derives-BE"),
    pytest.param(Resources(mid_cpu=2000, mid_memory=GI), "LS", "mid", id="mid-derives-mid"),
    pytest.param(Resources(cpu=4000, memory=8 * GI), "LS", "prod", id="native-unchanged"),
])
def test_a_reservation_without_classes_derives_them_from_its_requests(requests: Resources, qos: str,
                                                                      prio: str) -> None:
    spec = ReservationSpec(name="r", namespace="ml", requests=requests, owners=OWNER)
    pod = reserve_pod(spec)
    assert (qos_class_of(pod), priority_class_of(pod)) == (qos, prio)
    assert _problems(spec) == []


def test_explicit_classes_are_kept_even_when_invalid() -> None:
    """An explicit LS on batch room is the user's mistake: kept, so the scheduler names it."""
    spec = ReservationSpec(name="r", requests=Resources(batch_cpu=1000), owners=OWNER, qos_class="LS")
    assert any("must be BE, got LS" in p for p in _problems(spec))
