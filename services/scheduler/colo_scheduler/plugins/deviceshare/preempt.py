"""DeviceShare under preemption: the victim simulation's view of the GPU bookings, the candidate pre-screen, and
the hold of a nominated preemptor's GPUs (docs/gpu.md "Preemption"; the counterpart of Koordinator DeviceShare's
``RemovePod``/``AddPod`` pre-filter extensions, which free a victim's devices in the cycle state before the filter
is re-run, and of Kubernetes counting nominated pods in the filters of pods of lower priority).

A **hold** books the GPUs a nominated preemptor will take, under the key :func:`hold_key`, from the nomination
until its next attempt: the victims' GPUs stay booked twice while they leave (free below 0 there, so no pod fits
them) and once after, so a pod placed meanwhile never takes them.

Units: milli-GPU per device (1000 = a whole GPU). The simulation writes :attr:`NodeGPUs.free` of one node and its row of the
plugin's compiled arrays in place and leaves the versions alone: the preemption plugin restores every change exactly before it returns,
and only the filter (which memoises nothing) reads the bookings meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from colo.messages import GPURequest
from colo_scheduler.plugins.deviceshare.book import NodeGPUs
from colo_scheduler.plugins.deviceshare.state import GPU_MILLI, IntArray


def simulate(gpus: NodeGPUs | None, uid: str, sign: int, row_free: IntArray | None = None) -> None:
    """Free (``sign`` = +1) or re-book (−1) the milli-GPU pod ``uid`` holds on ``gpus``, in place, and the same in
    ``row_free`` ((MAX_GPUS,) the node's row of the plugin's compiled arrays, which its Filter reads); a pod
    holding nothing there (a CPU pod) changes nothing."""
    if gpus is None:
        return
    for pos, milli in gpus.pods.get(uid, ()):
        gpus.free[pos] += sign * milli
        if row_free is not None:
            row_free[pos] += sign * milli


HOLD_PREFIX = "nominated:"
"""Prefix of the booking key of a hold (never a pod uid: uids have no colon)."""


def hold_key(uid: str) -> str:
    """The booking key of pod ``uid``'s hold."""
    return HOLD_PREFIX + uid


def hold_devices(gpus: NodeGPUs, allowed: Sequence[int], req: GPURequest,
                 victims: Iterable[str]) -> tuple[tuple[int, int], ...]:
    """((position, milli), ...) the preemptor would take on ``gpus`` once the pods ``victims`` (uids) left: a
    GPU share the tightest fitting ``allowed`` GPU, whole GPUs the lowest-indexed fully free ones (the Reserve
    rules of the plugin without its score); empty when even then it does not fit."""
    free = gpus.free.copy()
    for uid in victims:
        for pos, milli in gpus.pods.get(uid, ()):
            free[pos] += milli
    fitting = [p for p in allowed if free[p] >= req.milli]
    if len(fitting) < req.count:
        return ()
    if req.count == 1 and req.milli < GPU_MILLI:
        return ((min((int(free[p]), p) for p in fitting)[1], req.milli),)
    return tuple((p, req.milli) for p in fitting[:req.count])


def reachable(gpus: NodeGPUs, allowed: Sequence[int], req: GPURequest,
              priority_of: Callable[[str], int | None], below: int) -> bool:
    """Whether ``req`` could fit on ``gpus`` if every pod of priority below ``below`` left: at least ``req.count``
    ``allowed`` positions whose free milli plus the milli such pods hold there reach ``req.milli``
    (``priority_of``: a booked uid's priority, None when not assigned — its share stays). A bound: protected
    or unbound pods are counted as removable."""
    room = {p: int(gpus.free[p]) for p in allowed}
    for uid, held in gpus.pods.items():
        prio = priority_of(uid)
        if prio is None or prio >= below:
            continue
        for pos, milli in held:
            if pos in room:
                room[pos] += milli
    return sum(1 for r in room.values() if r >= req.milli) >= req.count


def candidate_rows(nodes: Iterable[tuple[int, NodeGPUs]], allowed_of: Callable[[NodeGPUs], Sequence[int]],
                   req: GPURequest, priority_of: Callable[[str], int | None], below: int) -> list[int]:
    """Rows of ``nodes`` ((row, GPUs) pairs) :func:`reachable` keeps; the capacity bound comes first (a node with
    fewer than ``req.count`` GPUs of an allowed model is never a candidate, without looking at its pods)."""
    out = []
    for row, gpus in nodes:
        allowed = allowed_of(gpus)
        if len(allowed) >= req.count and reachable(gpus, allowed, req, priority_of, below):
            out.append(row)
    return out
