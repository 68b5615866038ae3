"""The columnar node table: every node's allocatable, allocation, load and labels as NumPy arrays.

Rows are nodes in registration order (row ``i`` is ``names[i]``); columns of the
resource arrays follow :data:`colo.messages.RESOURCE_NAMES`. Filter and score
plugins read whole columns (DESIGN.md §7); the table is mutated only by event
handlers and Reserve/Unreserve, never during a filter or score pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import numpy as np
import numpy.typing as npt

from colo.messages import NodeMetric, NodeResource, NodeSpec, Resources, Taint
from colo_scheduler.estimation import pod_gap
from colo_scheduler.podinfo import COL, N_RES, IntArray, PodInfo, resource_vector

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

FLOAT_EXACT_BELOW = 2**53 // 128
"""Allocatable below which score plugins take floor(100 × x / a), 0 ≤ x ≤ a, in float64: 100 x is exact
(< 2^53), the division rounds once, and with a × 101 < 2^53 the rounded quotient never reaches the next
integer, so truncation is the exact floor (64 TiB of memory, 2^46 milli-cores); above it, int64."""

_PERCENT_WIDE = (2**63 - 1) // 100
"""Largest x whose 100 × x fits int64."""


def percent_floor(x: npt.NDArray[np.int64], divisor: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """x × 100 // divisor elementwise (x ≥ 0, divisor ≥ 1, same shape), exact: Python ints where 100 × x
    would overflow int64 (quantities beyond 2^56, which the service refuses but the core accepts)."""
    out: npt.NDArray[np.int64] = x * 100 // divisor
    for idx in np.argwhere(x > _PERCENT_WIDE):
        k = tuple(idx.tolist())
        out[k] = int(x[k]) * 100 // int(divisor[k])
    return out

UNLIMITED = np.int64(2**62)
"""Allocatable standing for "no limit" (a node whose ``allocatable.pods`` is 0, as the store treats it)."""


@dataclass(slots=True)
class AssignedPod:
    """A pod the table counts on a node: its info, row, and assignment time (clock seconds)."""

    pod: PodInfo
    node: int
    assigned_at: float


class NodeTable:
    """Columnar state of every known node.

    Arrays (``n`` = number of nodes; capacity grows by doubling):

    * ``alloc`` (n, 7) int64 — allocatable: cpu/memory/pods from :class:`NodeSpec`
      (pods 0 → :data:`UNLIMITED`), batch/mid from :class:`NodeResource` (0 when none).
    * ``allocated`` (n, 7) int64 — Σ requests of pods on the node (pods column = count).
    * ``free`` (n, 7) int64 — ``alloc − allocated``, kept in step.
    * ``metric_usage`` (n, 2) int64 — last reported node usage (cpu milli-cores, memory bytes).
    * ``metric_at`` (n,) float64 — time of that metric, NaN when none.
    * ``pending_estimate`` (n, 2) int64 — Σ gaps of the assigned pods: the part of their estimate
      the metric's windowed node usage does not contain yet (REFERENCE.md §4 and §2;
      :mod:`colo_scheduler.estimation`).
    * ``estimated_usage`` (n, 2) int64 — ``metric_usage + pending_estimate``.
    * ``memory_pressure`` (n,) bool — the node's last :class:`NodeResource` says BE memory pressure.
    """

    MIN_LOG_CAP = 65_536
    """The change log is trimmed when it holds more rows than max(this, :data:`LOG_ROWS_PER_NODE`
    × n). Only a cycle reads it (the class cache), and a cycle trims it when it begins; the cap
    bounds it for a process that follows events without running cycles (a warm follower under
    leader election) — a trim mid-cycle only makes the class cache recompute a class once."""

    LOG_ROWS_PER_NODE = 16
    """Rows per node the change log may hold before it is trimmed (see :data:`MIN_LOG_CAP`)."""

    def __init__(self, capacity: int = 64) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.specs: list[NodeSpec] = []
        self._cap = max(1, capacity)
        self._alloc = np.zeros((self._cap, N_RES), np.int64)
        self._allocated = np.zeros((self._cap, N_RES), np.int64)
        self._free = np.zeros((self._cap, N_RES), np.int64)
        self._metric_usage = np.zeros((self._cap, 2), np.int64)
        self._metric_at = np.full(self._cap, np.nan)
        self._pending = np.zeros((self._cap, 2), np.int64)
        self._est_usage = np.zeros((self._cap, 2), np.int64)
        self._memory_pressure = np.zeros(self._cap, np.bool_)
        self.pod_usage: list[dict[str, tuple[int, int]]] = []
        self.metrics: list[NodeMetric | None] = []
        """The last applied metric of each row (aggregated usage, per-pod classes), None when none."""
        self.node_pods: list[dict[str, AssignedPod]] = []
        self.assigned: dict[str, AssignedPod] = {}
        self.app_counts: dict[str, npt.NDArray[np.int64]] = {}
        self.version = 0
        """Bumped whenever labels or taints change or a node is added (mask caches key on it)."""
        self.alloc_version = 0
        """Bumped whenever any node's allocatable changes (per-cycle divisors key on it)."""
        self._changes: list[int] = []
        self._changes_base = 0
        self._node_changes: list[int] = []  # rows whose spec, allocatable or metric changed
        self._node_changes_base = 0
        self.max_log = self.MIN_LOG_CAP
        """Rows the change log holds at most before it is trimmed (readers then see None: every
        row changed). Grows with the table: :data:`LOG_ROWS_PER_NODE` × n."""
        self._mask_cache: dict[tuple[str, object], BoolArray | None] = {}
        self._cache_version = -1
        self.retired: set[int] = set()
        """Rows of deleted nodes (:meth:`retire`): kept, cordoned and with nothing allocatable, until the node
        registers again."""
        self._retired_offers: dict[int, NodeResource] = {}
        """The last :class:`NodeResource` of a retired row (the one applied before :meth:`retire`, or one that
        arrived since): slo-manager republishes an unchanged offer only after ``max_publish_age_s``, so
        :meth:`upsert_node` applies it again when the node registers."""

    # ------------------------------------------------------------------ views

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.names)

    @property
    def alloc(self) -> IntArray:
        """(n, 7) allocatable."""
        return self._alloc[: self.n]

    @property
    def allocated(self) -> IntArray:
        """(n, 7) allocated requests."""
        return self._allocated[: self.n]

    @property
    def free(self) -> IntArray:
        """(n, 7) allocatable − allocated."""
        return self._free[: self.n]

    @property
    def metric_usage(self) -> IntArray:
        """(n, 2) reported node usage: cpu milli-cores, memory bytes."""
        return self._metric_usage[: self.n]

    @property
    def metric_at(self) -> npt.NDArray[np.float64]:
        """(n,) time of the last metric, NaN when none."""
        return self._metric_at[: self.n]

    @property
    def pending_estimate(self) -> IntArray:
        """(n, 2) estimate of assigned pods not yet reflected in the metric."""
        return self._pending[: self.n]

    @property
    def estimated_usage(self) -> IntArray:
        """(n, 2) metric usage + pending estimate (without the incoming pod)."""
        return self._est_usage[: self.n]

    @property
    def memory_pressure(self) -> BoolArray:
        """(n,) True where the node is under BE memory pressure (``NodeResource.memory_pressure``)."""
        return self._memory_pressure[: self.n]

    # ------------------------------------------------------------------ change log

    @property
    def change_seq(self) -> int:
        """Position in the row change log; pass it later to :meth:`changes_since`."""
        return self._changes_base + len(self._changes)

    def touch(self, i: int) -> None:
        """Record that row ``i`` changed (any column a plugin may read). Every mutator calls it."""
        self._changes.append(i)
        if len(self._changes) > self.max_log:
            self.trim_changes()

    @property
    def log_length(self) -> int:
        """Rows in the change log (since the last trim)."""
        return len(self._changes)

    def changes_since(self, seq: int) -> list[int] | None:
        """Rows changed since ``seq`` (may repeat), or None when the log no longer reaches back
        that far (then everything must be treated as changed)."""
        k = seq - self._changes_base
        if k < 0:
            return None
        return self._changes[k:]

    @property
    def change_log_length(self) -> int:
        """Entries in the change log since it was last trimmed."""
        return len(self._changes)

    def trim_changes(self) -> None:
        """Forget the logs (readers holding older positions then see None: all changed)."""
        self._changes_base += len(self._changes)
        self._changes = []
        self._node_changes_base += len(self._node_changes)
        self._node_changes = []

    @property
    def node_change_seq(self) -> int:
        """Position in the node change log (a subset of the row change log: node spec, allocatable
        and metric changes, not allocations); pass it later to :meth:`node_changes_since`."""
        return self._node_changes_base + len(self._node_changes)

    def node_changes_since(self, seq: int) -> list[int] | None:
        """Rows whose spec, allocatable or metric changed since ``seq`` (may repeat), or None when
        the log no longer reaches back that far."""
        k = seq - self._node_changes_base
        if k < 0:
            return None
        return self._node_changes[k:]

    def _node_touch(self, i: int) -> None:
        self._node_changes.append(i)
        if len(self._node_changes) > self.max_log:
            self.trim_changes()

    # ------------------------------------------------------------------ nodes

    def _grow(self) -> None:
        self._cap *= 2
        for attr in ("_alloc", "_allocated", "_free", "_metric_usage", "_pending", "_est_usage", "_memory_pressure"):
            old = getattr(self, attr)
            new = np.zeros((self._cap,) + old.shape[1:], old.dtype)
            new[: len(old)] = old
            setattr(self, attr, new)
        at = np.full(self._cap, np.nan)
        at[: len(self._metric_at)] = self._metric_at
        self._metric_at = at
        for app, counts in self.app_counts.items():
            grown = np.zeros(self._cap, np.int64)
            grown[: len(counts)] = counts
            self.app_counts[app] = grown

    def upsert_node(self, spec: NodeSpec) -> bool:
        """Add or update a node from its spec (a retired row comes back to life); returns True when anything
        scheduling-relevant changed."""
        i = self.index.get(spec.name)
        if i is not None and i in self.retired:
            self.retired.discard(i)
            self.specs[i] = spec
            self.version += 1
            offer = self._retired_offers.pop(i, None)
            if offer is not None:
                self.set_node_resource(offer)
        elif i is None:
            if self.n == self._cap:
                self._grow()
            i = self.n
            self.names.append(spec.name)
            self.index[spec.name] = i
            self.specs.append(spec)
            self.pod_usage.append({})
            self.metrics.append(None)
            self.node_pods.append({})
            self.version += 1
            self.max_log = max(self.max_log, self.LOG_ROWS_PER_NODE * self.n)
        else:
            old = self.specs[i]
            self.specs[i] = spec
            if old == spec:
                return False
            if (old.labels != spec.labels or old.taints != spec.taints or old.annotations != spec.annotations
                    or old.unschedulable != spec.unschedulable):
                self.version += 1
        a = spec.allocatable
        pods = a.pods if a.pods > 0 else UNLIMITED
        self._alloc[i, [COL["cpu"], COL["memory"], COL["pods"]]] = (a.cpu, a.memory, pods)
        self.alloc_version += 1
        self._node_touch(i)
        self._refresh_free(i)
        return True

    def retire(self, name: str) -> bool:
        """Take deleted node ``name`` out of scheduling; False when unknown or already retired.

        The row stays (placements, waiting pods, caches and plugin state hold row numbers) but offers
        nothing: allocatable all 0, pods included, so no pod fits it (every pod asks for one pod slot), and
        cordoned. Its pods must have left it first. :meth:`upsert_node` of the name brings it back, with the
        batch/mid allocatable and memory pressure of its last :class:`NodeResource`."""
        i = self.index.get(name)
        if i is None or i in self.retired:
            return False
        self.retired.add(i)
        cols = [COL["batch_cpu"], COL["batch_memory"], COL["mid_cpu"], COL["mid_memory"]]
        batch_cpu, batch_memory, mid_cpu, mid_memory = (int(v) for v in self._alloc[i, cols])
        if batch_cpu or batch_memory or mid_cpu or mid_memory or self._memory_pressure[i]:
            self._retired_offers[i] = NodeResource(node=name, batch_cpu=batch_cpu, batch_memory=batch_memory,
                                                   mid_cpu=mid_cpu, mid_memory=mid_memory,
                                                   memory_pressure=bool(self._memory_pressure[i]))
        self.specs[i] = msgspec.structs.replace(self.specs[i], allocatable=Resources(), unschedulable=True)
        self._alloc[i] = 0
        self._memory_pressure[i] = False
        self.version += 1
        self.alloc_version += 1
        self._node_touch(i)
        self._refresh_free(i)
        return True

    def retired_offer(self, name: str) -> NodeResource | None:
        """The :class:`NodeResource` :meth:`upsert_node` applies when retired node ``name`` registers again;
        None when the node is not retired or offered nothing before its deletion."""
        i = self.index.get(name)
        return None if i is None else self._retired_offers.get(i)

    def set_node_resource(self, nr: NodeResource) -> bool:
        """Apply batch/mid allocatable and BE memory pressure of a known node; False when the node is unknown,
        retired (kept for its registration, :meth:`upsert_node`) or nothing changed."""
        i = self.index.get(nr.node)
        if i is not None and i in self.retired:
            self._retired_offers[i] = nr
        if i is None or i in self.retired:
            return False
        cols = [COL["batch_cpu"], COL["batch_memory"], COL["mid_cpu"], COL["mid_memory"]]
        vals = (0, 0, 0, 0) if nr.reset else (nr.batch_cpu, nr.batch_memory, nr.mid_cpu, nr.mid_memory)
        pressure = nr.memory_pressure and not nr.reset
        if tuple(int(v) for v in self._alloc[i, cols]) == vals and bool(self._memory_pressure[i]) == pressure:
            return False
        self._memory_pressure[i] = pressure
        self._alloc[i, cols] = vals
        self.alloc_version += 1
        self._node_touch(i)
        self._refresh_free(i)
        return True

    def set_allocated(self, name: str, allocated: Resources, pods: int) -> None:
        """Overwrite a node's allocation with the store's (authoritative) sums; ``pods`` = pod count."""
        i = self.index.get(name)
        if i is None:
            return
        self._allocated[i] = resource_vector(allocated, pods=pods)
        self._refresh_free(i)

    def _refresh_free(self, i: int) -> None:
        self._free[i] = self._alloc[i] - self._allocated[i]
        self.touch(i)

    def add_allocated(self, i: int, request: IntArray, sign: int = 1) -> None:
        """Add (sign 1) or remove (sign −1) a request vector (7,) on row ``i``.

        A removal never takes a column below zero: when the store's sums, read after the pod left,
        were applied (:meth:`set_allocated`) before its removal here, the pod is already out of them.
        """
        if sign == 1:
            self._allocated[i] += request
            self._free[i] -= request
        else:
            allocated = self._allocated[i]
            np.maximum(allocated - request, 0, out=allocated)
            self._free[i] = self._alloc[i] - allocated
        self.touch(i)

    # ------------------------------------------------------------------ load

    def set_metric(self, metric: NodeMetric) -> bool:
        """Record a node's metric and recompute its pending estimate; False for unknown nodes or old metrics."""
        i = self.index.get(metric.node)
        if i is None:
            return False
        last = self._metric_at[i]
        if not math.isnan(last) and metric.at < last:
            return False
        self._metric_usage[i] = (metric.node_usage.cpu, metric.node_usage.memory)
        self._metric_at[i] = metric.at
        self.pod_usage[i] = {p.uid: (p.cpu, p.memory) for p in metric.pods}
        self.metrics[i] = metric
        self.recompute_pending(i)
        self._node_touch(i)
        return True

    def recompute_pending(self, i: int) -> None:
        """Pending estimate of row ``i``: Σ over its assigned pods of the part of their estimate the
        last metric does not contain yet (:func:`colo_scheduler.estimation.pod_gap`: the whole
        estimate without reported usage; for a pod younger than the metric's window, its expected
        usage less the share of the window it ran; 0 once it ran the whole window)."""
        metric = self.metrics[i]
        usage = self.pod_usage[i]
        cpu = memory = 0  # Python ints: a node holds tens of pods, tiny array ops would dominate
        if metric is None:
            for ap in self.node_pods[i].values():
                ec, em = ap.pod.estimate_ints
                cpu += ec
                memory += em
        else:
            at, window = metric.at, metric.window_s
            for uid, ap in self.node_pods[i].items():
                gc, gm = pod_gap(ap.pod.estimate_ints, usage.get(uid), ap.assigned_at, at, window)
                cpu += gc
                memory += gm
        self._pending[i] = (cpu, memory)
        self._est_usage[i] = self._metric_usage[i] + self._pending[i]
        self.touch(i)

    def track(self, pod: PodInfo, i: int, at: float) -> None:
        """Count ``pod`` as assigned to row ``i`` at clock time ``at`` (load estimate only)."""
        ap = AssignedPod(pod, i, at)
        self.assigned[pod.uid] = ap
        self.node_pods[i][pod.uid] = ap
        used = self.pod_usage[i].get(pod.uid)
        metric = self.metrics[i]
        if used is None or metric is None:
            gap: IntArray | tuple[int, int] = pod.estimate
        else:  # the same rule as recompute_pending
            gap = pod_gap(pod.estimate_ints, used, at, metric.at, metric.window_s)
        self._pending[i] += gap
        self._est_usage[i] += gap
        self.touch(i)

    def untrack(self, uid: str) -> AssignedPod | None:
        """Stop counting pod ``uid``; returns its record or None when unknown."""
        ap = self.assigned.pop(uid, None)
        if ap is not None:
            self.node_pods[ap.node].pop(uid, None)
            self.recompute_pending(ap.node)
        return ap

    def app_count(self, app: str) -> npt.NDArray[np.int64]:
        """(n,) pods of workload ``app`` per node (read-only use; a zero column is created on first
        use). Change counts with :meth:`add_app_count`."""
        counts = self.app_counts.get(app)
        if counts is None:
            counts = self.app_counts[app] = np.zeros(self._cap, np.int64)
        return counts[: self.n]

    def add_app_count(self, app: str, i: int, delta: int) -> None:
        """Add ``delta`` pods of workload ``app`` on row ``i``."""
        self.app_count(app)[i] += delta
        self.touch(i)

    # ------------------------------------------------------------------ labels and taints

    def cached_mask(self, kind: str, key: object, build: Callable[[NodeTable], BoolArray]) -> BoolArray | None:
        """A (n,) bool mask cached until labels/taints/nodes change; ``build(table)`` computes it.

        Returns None instead of an all-True mask (filters return None when no node is rejected).
        """
        if self._cache_version != self.version:
            self._mask_cache.clear()
            self._cache_version = self.version
        k = (kind, key)
        if k in self._mask_cache:
            return self._mask_cache[k]
        mask = build(self)
        out = None if bool(mask.all()) else mask
        self._mask_cache[k] = out
        return out

    def labels(self, i: int) -> dict[str, str]:
        """Labels of row ``i``."""
        return self.specs[i].labels

    def taints(self, i: int) -> list[Taint]:
        """Taints of row ``i``."""
        return self.specs[i].taints
