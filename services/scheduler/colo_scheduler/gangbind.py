"""Binding a gang all together: the placements of one gang group go to the cycle's one
:meth:`colo.store.Store.bind_many` call as :class:`~colo.store.BindRequest` with ``group`` =
:func:`group_key` (:func:`bind_requests`), which the store binds all-or-nothing. :func:`settle_gang_binds`
then makes sure of it whatever path a member took (a member bound on a reservation binds alone):
when any member of a group was refused, the members that were bound are released again (allocation
freed, record Pending and unbound) and every member is reported refused, so the service sends the
whole gang back to the queue (``bind_failed`` on each: Unreserve + backoff) and no part stays bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from colo.messages import PodRecord
from colo.store import BindRequest, BindResult
from colo_scheduler.core import Placement
from colo_scheduler.plugins.coscheduling import group_key
from colo_scheduler.podinfo import ASSIGNED_CPUSET, ASSIGNED_DEVICES, PodInfo


def bind_requests(placements: Sequence[Placement], now: float,
                  quotas: Callable[[PodInfo], tuple[str, ...]] = lambda pod: ()) -> list[BindRequest]:
    """The store binds of ``placements`` at ``now``, each charged to ``quotas(pod)`` (its quota chain);
    a gang member's carries ``group`` = its gang group's key (:func:`group_key`), a pod with a cpuset chosen at
    Reserve its ``cpuset`` (:data:`ASSIGNED_CPUSET`), a pod with GPUs its ``devices`` (:data:`ASSIGNED_DEVICES`)."""
    return [BindRequest(p.pod.uid, p.node, p.pod.spec.requests, now, quotas(p.pod),
                        group_key(p.pod.spec.gang) if p.pod.spec.gang is not None else "",
                        str(p.pod.extra.get(ASSIGNED_CPUSET) or ""), str(p.pod.extra.get(ASSIGNED_DEVICES) or ""))
            for p in placements]


def gang_groups(placements: Sequence[Placement]) -> dict[str, list[int]]:
    """Indices of the placements of each gang group (pods without a gang are left out)."""
    groups: dict[str, list[int]] = {}
    for k, p in enumerate(placements):
        gs = p.pod.spec.gang
        if gs is not None:
            groups.setdefault(group_key(gs), []).append(k)
    return groups


def settle(placements: Sequence[Placement], results: Sequence[BindResult]) -> tuple[list[BindResult], list[int]]:
    """All-or-nothing per gang group: the results with every bound member of a group with a refused
    member turned into a refusal naming that member, and the indices of those members (bound in the
    store: to be released). Results of pods without a gang are unchanged."""
    out = list(results)
    undo: list[int] = []
    for key, ks in gang_groups(placements).items():
        refused = next((k for k in ks if not results[k].ok), None)
        if refused is None:
            continue
        reason = (f"gang {key}: member {placements[refused].pod.uid} refused ({results[refused].reason}); "
                  "no member bound")
        for k in ks:
            if results[k].ok:
                out[k] = BindResult(False, reason)
                undo.append(k)
    return out, undo


async def settle_gang_binds(store: Any, placements: Sequence[Placement], results: Sequence[BindResult],
                            now: float) -> list[BindResult]:
    """:func:`settle`, releasing in ``store`` (a :class:`colo.store.Store`) the members bound of a
    refused gang: allocation freed, record back to Pending with no node and the refusal as reason.
    Raises RedisError on I/O failure."""
    out, undo = settle(placements, results)
    for k in undo:
        p = placements[k]
        await store.release(p.pod.uid, "Pending", out[k].reason, now)
        await store.put_pod(PodRecord(spec=p.pod.spec, phase="Pending", reason=out[k].reason, updated_at=now))
    return out
