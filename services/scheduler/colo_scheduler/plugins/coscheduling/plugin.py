"""Coscheduling (gang scheduling), after Koordinator's Coscheduling plugin (REFERENCE.md §9).

A pod with :attr:`PodSpec.gang` is a member of a gang of ``min_member``; pods without one pass
every extension point at the cost of one attribute test.

* **QueueSort**: (−priority, the gang's ``created_at`` (the pod's own without a gang), the gang's
  ordinal (0 without a gang; gangs numbered as first seen), the pod's ``created_at``): members of
  one gang of one priority are adjacent in the active queue.
* **Batch** (:class:`~colo_scheduler.framework.interface.BatchPlugin`): when a cycle's batch holds a
  member, every other queued member of its gang and of its gang group (active, backoff or
  unschedulable) joins the batch, so a gang is tried whole and never starves behind its own members.
* **PreFilter**: a gang whose known members (reserved + in the batch) are fewer than ``min_member``
  is UNSCHEDULABLE ("gang ns/g has 3 of 8 members"); so is every member of a gang sent back earlier
  in the cycle. Such members are parked under rejectors no cluster event wakes
  (:data:`MEMBERS_REJECTOR`): they return when another member arrives (its batch takes them) or at
  the queue's timed retry — no busy loop.
* **PostFilter**: a member of a ``Strict`` gang that fits no node while the gang is not satisfied
  sends the gang (and its group) back: every waiting member is unreserved, freeing its room, and the
  gang is parked whole under ``Coscheduling``, woken by :data:`EVENTS` (capacity added or freed).
  ``NonStrict`` gangs keep their waiting members until the timeout.
* **Reserve/Unreserve**: book the member in the gang cache. A waiting member released (timeout,
  deletion) sends a ``Strict`` gang back as well.
* **Permit**: WAIT until ``min_member`` members of the gang — and of every gang of its group — are
  reserved, then allow all waiting members together (they bind in the same cycle). The wait is the
  gang's ``timeout_s`` (default 600 s, no cap) from its first waiting member; at the deadline every
  waiting member is released.
"""

from __future__ import annotations

import math

from colo.messages import GangSpec
from colo_scheduler.framework.interface import (
    NODE_ADD,
    NODE_RESOURCE,
    POD_DELETE,
    SUCCESS,
    UNSCHEDULABLE,
    WAIT,
    CycleState,
    SchedulerHandle,
    Status,
)
from colo_scheduler.plugins.coscheduling.cache import Gang, GangCache
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import NodeTable

NAME = "Coscheduling"

EVENTS = frozenset({NODE_ADD, NODE_RESOURCE, POD_DELETE})
"""Events that wake a gang sent back for want of room (a node metric never adds room)."""

MEMBERS_REJECTOR = "Coscheduling.members"
"""Rejector of members parked for want of members: no plugin has this name, so no cluster event wakes
them; a new member's batch takes them back (or the queue's timed retry)."""

_OK = Status(SUCCESS)


class Coscheduling:
    """The gang plugin: QueueSort, Batch, PreFilter, PostFilter, Reserve, Permit (module docstring)."""

    name = NAME
    events: frozenset[str] = EVENTS

    def __init__(self) -> None:
        self.cache = GangCache()
        self._ordinal: dict[str, int] = {}
        self._handle: SchedulerHandle | None = None
        self._cycle = 0
        self._now = 0.0
        self._touched: dict[str, Gang] = {}

    # ------------------------------------------------------------------ QueueSort

    def sort_key(self, pod: PodInfo) -> tuple[float, ...]:
        """(−priority, gang created_at or created_at, gang ordinal or 0, created_at)."""
        spec = pod.spec
        gs = spec.gang
        if gs is None:
            return (-float(pod.priority), spec.created_at, 0, spec.created_at)
        k = self._ordinal.get(gs.name)
        if k is None:
            k = self._ordinal[gs.name] = len(self._ordinal) + 1
        return (-float(pod.priority), gs.created_at, k, spec.created_at)

    # ------------------------------------------------------------------ Batch

    def attach(self, handle: SchedulerHandle) -> None:
        """Keep the core's handle (waiting pods, queue)."""
        self._handle = handle

    def complete_batch(self, pods: list[PodInfo], now: float) -> list[PodInfo]:
        """``pods`` plus every other queued member of the gangs (and gang groups) they hold, in
        QueueSort order; ``pods`` itself when no pod has a gang."""
        self._cycle += 1
        self._now = now
        self._touched = {}
        cycle = self._cycle
        touched = self._touched
        for p in pods:
            gs = p.spec.gang
            if gs is None:
                continue
            g = self._in_batch(gs)
            g.batch.add(p.uid)
            g.members.add(p.uid)
        if not touched:
            return pods
        for g in list(touched.values()):
            for k in self.cache.group_keys(g.spec):
                other = self.cache.gangs.get(k)
                if other is not None and other.name not in touched:
                    self._in_batch(other.spec)
        extra: list[PodInfo] = []
        handle = self._handle
        for g in touched.values():
            for uid in list(g.members):
                if uid in g.batch or uid in g.placed:
                    continue
                q = handle.take_queued(uid) if handle is not None else None
                if q is None:
                    g.members.discard(uid)  # left the queue for good (bound elsewhere, deleted)
                else:
                    extra.append(q)
                    g.batch.add(uid)
            assert g.batch_cycle == cycle
        if not extra:
            return pods
        key = self.sort_key
        return sorted(pods + extra, key=lambda p: (*key(p), p.uid))

    def _in_batch(self, spec: GangSpec) -> Gang:
        g = self.cache.get(spec)
        if g.batch_cycle != self._cycle:
            g.batch_cycle = self._cycle
            g.batch = set()
            self._touched[g.name] = g
        return g

    def end_batch(self, now: float) -> None:
        """Send back a ``Strict`` gang, not satisfied, with a member of the batch left unplaced for any
        reason (a PreFilter of another plugin, e.g. a quota, runs no PostFilter); park the members of
        gangs sent back (under ``Coscheduling``) or short of members (under :data:`MEMBERS_REJECTOR`)
        in this cycle; forget gangs with no member left."""
        handle = self._handle
        for g in list(self._touched.values()):  # a Strict member left unplaced by any plugin (a quota, say)
            if g.spec.mode == "Strict" and g.waiting and g.sent_back_cycle != self._cycle:
                missed = next((u for u in g.batch if u not in g.placed), None)
                if missed is not None and not all(x is not None and x.satisfied for x in self.cache.group(g.spec)):
                    self._send_back(g.spec, now, f"gang {g.name}: member {missed} was not placed; the gang was sent back")
        for g in self._touched.values():
            if handle is not None and g.sent_back_cycle == self._cycle:
                rejectors, reasons = frozenset({NAME}), {g.sent_back_reason: 1}
            elif handle is not None and g.short_cycle == self._cycle:
                rejectors = frozenset({MEMBERS_REJECTOR})
                reasons = {self._short_reason(g): 1}
            else:
                self.cache.drop_if_empty(g)
                continue
            for uid in g.members:
                if uid not in g.placed:
                    handle.park(uid, now, rejectors, reasons)
        self._touched = {}

    def _park(self, g: Gang, rejectors: frozenset[str], reason: str) -> None:
        """Re-park ``g``'s members in the unschedulable pool under ``rejectors``."""
        if self._handle is not None:
            for uid in g.members:
                if uid not in g.placed:
                    self._handle.park(uid, self._now, rejectors, {reason: 1})

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """None without a gang; UNSCHEDULABLE when the gang (or a gang of its group) was sent back in
        this cycle, has not shown ``min_member`` members yet, or its group names a gang none of
        whose members is known."""
        gs = pod.spec.gang
        if gs is None:
            return None
        g = self.cache.get(gs)
        g.members.add(pod.uid)
        cycle = self._cycle
        for k in self.cache.group_keys(gs):
            other = g if k == g.name else self.cache.gangs.get(k)
            if other is None:
                g.short_cycle = cycle
                return Status(UNSCHEDULABLE, f"gang {g.name}: gang {k} of its group has no members yet")
            if other.sent_back_cycle == cycle:
                return Status(UNSCHEDULABLE, other.sent_back_reason)
            known = other.known(cycle) if other.batch_cycle == cycle else max(other.known(cycle), 1)
            if known < other.spec.min_member:
                g.short_cycle = cycle
                return Status(UNSCHEDULABLE, self._short_reason(other))
        return None

    def _short_reason(self, g: Gang) -> str:
        """Why ``g`` is short of members: in a cycle's batch, the members it could place; outside one (a
        ``--live`` dry run of one member), that one member is tried alone while the gang is placed whole."""
        if g.batch_cycle == self._cycle:
            return f"gang {g.name} has {g.known(self._cycle)} of {g.spec.min_member} members"
        return (f"gang {g.name}: {len(g.placed)} of {g.spec.min_member} members placed, {len(g.members)} known; "
                "a dry run tries one member alone (the gang is placed together in a cycle)")

    # ------------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: PodInfo, reasons: dict[str, int]) -> int | None:
        """Send a ``Strict`` gang back when a member fits no node and the group is not satisfied;
        never nominates a node."""
        gs = pod.spec.gang
        if gs is None or gs.mode != "Strict":
            return None
        group = self.cache.group(gs)
        if all(x is not None and x.satisfied for x in group):
            return None
        self._send_back(gs, state.now, f"gang {gs.name}: member {pod.spec.name or pod.uid} fits no node; "
                                       "the gang was sent back")
        return None

    def _send_back(self, gs: GangSpec, now: float, reason: str) -> None:
        """Mark every gang of ``gs``'s group sent back in this cycle and release its waiting members."""
        for x in self.cache.group(gs):
            if x is None:
                continue
            x.sent_back_cycle = self._cycle
            x.sent_back_reason = reason
            x.deadline = math.inf
            waiting, x.waiting = x.waiting, set()
            if self._handle is not None:
                for uid in waiting:
                    self._handle.reject_waiting(uid, now, reason)

    # ------------------------------------------------------------------ Reserve

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Count the member as reserved."""
        gs = pod.spec.gang
        if gs is not None:
            g = self.cache.get(gs)
            g.placed.add(pod.uid)
            g.members.add(pod.uid)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Uncount the member; a waiting member released sends a ``Strict`` gang back."""
        gs = pod.spec.gang
        if gs is None:
            return
        g = self.cache.gangs.get(gs.name)
        if g is None:
            return
        g.placed.discard(pod.uid)
        if pod.uid in g.waiting:
            g.waiting.discard(pod.uid)
            if not g.waiting:
                g.deadline = math.inf
            reason = f"gang {gs.name}: member {pod.spec.name or pod.uid} was released while waiting"
            if gs.mode == "Strict":
                self._send_back(gs, self._now, reason + "; the gang was sent back")
            # the members parked for room must not wake on the room the gang itself gave back
            self._park(g, frozenset({NAME}), reason)

    # ------------------------------------------------------------------ Permit

    def permit(self, state: CycleState, pod: PodInfo, node: int) -> Status:
        """SUCCESS without a gang or once the gang and its group have ``min_member`` reserved each
        (every waiting member of the group is allowed then); else WAIT until the gang's deadline."""
        gs = pod.spec.gang
        if gs is None:
            return _OK
        self._now = state.now
        g = self.cache.get(gs)
        group = self.cache.group(gs)
        if all(x is not None and x.satisfied for x in group):
            handle = self._handle
            for x in group:
                assert x is not None
                waiting, x.waiting = x.waiting, set()
                x.deadline = math.inf
                if handle is not None:
                    for uid in waiting:
                        handle.allow(uid)
            return _OK
        if g.deadline == math.inf:
            g.deadline = state.now + gs.timeout_s
        g.waiting.add(pod.uid)
        short = [(x.name if x else k, len(x.placed) if x else 0, x.spec.min_member if x else "?")
                 for k, x in zip(self.cache.group_keys(gs), group) if x is None or not x.satisfied]
        if [n for n, _, _ in short] == [g.name]:
            what = f"{short[0][1]} of {short[0][2]} placed"
        else:
            what = ", ".join(f"{n} {k} of {m} placed" for n, k, m in short)
        return Status(WAIT, f"waiting for gang {g.name}: {what}", max(0.0, g.deadline - state.now))
