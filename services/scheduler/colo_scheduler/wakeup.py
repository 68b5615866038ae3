"""The cluster events the scheduler core is told of (nodes, node resources, metrics, the store's allocation
sums) and the queueing hints that wake the unschedulable pods a change may help (Kubernetes QueueingHint).
Part of :class:`colo_scheduler.core.Scheduler`, which sets the state below at construction and provides
``_held_on`` (:class:`colo_scheduler.waiting.PermitWaiting`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from colo.messages import NodeMetric, NodeResource, NodeSpec, Resources
from colo_scheduler.framework.classcache import class_key
from colo_scheduler.framework.interface import NODE_ADD, NODE_METRIC, NODE_RESOURCE, POD_DELETE, CycleState
from colo_scheduler.framework.runner import Framework
from colo_scheduler.hints import fits_any_row
from colo_scheduler.outcome import NOMINATION
from colo_scheduler.plugins.bememorypressure import BEMemoryPressure
from colo_scheduler.plugins.coscheduling import Coscheduling
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare
from colo_scheduler.plugins.loadaware import LoadAware
from colo_scheduler.plugins.maxinstance import MaxInstancePerNode
from colo_scheduler.plugins.nodeaffinity import NodeAffinity
from colo_scheduler.plugins.nodenumaresource import NodeNUMAResource
from colo_scheduler.plugins.noderesources import NodeResourcesFit
from colo_scheduler.plugins.nodeselector import NodeSelector
from colo_scheduler.plugins.nodeunschedulable import NodeUnschedulable
from colo_scheduler.plugins.preemption import Nominator
from colo_scheduler.plugins.qosadmission import QoSAdmission
from colo_scheduler.plugins.reservation import Nomination
from colo_scheduler.plugins.tainttoleration import TaintToleration
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.queue import SchedulingQueue
from colo_scheduler.table import NodeTable

EQUIVALENCE_FILTERS = (NodeSelector, NodeAffinity, TaintToleration, NodeResourcesFit, MaxInstancePerNode,
                       LoadAware, NodeUnschedulable, BEMemoryPressure, NodeNUMAResource, DeviceShare)
"""Filters whose verdict depends only on :func:`equivalence_key` and on table state that a
cycle only fills (Reserve adds requests, estimates, app counts, cpusets and GPU bookings; nothing is freed)."""

EQUIVALENCE_PRE_FILTERS = (QoSAdmission, NodeAffinity, Coscheduling, NodeNUMAResource)
"""PreFilters whose verdict depends only on the pod's spec (so on :func:`equivalence_key`) within a
cycle (Coscheduling: the gang is part of the spec, and its verdict holds for every member of a cycle;
NodeNUMAResource: the resource-spec annotation)."""


def equivalence_key(pod: PodInfo) -> bytes:
    """The pod's scheduling class (:func:`colo_scheduler.framework.classcache.class_key`): two pods
    with equal keys pass exactly the same nodes in the same table state."""
    return class_key(pod)


class ClusterEvents:
    """The node-event and queueing-hint part of :class:`colo_scheduler.core.Scheduler`."""

    table: NodeTable
    framework: Framework
    queue: SchedulingQueue
    nominator: Nominator | None
    interest: dict[str, frozenset[str]]
    hint_stats: dict[str, int]
    _filter_names: frozenset[str]
    _equivalence: bool
    _dirty_rows: set[int]
    _events: set[str]
    _held_on: Callable[[], dict[int, list[PodInfo]]]

    def node_changed(self, row: int, event: str) -> None:
        """Record that node ``row`` may accept more pods after ``event``; the next cycle wakes the
        unschedulable pods that now pass every filter on it (:meth:`wake_helped`)."""
        self._dirty_rows.add(row)
        self._events.add(event)

    def on_node(self, spec: NodeSpec, now: float) -> bool:
        """Register or update a node; moves pods waiting for node changes. True when changed."""
        changed = self.table.upsert_node(spec)
        if changed:
            self.node_changed(self.table.index[spec.name], NODE_ADD)
        return changed

    def remove_node(self, name: str) -> bool:
        """Take deleted node ``name`` out of the candidates (:meth:`NodeTable.retire`); False when unknown or
        already removed. Its pods must have been released first."""
        changed = self.table.retire(name)
        if changed:
            self.node_changed(self.table.index[name], NODE_RESOURCE)
        return changed

    def on_node_resource(self, nr: NodeResource, now: float) -> bool:
        """Apply batch/mid allocatable; moves pods waiting for it. True when changed."""
        changed = self.table.set_node_resource(nr)
        if changed:
            self.node_changed(self.table.index[nr.node], NODE_RESOURCE)
        return changed

    def on_metric(self, metric: NodeMetric, now: float) -> bool:
        """Apply a node metric; moves pods the load filter rejected. True when applied."""
        applied = self.table.set_metric(metric)
        if applied:
            self.node_changed(self.table.index[metric.node], NODE_METRIC)
        return applied

    def set_allocated(self, node: str, allocated: Resources, pods: int) -> None:
        """Overwrite a node's allocation with the store's sums (``pods`` = number of pods); a node
        whose free amount grew in any column counts as changed (pods released elsewhere)."""
        i = self.table.index.get(node)
        if i is None:
            return
        before = self.table.free[i].copy()
        self.table.set_allocated(node, allocated, pods)
        for pod in self._held_on().get(i, ()):  # held at Permit: reserved here, not in the store's sums yet
            nominated = pod.extra.get(NOMINATION)
            self.table.add_allocated(i, pod.request - nominated.use if isinstance(nominated, Nomination) else pod.request)
        held = self.nominator.held_on(i) if self.nominator else None
        if held is not None:  # the store does not know the room held for preemptors
            self.table.add_allocated(i, held)
        if bool((self.table.free[i] > before).any()):
            self.node_changed(i, POD_DELETE)

    def wake_helped(self, state: CycleState, now: float) -> int:
        """Move back the unschedulable pods the changes since the last cycle may help; returns how many.

        Pods rejected by filters only wake when they now pass every filter on a changed node
        (:func:`colo_scheduler.hints.fits_any_row`, at ``state``); pods rejected otherwise (a
        PreFilter, no nodes) keep the event rule: wake when a rejecting plugin registered one of
        the events seen. The queue's timed retry stays the safety net (time-driven changes such
        as metric expiry)."""
        rows, events = self._dirty_rows, self._events
        self._dirty_rows, self._events = set(), set()
        pool = self.queue.unschedulable
        if not pool or not events:
            return 0
        hinted = []
        wake: list[str] = []
        for uid, u in pool.items():
            if u.rejectors and u.rejectors <= self._filter_names:
                hinted.append(u.pod)
            elif not u.rejectors or any(e in self.interest.get(r, frozenset()) for r in u.rejectors
                                        for e in events):
                wake.append(uid)
        if hinted and rows:
            row_arr = np.fromiter(sorted(rows), np.intp, len(rows))
            if self._equivalence:  # equal pods pass the same nodes: check one per equivalence class
                groups: dict[bytes, list[PodInfo]] = {}
                for p in hinted:
                    groups.setdefault(equivalence_key(p), []).append(p)
                classes = list(groups.values())
                ok = fits_any_row(self.framework.profile.filter, state, [g[0] for g in classes], row_arr)
                helped = {p.uid for k in np.flatnonzero(ok) for p in classes[k]}
                wake.extend(p.uid for p in hinted if p.uid in helped)
            else:
                ok = fits_any_row(self.framework.profile.filter, state, hinted, row_arr)
                wake.extend(hinted[k].uid for k in np.flatnonzero(ok))
        moved = self.queue.wake(wake, now)
        self.hint_stats["woken"] += moved
        self.hint_stats["skipped"] += len(pool)  # pods still parked after the move
        return moved
