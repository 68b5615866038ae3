"""The descheduler's view of the cluster, kept fresh from events (no I/O).

Holds node allocatable (NodeSpec), the latest NodeMetric per node, bound pods, the
migrations in flight, their bookings and the time-window limits. Turns them into
LowNodeLoad inputs. A migration *runs* from the eviction until its replacement is
reported Running on another node, or until the job TTL passes; only running
migrations count against the per-node cap and a workload's max unavailable
(REFERENCE.md §11). Its *booking* (booking.py) lasts until the metrics show the
move; the limiter (limits.py) counts it while it runs and for a window after.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from colo.classes import priority_class_of, qos_class_of
from colo.messages import (
    NodeMetric,
    NodeResource,
    NodeSpec,
    PodBound,
    PodSpec,
    PodStatus,
    PriorityClass,
    QoSClass,
    Resources,
)
from colo_descheduler.booking import Booking, base_usage, covered, has_node_figure
from colo_descheduler.departures import Departure, departure_from
from colo_descheduler.limits import LimitKey, MigrationLimiter
from colo_descheduler.lownodeload import Candidate, Eviction, NodeLoad, max_unavailable, node_is_high
from colo_descheduler.settings import DeschedulerSettings
from colo_descheduler.targetroom import Room, TargetRoom, requests_of

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""Kubernetes system-critical priority: such pods are never evicted."""


@dataclass
class PodEntry:
    """A bound pod: its spec, node, phase and the time it was bound (seconds).

    ``candidate`` caches what a round needs of the spec (``evictable`` and the
    :class:`Candidate` ordering fields), derived once per binding since a bound spec
    does not change; ``workload`` is :func:`workload_of` the spec.
    """

    spec: PodSpec
    node: str
    phase: str
    bound_at: float
    workload: str = field(init=False)
    evictable: bool = field(init=False)
    priority_class: PriorityClass = field(init=False)
    qos_class: QoSClass = field(init=False)
    usage: tuple[int, int] = (0, 0)
    """(cpu m, memory B) of the pod in the newest metric of its node that listed it ((0, 0) before any)."""

    def __post_init__(self) -> None:
        self.workload = workload_of(self.spec)
        self.evictable = evictable(self.spec)
        self.priority_class = priority_class_of(self.spec)
        self.qos_class = qos_class_of(self.spec)


@dataclass(frozen=True)
class Migration:
    """A pod evicted from ``source`` towards ``target``, started at ``started_at`` seconds."""

    uid: str
    source: str
    target: str
    workload: str
    started_at: float
    usage: tuple[int, int] = (0, 0)


def workload_of(spec: PodSpec) -> str:
    """``namespace/app`` of the owning workload ("" for a standalone pod)."""
    app = spec.app or spec.labels.get("app", "")
    return f"{spec.namespace}/{app}" if app else ""


def evictable(spec: PodSpec) -> bool:
    """Not a DaemonSet, mirror or static pod, not SYSTEM QoS, not system-critical priority.

    Local storage is a setting (``evict_local_storage_pods``), checked by :meth:`ClusterView.candidates_on`.
    """
    if spec.daemonset or spec.mirror or spec.static or qos_class_of(spec) == "SYSTEM":
        return False
    return (spec.priority or 0) < SYSTEM_CRITICAL_PRIORITY


class LazyCandidates(Mapping[str, list[Candidate]]):
    """node → evictable candidates (see :meth:`ClusterView.candidates`), each built when first read."""

    def __init__(self, view: ClusterView, nodes: list[str]) -> None:
        self._view = view
        self._nodes = nodes
        self._known = set(nodes)
        self._built: dict[str, list[Candidate]] = {}

    def __getitem__(self, node: str) -> list[Candidate]:
        if node not in self._known:
            raise KeyError(node)
        built = self._built.get(node)
        if built is None:
            built = self._built[node] = self._view.candidates_on(node)
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


class ClusterView:
    """Nodes, fresh metrics, pods and migrations as the descheduler sees them."""

    def __init__(self, settings: DeschedulerSettings | None = None) -> None:
        self.settings = settings or DeschedulerSettings()
        self.allocatable: dict[str, tuple[int, int]] = {}
        self.metrics: dict[str, NodeMetric] = {}
        self.pods: dict[str, PodEntry] = {}
        self.migrations: dict[str, Migration] = {}
        self.bookings: dict[str, Booking] = {}
        self.pods_allocatable: dict[str, int] = {}
        self.no_target: set[str] = set()
        self.departures: dict[tuple[str, str], Departure] = {}
        """(uid, node) → a pod that left that node by itself, whose share its metrics still hold
        (departures.py)."""
        self.relieved_at: dict[str, tuple[float, bool]] = {}
        """node → (when a migration last evicted a pod off it, whether a round saw it not high since) for
        ``relief_hold_s``."""
        self.limiter = MigrationLimiter(self.settings, max_unavailable)
        self.room = TargetRoom()
        """Targets' schedulable room as the store checks it (targetroom.py)."""
        self._allocated: dict[str, Room] | None = None
        """This round's allocations per node (built at the first :meth:`fits`, dropped by :meth:`fresh_loads`)."""

    # ------------------------------------------------------------------ events

    def on_node(self, spec: NodeSpec) -> None:
        """A node registration: remember its allocatable (cpu m, memory B, pods) and whether it may be a
        migration target (not unschedulable; a NoSchedule/NoExecute taint is checked per pod, :meth:`fits`)."""
        self.allocatable[spec.name] = (spec.allocatable.cpu, spec.allocatable.memory)
        self.pods_allocatable[spec.name] = spec.allocatable.pods
        self.room.on_node(spec)
        if spec.unschedulable:
            self.no_target.add(spec.name)
        else:
            self.no_target.discard(spec.name)

    def on_metric(self, metric: NodeMetric) -> None:
        """Keep the newest metric per node (older, replayed reports are ignored)."""
        old = self.metrics.get(metric.node)
        if old is None or metric.at >= old.at:
            self.metrics[metric.node] = metric
            for pm in metric.pods:  # kept per pod: its status may be handled before or after this metric
                entry = self.pods.get(pm.uid)
                if entry is not None and entry.node == metric.node:
                    entry.usage = (max(pm.cpu, 0), max(pm.memory, 0))

    def on_bound(self, msg: PodBound) -> None:
        """A binding; a pod bound elsewhere than its migration source is its replacement: the booking moves
        to that node from then on (the migration runs until the replacement is Running). An evicted pod bound
        again on its source ends its migration and its booking."""
        self.pods[msg.spec.uid] = PodEntry(msg.spec, msg.node, "Pending", msg.at)
        self.room.release(msg.spec.uid)  # the replacement is bound: counted as a bound pod from now on
        booking = self.bookings.get(msg.spec.uid)
        if booking is not None and booking.source != msg.node and booking.bound_at is None:
            booking.bound_node, booking.bound_at = msg.node, msg.at
            if booking.left_at is None:
                booking.left_at = msg.at
        elif booking is not None and booking.source == msg.node and booking.bound_at is None \
                and booking.left_at is not None and msg.at >= booking.left_at:
            # evicted and bound again on its source: the migration is over, and the source's metric, which
            # lists the pod again, mis-states nothing (its window holds the pod's old run and its new one)
            booking.source_done = booking.target_done = True
            self._finish(msg.spec.uid, msg.at)

    def on_status(self, status: PodStatus) -> None:
        """Pod lifecycle: Running updates the phase (Running off the source ends a migration);
        Succeeded/Failed forget the pod and, on a migration's source, mark when it left."""
        mig = self.migrations.get(status.uid)
        booking = self.bookings.get(status.uid)
        if status.phase in ("Succeeded", "Failed"):
            entry = self.pods.get(status.uid)
            if entry is not None and entry.node == status.node:
                del self.pods[status.uid]
                if booking is None or booking.source != status.node:
                    self._depart(entry, status.at)
            if booking is not None and booking.source == status.node and booking.left_at is None:
                booking.left_at = status.at
            if status.phase == "Succeeded" and mig is not None and mig.source == status.node:
                if booking is not None:
                    booking.target_done = True  # it finished its work: no replacement comes
                self._finish(status.uid, status.at)
            return
        entry = self.pods.get(status.uid)
        if entry is not None and entry.node == status.node:
            entry.phase = status.phase
        if status.phase == "Running" and booking is not None and booking.source != status.node \
                and booking.bound_at is None:
            booking.bound_node, booking.bound_at = status.node, status.at  # its binding not seen yet
            if booking.left_at is None:
                booking.left_at = status.at
        if status.phase == "Running" and mig is not None and mig.source != status.node:
            self._finish(status.uid, status.at)

    def start_migration(self, ev: Eviction, now: float) -> None:
        """Record an eviction just sent: the running migration, its booking and its place in the limits."""
        self.migrations[ev.uid] = Migration(ev.uid, ev.source, ev.target, ev.workload, now, ev.usage)
        self.relieved_at[ev.source] = (now, False)
        entry = self.pods.get(ev.uid)
        ran_since = entry.bound_at if entry is not None and entry.node == ev.source else 0.0
        self.bookings[ev.uid] = Booking(ev.uid, ev.source, ev.target, ev.usage, now, ran_since)
        if entry is not None:
            self.room.hold(ev.uid, ev.target, entry.spec)
        namespace = entry.spec.namespace if entry is not None else ev.namespace
        self.limiter.record(ev.uid, LimitKey(ev.source, namespace, ev.workload), now)

    def _depart(self, entry: PodEntry, left_at: float) -> None:
        """Remember a pod that left ``entry.node`` by itself (not by a migration, whose booking covers it)."""
        dep = departure_from(entry.usage, entry.spec.uid, entry.node, entry.bound_at, left_at)
        if dep is not None:
            self.departures[(dep.uid, dep.node)] = dep

    def _finish(self, uid: str, now: float) -> None:
        """The migration of ``uid`` stops running (its booking stays until the metrics show the move)."""
        self.migrations.pop(uid, None)
        self.limiter.finish(uid, now)

    def expire(self, now: float, migration_ttl_s: float) -> int:
        """Stop migrations running longer than the TTL, drop bookings and departures past ``booking_ttl_s`` or
        done, prune the limits' history; returns how many migrations stopped."""
        old = [u for u, m in self.migrations.items() if now - m.started_at > migration_ttl_s]
        for uid in old:
            self._finish(uid, now)
        ttl = self.settings.booking_ttl_s
        for node in [n for n, (at, _) in self.relieved_at.items() if now - at >= self.settings.relief_hold_s]:
            del self.relieved_at[node]
        for uid in [u for u, b in self.bookings.items()
                    if b.done or now - b.started_at > ttl or self._never_left(b)]:
            del self.bookings[uid]
        for uid in [u for u in self.room.held if u not in self.bookings]:
            self.room.release(uid)
        for key in [k for k, d in self.departures.items() if d.done or now - d.left_at > ttl]:
            del self.departures[key]
        self.limiter.prune(now)
        return len(old)

    def _never_left(self, b: Booking) -> bool:
        """The migration stopped running (TTL) with no word of the pod leaving its source or being bound
        elsewhere: the eviction did not take, and the pod still runs where its metric shows it."""
        return b.uid not in self.migrations and b.left_at is None and b.bound_at is None

    def refuse(self, pod: Candidate, now: float, planned: Sequence[Eviction] = (),
               replicas: Mapping[str, int] | None = None) -> str:
        """Why the time-window limits keep ``pod`` ("" when it may go); ``planned`` this round's evictions,
        ``replicas`` the known replicas per workload (computed from the view when None)."""
        if replicas is None:
            _, replicas = self.workload_counts()
        keys = [LimitKey(e.source, e.namespace, e.workload) for e in planned]
        return (self.limiter.refuse_pod(pod.uid, now)
                or self.limiter.refuse(LimitKey(pod.node, pod.namespace, pod.workload), now, replicas, keys))

    # ------------------------------------------------------------------ round inputs

    def fresh_loads(self, now: float, expiry_s: float) -> list[NodeLoad]:
        """Registered nodes with a metric at most ``expiry_s`` old: usage = system + Σ pods (§6; the node
        figure less host apps where the metric has it, booking.base_usage), pods = the metric's pod count,
        each corrected by the bookings of migrations (booking.py): ``usage`` / ``pods`` less the outgoing ones
        (what already left the node), the incoming ones apart in ``incoming`` / ``incoming_pods`` (replacements
        its metric does not show yet), so a node becomes a source only by what it carries; ``settling`` while
        an outgoing booking has not ended (its metric still holds an evicted pod). The share of the window that
        pods gone by themselves still hold (departures.py) is taken off ``usage`` too, without settling: the
        pods the node runs are all in its pod list. A pod started within the window adds what the window mean
        does not hold of it yet (``_not_yet_in_window``) to ``incoming``: as a target the node carries it whole,
        while it becomes a source only once its metric shows it high (a descheduler acting on more than the
        metric shows could not be audited against it).

        Without the bookings the next rounds would see a source as hot as before (its 300 s mean still holds
        the evicted pod for minutes) and its target as cold as before, and evict again.
        """
        self._allocated = None  # a new round: allocations are summed again at its first fits()
        fresh = {n: m for n, m in self.metrics.items()
                 if n in self.allocatable and now - m.at <= expiry_s}
        outgoing: dict[str, list[float]] = {}
        incoming: dict[str, list[float]] = {}
        settling: set[str] = set()
        for b in self.bookings.values():
            sides = []
            if b.source in fresh:
                share, pods = b.source_share(fresh[b.source])
                sides.append((outgoing, b.source, share, pods))
                if not b.source_done:
                    settling.add(b.source)
            if b.target_node in fresh:
                share, pods = b.target_share(fresh[b.target_node])
                sides.append((incoming, b.target_node, share, pods))
            for side, node, share, pods in sides:
                a = side.setdefault(node, [0.0, 0.0, 0.0])
                a[0] += share * b.usage[0]
                a[1] += share * b.usage[1]
                a[2] += pods
        for d in self.departures.values():
            if d.node in fresh:
                share = d.share(fresh[d.node])
                a = outgoing.setdefault(d.node, [0.0, 0.0, 0.0])
                a[0] += share * d.usage[0]
                a[1] += share * d.usage[1]
        for name, metric in fresh.items():
            arriving = self._not_yet_in_window(metric)
            if arriving != (0.0, 0.0):
                a = incoming.setdefault(name, [0.0, 0.0, 0.0])
                a[0] += arriving[0]
                a[1] += arriving[1]
        loads: list[NodeLoad] = []
        zero = (0.0, 0.0, 0.0)
        for name, metric in fresh.items():
            out: Sequence[float] = outgoing.get(name, zero)
            inc: Sequence[float] = incoming.get(name, zero)
            base = base_usage(metric)
            cpu, mem = max(round(base[0] - out[0]), 0), max(round(base[1] - out[1]), 0)
            pods = max(len(metric.pods) - int(out[2]), 0)
            load = NodeLoad(name, self.allocatable[name], (cpu, mem), self.pods_allocatable.get(name, 0), pods,
                            name not in self.no_target, (round(inc[0]), round(inc[1])), int(inc[2]), name in settling)
            loads.append(self._held(load, now))
        return loads

    def _held(self, load: NodeLoad, now: float) -> NodeLoad:
        """``load`` marked settling while ``relief_hold_s`` holds it: a pod was evicted off it within the hold,
        a round saw it not high since (cured), and it is high again (refilled by new placements). A node still
        high since its eviction is not held: its set continues once its metric shows the eviction."""
        relieved = self.relieved_at.get(load.name)
        if relieved is None or self.settings.relief_hold_s <= 0:
            return load
        if not node_is_high(load, self.settings.high_thresholds):
            self.relieved_at[load.name] = (relieved[0], True)
            return load
        return replace(load, settling=True) if relieved[1] else load

    def _not_yet_in_window(self, metric: NodeMetric) -> tuple[float, float]:
        """(cpu m, memory B) that pods listed in ``metric`` use but its node figure does not hold yet: a pod bound
        ``s`` seconds before the metric, ``s`` < ``window_s``, is in the window mean with ``s / window_s`` of its
        per-pod figure (booking.py). Pods with a booking are left to it; a metric without its node figure counts
        Σ pods whole already."""
        if not has_node_figure(metric):
            return 0.0, 0.0
        start = metric.at - metric.window_s
        cpu = mem = 0.0
        for pm in metric.pods:
            entry = self.pods.get(pm.uid)
            if entry is None or entry.node != metric.node or entry.bound_at <= start or pm.uid in self.bookings:
                continue
            missing = 1.0 - covered(start, metric.at, entry.bound_at, metric.at)
            cpu += missing * max(pm.cpu, 0)
            mem += missing * max(pm.memory, 0)
        return cpu, mem

    def candidates(self, loads: list[NodeLoad]) -> dict[str, list[Candidate]]:
        """Evictable pods per node: known, bound there, in its metric, not migrating or booked, not local
        storage unless ``evict_local_storage_pods``."""
        return {load.name: self.candidates_on(load.name) for load in loads}

    def candidates_on(self, node: str) -> list[Candidate]:
        """:meth:`candidates` of one node that has a metric (KeyError otherwise)."""
        pods: list[Candidate] = []
        for pm in self.metrics[node].pods:
            entry = self.pods.get(pm.uid)
            if entry is None or entry.node != node or pm.uid in self.migrations or pm.uid in self.bookings:
                continue
            if not entry.evictable or (entry.spec.local_storage and not self.settings.evict_local_storage_pods):
                continue
            pods.append(Candidate(pm.uid, node, (max(pm.cpu, 0), max(pm.memory, 0)),
                                  entry.priority_class, entry.spec.priority or 0, entry.qos_class,
                                  entry.workload, entry.spec.namespace))
        return pods

    def lazy_candidates(self, loads: list[NodeLoad]) -> LazyCandidates:
        """:meth:`candidates` as a mapping that builds a node's list on first access only.

        A round reads the candidates of its source nodes alone (usually none), so the lists of
        the other nodes are never built. Read it before the view changes (within the round).
        """
        return LazyCandidates(self, [load.name for load in loads])

    def migrating_per_node(self) -> dict[str, int]:
        """Running migrations per source node."""
        out: dict[str, int] = {}
        for m in self.migrations.values():
            out[m.source] = out.get(m.source, 0) + 1
        return out

    def workload_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(migrating pods, known replicas) per workload."""
        unavailable: dict[str, int] = {}
        for m in self.migrations.values():
            if m.workload:
                unavailable[m.workload] = unavailable.get(m.workload, 0) + 1
        replicas: dict[str, int] = {}
        for e in self.pods.values():
            w = e.workload
            if w:
                replicas[w] = replicas.get(w, 0) + 1
        return unavailable, replicas

    # ------------------------------------------------------------------ target room (targetroom.py)

    def on_resource(self, res: NodeResource) -> None:
        """A node's batch/mid offer (``node.resource.*``): the store's bind limits for batch-*/mid-*."""
        self.room.on_resource(res)

    def refresh_allocated(self, allocated: Mapping[str, Resources]) -> None:
        """The store's allocations per node, read at the start of a round (:meth:`TargetRoom.refresh`)."""
        self.room.refresh(allocated)
        self._allocated = None

    def fits(self, pod: Candidate, target: str, planned: Sequence[Eviction]) -> bool:
        """Whether ``target`` admits ``pod`` (taints, node selector, required affinity) and has the room the
        store checks for its requests after this round's ``planned`` evictions to it (targetroom.py). A pod
        the view does not know fits nowhere."""
        return not self.target_refusal(pod, target, planned)

    def target_refusal(self, pod: Candidate, target: str, planned: Sequence[Eviction]) -> str:
        """Why ``target`` is no target for ``pod`` ("" when it is); see :meth:`fits`."""
        entry = self.pods.get(pod.uid)
        if entry is None:
            return f"pod {pod.uid} unknown"
        if self._allocated is None:
            bound: dict[str, list[PodSpec]] = {}
            for e in self.pods.values():
                if e.phase in ("Pending", "Running"):
                    bound.setdefault(e.node, []).append(e.spec)
            self._allocated = {n: self.room.allocated(n, bound.get(n, ())) for n in self.room.nodes}
        allocated = self._allocated.get(target, (0, 0, 0, 0, 0, 0, 0))
        extra = [requests_of(self.pods[e.uid].spec) for e in planned if e.target == target and e.uid in self.pods]
        return self.room.refusal(entry.spec, target, allocated, extra)

    def end_job(self, uid: str, now: float) -> None:
        """A migration job of ``uid`` ended Failed or Aborted: its reservation is gone, and — unless a
        replacement was bound somewhere (the booking then follows it) — the booking's target side ends: no
        pod comes to the target, which must not look fuller than its metric for the booking TTL."""
        self.room.release(uid)
        booking = self.bookings.get(uid)
        if booking is not None and booking.bound_at is None:
            booking.target_done = True
