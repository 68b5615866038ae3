"""The profiler's state: usage models per pod, per priority class and per node system.

Pure (no I/O): feed it pod events and NodeMetrics, ask it for :class:`NodeProfile`s.
Each NodeMetric is one sample for every model of its node (REFERENCE.md §7; our
reports are 60 s windows, so the sample is the reported usage). CPU histograms hold
cores (first bucket 0.025 core, up to 1024 cores), memory histograms bytes (first
bucket 5 MiB, up to 2 TiB), both growing 5 % per bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import numpy as np

from colo.messages import NodeMetric, NodeProfile, PodPrediction, PriorityClass, Usage
from colo_profiler.histogram import ExponentialBuckets, HistogramBank
from colo_profiler.reclaim import prod_reclaimable
from colo_profiler.settings import ProfilerSettings

MIB = 1 << 20
TIB = 1 << 40
CPU_BUCKETS = ExponentialBuckets(max_value=1024.0, first_bucket_size=0.025, ratio=1.05)
"""CPU layout in cores (REFERENCE.md §7)."""
MEMORY_BUCKETS = ExponentialBuckets(max_value=2.0 * TIB, first_bucket_size=5.0 * MIB, ratio=1.05)
"""Memory layout in bytes (REFERENCE.md §7)."""

FLUSH_SAMPLES = 8192
"""Buffered samples that trigger a vectorized add."""

PRIORITY_CLASSES: tuple[PriorityClass, ...] = ("prod", "mid", "batch", "free", "none")


@dataclass
class PodModel:
    """What the profiler knows of one pod; requests in milli-cores / bytes, times in seconds."""

    uid: str
    node: str
    cpu_request: int = 0
    memory_request: int = 0
    priority_class: PriorityClass | None = None
    started_at: float | None = None
    last_seen: float = 0.0
    row: int = -1
    """Row in both banks, -1 until its first sample."""


@dataclass
class NodeModel:
    """One node: its class and system rows, pods, allocatable (None = not registered)."""

    name: str
    class_rows: dict[PriorityClass, int]
    system_row: int
    last_seen: float
    allocatable: Usage | None = None
    pods: set[str] = field(default_factory=set)
    last_published: float | None = None
    """When a profile was last computed for the node (sent or found unchanged), seconds."""
    last_sent: NodeProfile | None = None
    """The last NodeProfile actually published."""


class ProfileModel:
    """Decaying usage models of every node, pod and priority class (REFERENCE.md §7).

    Rows of the CPU and memory banks are allocated in pairs (same index in both).
    """

    def __init__(self, settings: ProfilerSettings | None = None) -> None:
        self.settings = settings or ProfilerSettings()
        self.cpu = HistogramBank(CPU_BUCKETS, self.settings.cpu_half_life_s, capacity=256)
        self.memory = HistogramBank(MEMORY_BUCKETS, self.settings.memory_half_life_s, capacity=256)
        self.nodes: dict[str, NodeModel] = {}
        self.pods: dict[str, PodModel] = {}
        self.allocatable: dict[str, Usage] = {}
        self.samples = 0
        self._rows: list[int] = []
        self._cpu: list[int] = []
        self._mem: list[int] = []
        self._times: list[tuple[float, int]] = []

    # ------------------------------------------------------------------ rows

    def _alloc(self) -> int:
        row = self.cpu.alloc()
        if self.memory.alloc() != row:  # both banks grow and free together
            raise RuntimeError("histogram banks out of step")
        return row

    def _free(self, row: int) -> None:
        if row >= 0:
            self.flush()  # buffered samples may still point at this row
            self.cpu.free(row)
            self.memory.free(row)

    def _node(self, name: str, now: float) -> NodeModel:
        node = self.nodes.get(name)
        if node is None:
            node = NodeModel(name, {c: self._alloc() for c in PRIORITY_CLASSES}, self._alloc(), now,
                             allocatable=self.allocatable.get(name))
            self.nodes[name] = node
        return node

    # ------------------------------------------------------------------ events

    def node_registered(self, name: str, allocatable: Usage) -> None:
        """Remember a node's allocatable (caps in REFERENCE.md §7)."""
        self.allocatable[name] = allocatable
        if name in self.nodes:
            self.nodes[name].allocatable = allocatable

    def pod_bound(self, uid: str, node: str, cpu_request: int, memory_request: int,
                  priority_class: PriorityClass, at: float) -> None:
        """A pod was bound (or reported running): its requests, class and start time."""
        pod = self.pods.get(uid)
        if pod is None:
            pod = self.pods[uid] = PodModel(uid, node, started_at=at, last_seen=at)
        elif pod.node != node:
            self._detach(pod)
            pod.node = node
        pod.cpu_request, pod.memory_request = cpu_request, memory_request
        pod.priority_class = priority_class
        if pod.started_at is None or at < pod.started_at:
            pod.started_at = at
        pod.last_seen = max(pod.last_seen, at)
        if node in self.nodes:
            self.nodes[node].pods.add(uid)

    def pod_ended(self, uid: str) -> None:
        """A pod terminated: drop it and its model."""
        pod = self.pods.pop(uid, None)
        if pod is not None:
            self._detach(pod)
            self._free(pod.row)

    def _detach(self, pod: PodModel) -> None:
        node = self.nodes.get(pod.node)
        if node is not None:
            node.pods.discard(pod.uid)

    def ingest(self, metric: NodeMetric) -> int:
        """Queue one sample per pod, per priority class and for the system; returns the sample count.

        Samples are buffered and added to the histograms in one vectorized call per
        :data:`FLUSH_SAMPLES` samples or before any query (:meth:`flush`).
        """
        t = metric.at
        node = self._node(metric.node, t)
        if t > node.last_seen:
            node.last_seen = t
        rows, cpu, mem = self._rows, self._cpu, self._mem
        class_cpu = dict.fromkeys(PRIORITY_CLASSES, 0)
        class_mem = dict.fromkeys(PRIORITY_CLASSES, 0)
        pods, name = self.pods, node.name
        for pm in metric.pods:
            pod = pods.get(pm.uid)
            if pod is None:
                pod = pods[pm.uid] = PodModel(pm.uid, name, started_at=t)
                node.pods.add(pm.uid)
            elif pod.node != name:
                self._detach(pod)
                pod.node = name
                node.pods.add(pm.uid)
            elif pod.uid not in node.pods:
                node.pods.add(pm.uid)
            if pod.row < 0:
                pod.row = self._alloc()
                if pod.priority_class is None:
                    pod.priority_class = pm.priority_class
            if t > pod.last_seen:
                pod.last_seen = t
            cls = pod.priority_class or pm.priority_class or "none"
            class_cpu[cls] += pm.cpu
            class_mem[cls] += pm.memory
            rows.append(pod.row)
            cpu.append(pm.cpu)
            mem.append(pm.memory)
        for cls, row in node.class_rows.items():
            rows.append(row)
            cpu.append(class_cpu[cls])
            mem.append(class_mem[cls])
        rows.append(node.system_row)
        cpu.append(metric.system_usage.cpu)
        mem.append(metric.system_usage.memory)
        n = len(metric.pods) + len(PRIORITY_CLASSES) + 1
        self._times.append((t, n))
        self.samples += n
        if len(rows) >= FLUSH_SAMPLES:
            self.flush()
        return n

    def flush(self) -> None:
        """Add every buffered sample to the histograms (one vectorized add per bank)."""
        if not self._rows:
            return
        rows = np.array(self._rows, dtype=np.intp)
        # Usage cannot be negative; a bad reading must not poison the model.
        cpu = np.maximum(np.array(self._cpu, dtype=np.float64), 0.0) / 1000.0
        mem = np.maximum(np.array(self._mem, dtype=np.float64), 0.0)
        if len(self._times) == 1:
            times: float | np.ndarray = self._times[0][0]
        else:
            times = np.repeat([t for t, _ in self._times], [n for _, n in self._times])
        self._rows, self._cpu, self._mem, self._times = [], [], [], []
        self.cpu.add_unchecked(rows, cpu, times)
        self.memory.add_unchecked(rows, mem, times)

    def expire(self, now: float) -> list[str]:
        """Drop pods and nodes unseen for ``expiry_s``; returns the expired node names."""
        self.flush()
        limit = now - self.settings.expiry_s
        for uid in [u for u, p in self.pods.items() if p.last_seen < limit]:
            self.pod_ended(uid)
        gone = [n for n, node in self.nodes.items() if node.last_seen < limit]
        for name in gone:
            node = self.nodes.pop(name)
            for row in (*node.class_rows.values(), node.system_row):
                self._free(row)
            for uid in list(node.pods):
                self.pod_ended(uid)
        return gone

    # ------------------------------------------------------------------ predictions

    def _peaks(self, rows: list[int]) -> tuple[list[int], list[int]]:
        """Peak CPU (milli-cores) and memory (bytes) of each row: percentile × (1 + margin)."""
        self.flush()
        s = self.settings
        scale = (100 + s.margin_percent) / 100.0
        cpu = self.cpu.percentiles(rows, s.cpu_percentile) * 1000.0 * scale
        mem = self.memory.percentiles(rows, s.memory_percentile) * scale
        return np.rint(cpu).astype(int).tolist(), np.rint(mem).astype(int).tolist()

    def profile(self, name: str, now: float) -> NodeProfile:
        """The NodeProfile of node ``name`` at ``now``. Raises KeyError for an unknown node."""
        return self.profiles([name], now)[0]

    def profiles(self, names: list[str], now: float) -> list[NodeProfile]:
        """The NodeProfiles of nodes ``names`` at ``now`` (same order), with one percentile pass per bank
        for all of them. Raises KeyError for an unknown node."""
        nodes = [self.nodes[n] for n in names]
        per_node: list[tuple[NodeModel, list[PodModel], list[PodModel], int]] = []
        rows: list[int] = []
        for node in nodes:
            pods = sorted((self.pods[u] for u in node.pods if u in self.pods), key=lambda p: p.uid)
            modelled = [p for p in pods if p.row >= 0]
            per_node.append((node, pods, modelled, len(rows)))
            rows += [p.row for p in modelled]
            rows += [node.class_rows["prod"], node.system_row]
        cpu_peaks, mem_peaks = self._peaks(rows)
        return [self._build(node, pods, modelled, cpu_peaks, mem_peaks, base, now)
                for node, pods, modelled, base in per_node]

    def _build(self, node: NodeModel, pods: list[PodModel], modelled: list[PodModel], cpu_peaks: list[int],
               mem_peaks: list[int], base: int, now: float) -> NodeProfile:
        """One NodeProfile from the peaks of its rows, which start at ``base`` (modelled pods, prod, system)."""
        k = len(modelled)
        peak_of = {p.uid: (cpu_peaks[base + i], mem_peaks[base + i]) for i, p in enumerate(modelled)}
        prod_cpu, prod_mem = cpu_peaks[base + k], mem_peaks[base + k]
        sys_cpu, sys_mem = cpu_peaks[base + k + 1], mem_peaks[base + k + 1]
        predictions: list[PodPrediction] = []
        req_cpu: list[int] = []
        req_mem: list[int] = []
        peak_cpu: list[int] = []
        peak_mem: list[int] = []
        warm_cpu = warm_mem = 0
        cold_start_s = self.settings.cold_start_s
        for p in pods:
            cold = p.started_at is None or now - p.started_at < cold_start_s
            if cold or p.uid not in peak_of:
                c, m = p.cpu_request, p.memory_request
            else:
                c, m = peak_of[p.uid]
            predictions.append(PodPrediction(uid=p.uid, cpu_peak=c, memory_peak=m, cold=cold))
            if p.priority_class == "prod":
                req_cpu.append(p.cpu_request)
                req_mem.append(p.memory_request)
                peak_cpu.append(c)
                peak_mem.append(m)
                if not cold:
                    warm_cpu += p.cpu_request
                    warm_mem += p.memory_request
        alloc = node.allocatable
        reclaim = Usage(
            cpu=prod_reclaimable(req_cpu, peak_cpu, warm_cpu, sys_cpu, prod_cpu,
                                 alloc.cpu if alloc else None),
            memory=prod_reclaimable(req_mem, peak_mem, warm_mem, sys_mem, prod_mem,
                                    alloc.memory if alloc else None),
        )
        return NodeProfile(node=node.name, at=now, prod_reclaimable=reclaim,
                           system_peak=Usage(cpu=sys_cpu, memory=sys_mem),
                           prod_peak=Usage(cpu=prod_cpu, memory=prod_mem), pods=predictions)

    def due(self, now: float) -> list[str]:
        """Nodes whose last profile is at least ``publish_interval_s`` old (sorted)."""
        iv = self.settings.publish_interval_s
        return sorted(n for n, node in self.nodes.items()
                      if node.last_published is None or now - node.last_published >= iv)

    def mark_published(self, name: str, now: float, sent: NodeProfile | None = None) -> None:
        """Record that node ``name`` got a profile at ``now``; ``sent`` is the profile when it was published."""
        node = self.nodes.get(name)
        if node is not None:
            node.last_published = now
            if sent is not None:
                node.last_sent = sent

    def worth_sending(self, profile: NodeProfile) -> bool:
        """Whether ``profile`` must be published: it differs from the last one sent for its node in anything
        but ``at``, or that one is at least ``republish_interval_s`` old (always when the interval is 0)."""
        node = self.nodes.get(profile.node)
        last = node.last_sent if node is not None else None
        iv = self.settings.republish_interval_s
        if last is None or iv <= 0 or profile.at - last.at >= iv:
            return True
        return bool(msgspec.structs.replace(profile, at=last.at) != last)
