"""Reservations as submitted (REFERENCE.md §9; Koordinator ``Reservation``): room to hold ahead of time for
future pods of an owner. The store side lives in :mod:`colo.reservations`."""

from __future__ import annotations

from colo.messages.base import Message, PriorityClass, QoSClass
from colo.messages.resources import Resources


class ReservationOwner(Message, frozen=True):
    """Who may consume a reservation; a pod matches when every set field matches it: ``uid`` (a pod uid),
    ``workload`` (``namespace/app``), ``owner_kind``/``owner_name`` (its :class:`~colo.messages.OwnerReference`),
    ``match_labels`` (all of them, and ``namespace`` when set)."""

    uid: str = ""
    workload: str = ""
    owner_kind: str = ""
    owner_name: str = ""
    namespace: str = ""
    match_labels: dict[str, str] = {}


class ReservationSpec(Message, frozen=True):
    """A Reservation as submitted (subject ``reservation.submitted``).

    ``requests`` (milli-cores, bytes) held on ``node``, or on the node the scheduler picks for it when ""
    (as for a pod of those requests); a pod matching any of ``owners`` prefers and consumes it.
    ``allocate_once`` False keeps it for the owners' next pods (a reusable reservation gets the room of a
    consuming pod back when the pod ends). ``ttl_s`` > 0: it expires that long after ``created_at``.
    ``node_selector`` restricts the nodes the scheduler may pick. ``labels``, ``priority``, ``priority_class``
    and ``qos_class`` are the template's (a ``Reservation``'s ``spec.template``): the reserve pod the scheduler
    places carries them, so a reservation of ``batch-*`` room is placed as the BE pod it holds room for (None =
    derive as for a pod, with ``batch-*`` requests deriving BE / batch; ``colo_scheduler.reservations_intake``)."""

    name: str
    namespace: str = "default"
    node: str = ""
    requests: Resources = Resources()
    owners: list[ReservationOwner] = []
    allocate_once: bool = True
    ttl_s: float = 3600.0
    node_selector: dict[str, str] = {}
    created_at: float = 0.0
    labels: dict[str, str] = {}
    priority: int | None = None
    priority_class: PriorityClass | None = None
    qos_class: QoSClass | None = None
