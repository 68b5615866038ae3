"""The profiler's state: usage models per pod, per workload, per priority class and per node system.

Pure (no I/O): feed it pod events and NodeMetrics, ask it for :class:`NodeProfile`s and
:class:`WorkloadProfile`s. Each NodeMetric is one sample for every model of its node (REFERENCE.md §7;
our reports are 60 s windows, so the sample is the reported usage). CPU histograms hold
cores (first bucket 0.025 core, up to 1024 cores), memory histograms bytes (first
bucket 5 MiB, up to 2 TiB), both growing 5 % per bucket.

A workload is (namespace, ``PodSpec.app``), the pods' owner. Its model receives every per-pod
sample of every one of its pods, on whatever node: it is the usage distribution of *one replica*,
which is what a new replica needs (not the sum over replicas, which depends on how many there are
and where they run). A pod without app has no workload model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import numpy as np

from colo.messages import (
    NodeMetric,
    NodeProfile,
    PodPrediction,
    PriorityClass,
    Usage,
    WorkloadPrediction,
    WorkloadProfile,
)
from colo_profiler.adaptive import AdaptivePeaks
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

WorkloadKey = tuple[str, str]
"""(namespace, app) of a workload, the owner of its pods (as the descheduler's workloads)."""


@dataclass
class WorkloadModel:
    """One workload's model: a row fed with the usage samples of all its pods; times in seconds."""

    key: WorkloadKey
    row: int
    first_seen: float
    """Time of its first sample: the model is warm ``cold_start_s`` later."""
    last_seen: float
    pods: set[str] = field(default_factory=set)
    """Pods whose samples currently go to this row."""


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
    workload: WorkloadKey | None = None
    """(namespace, app) from the pod's spec; None = no workload model."""
    wl: WorkloadModel | None = None
    """The workload model its samples go to, set at its first sample after the workload is known."""


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
    """Decaying usage models of every node, pod, workload and priority class (REFERENCE.md §7).

    Rows of the CPU and memory banks are allocated in pairs (same index in both).
    """

    def __init__(self, settings: ProfilerSettings | None = None) -> None:
        self.settings = settings or ProfilerSettings()
        self.cpu = HistogramBank(CPU_BUCKETS, self.settings.cpu_half_life_s, capacity=256)
        self.memory = HistogramBank(MEMORY_BUCKETS, self.settings.memory_half_life_s, capacity=256)
        self.nodes: dict[str, NodeModel] = {}
        self.pods: dict[str, PodModel] = {}
        self.allocatable: dict[str, Usage] = {}
        self.workloads: dict[WorkloadKey, WorkloadModel] = {}
        self.waiting: dict[str, set[str]] = {}
        """Pods bound to a node not reported yet, per node name."""
        self.samples = 0
        """Samples ingested: per NodeMetric one per pod, per priority class and for the system."""
        self.workload_samples = 0
        """Per-pod samples also added to a workload model."""
        self.workloads_published: float | None = None
        """When workload profiles were last computed, seconds."""
        self.workloads_sent: dict[str, WorkloadProfile] = {}
        """The last WorkloadProfile published per namespace."""
        self._rows: list[int] = []
        self._cpu: list[int] = []
        self._mem: list[int] = []
        self._times: list[tuple[float, int]] = []
        s = self.settings
        self.adaptive: AdaptivePeaks | None = None
        """Learned per-pod margins when ``peak_method`` is "adaptive" (colo_profiler.adaptive), else None."""
        if s.peak_method == "adaptive":
            self.adaptive = AdaptivePeaks(s.margin_window_s, s.residual_window,
                                          (s.cpu_violation_price, s.memory_violation_price), s.min_margin,
                                          capacity=self.cpu.weights.shape[0])

    # ------------------------------------------------------------------ rows

    def _alloc(self) -> int:
        row = self.cpu.alloc()
        if self.memory.alloc() != row:  # both banks grow and free together
            raise RuntimeError("histogram banks out of step")
        if self.adaptive is not None:
            self.adaptive.grow(self.cpu.weights.shape[0])
        return row

    def _free(self, row: int) -> None:
        if row >= 0:
            self.flush()  # buffered samples may still point at this row
            self.cpu.free(row)
            self.memory.free(row)
            if self.adaptive is not None:
                self.adaptive.clear(row)

    def _node(self, name: str, now: float) -> NodeModel:
        node = self.nodes.get(name)
        if node is None:
            node = NodeModel(name, {c: self._alloc() for c in PRIORITY_CLASSES}, self._alloc(), now,
                             allocatable=self.allocatable.get(name))
            # pods bound before the node's first report belong to it too
            pods = self.pods
            node.pods = {u for u in self.waiting.pop(name, ()) if u in pods and pods[u].node == name}
            self.nodes[name] = node
        return node

    # ------------------------------------------------------------------ events

    def node_registered(self, name: str, allocatable: Usage) -> None:
        """Remember a node's allocatable (caps in REFERENCE.md §7)."""
        self.allocatable[name] = allocatable
        if name in self.nodes:
            self.nodes[name].allocatable = allocatable

    def pod_bound(self, uid: str, node: str, cpu_request: int, memory_request: int,
                  priority_class: PriorityClass, at: float, workload: WorkloadKey | None = None) -> None:
        """A pod was bound (or reported running): its requests, class, start time and, when known (not
        None), its workload (namespace, app)."""
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
        if workload is not None and workload != pod.workload:
            self._leave_workload(pod)
            pod.workload = workload
        if node in self.nodes:
            self.nodes[node].pods.add(uid)
        else:
            self.waiting.setdefault(node, set()).add(uid)

    def pod_ended(self, uid: str) -> None:
        """A pod terminated: drop it and its model (its workload's model stays)."""
        pod = self.pods.pop(uid, None)
        if pod is not None:
            self._detach(pod)
            self._leave_workload(pod)
            self._free(pod.row)

    def _leave_workload(self, pod: PodModel) -> None:
        if pod.wl is not None:
            pod.wl.pods.discard(pod.uid)
            pod.wl = None

    def _attach(self, pod: PodModel, priority_class: PriorityClass | None, t: float) -> None:
        """Give ``pod`` its row at its first sample, and join its workload's model (created if new)."""
        if pod.row < 0:
            pod.row = self._alloc()
            if pod.priority_class is None:
                pod.priority_class = priority_class
        if pod.wl is None and pod.workload is not None:
            wl = self.workloads.get(pod.workload)
            if wl is None:
                wl = self.workloads[pod.workload] = WorkloadModel(pod.workload, self._alloc(), t, t)
            elif t < wl.first_seen:
                wl.first_seen = t
            wl.pods.add(pod.uid)
            pod.wl = wl

    def _detach(self, pod: PodModel) -> None:
        node = self.nodes.get(pod.node)
        if node is not None:
            node.pods.discard(pod.uid)
        else:
            waiting = self.waiting.get(pod.node)
            if waiting is not None:
                waiting.discard(pod.uid)
                if not waiting:
                    del self.waiting[pod.node]

    def ingest(self, metric: NodeMetric) -> int:
        """Queue one sample per pod, per priority class and for the system; returns that count (each pod's
        sample also goes to its workload's model, counted in :attr:`workload_samples`).

        Samples are buffered and added to the histograms in one vectorized call per
        :data:`FLUSH_SAMPLES` samples or before any query (:meth:`flush`).
        """
        t = metric.at
        ad = self.adaptive
        if ad is not None:
            window = ad.window_of(t)
            if ad.window is None:
                ad.start(window)
            elif window > ad.window:
                self.roll(window)
        node = self._node(metric.node, t)
        if t > node.last_seen:
            node.last_seen = t
        rows, cpu, mem = self._rows, self._cpu, self._mem
        class_cpu = dict.fromkeys(PRIORITY_CLASSES, 0)
        class_mem = dict.fromkeys(PRIORITY_CLASSES, 0)
        pods, name = self.pods, node.name
        extra = 0
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
            if pod.row < 0 or (pod.wl is None and pod.workload is not None):
                self._attach(pod, pm.priority_class, t)
            if t > pod.last_seen:
                pod.last_seen = t
            cls = pod.priority_class or pm.priority_class or "none"
            class_cpu[cls] += pm.cpu
            class_mem[cls] += pm.memory
            rows.append(pod.row)
            cpu.append(pm.cpu)
            mem.append(pm.memory)
            wl = pod.wl
            if wl is not None:
                rows.append(wl.row)
                cpu.append(pm.cpu)
                mem.append(pm.memory)
                if t > wl.last_seen:
                    wl.last_seen = t
                extra += 1
        for cls, row in node.class_rows.items():
            rows.append(row)
            cpu.append(class_cpu[cls])
            mem.append(class_mem[cls])
        rows.append(node.system_row)
        cpu.append(metric.system_usage.cpu)
        mem.append(metric.system_usage.memory)
        n = len(metric.pods) + len(PRIORITY_CLASSES) + 1
        self._times.append((t, n + extra))
        self.samples += n
        self.workload_samples += extra
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
        if self.adaptive is not None:
            self.adaptive.observe(rows, cpu, mem, times)

    def roll(self, window: int) -> None:
        """Adaptive: close the current margin window and open ``window`` (see colo_profiler.adaptive): every
        sample buffered so far is added first, so the new bases come from earlier samples only."""
        ad = self.adaptive
        if ad is None:
            raise RuntimeError("roll() needs peak_method = 'adaptive'")
        self.flush()
        pods = [p for p in self.pods.values() if p.row >= 0]
        rows = np.array([p.row for p in pods], dtype=np.intp)
        requests = np.array([(p.cpu_request / 1000.0, float(p.memory_request)) for p in pods],
                            dtype=np.float64).reshape(-1, 2)
        ad.roll(window, rows, self._bases(rows), requests)

    def _bases(self, rows: np.ndarray) -> np.ndarray:
        """Percentiles (no margin) of ``rows``, shape ``(n, 2)``: CPU cores, memory bytes."""
        s = self.settings
        return np.stack([self.cpu.percentiles(rows, s.cpu_percentile),
                         self.memory.percentiles(rows, s.memory_percentile)], axis=1)

    def expire(self, now: float) -> list[str]:
        """Drop pods, workloads and nodes unseen for ``expiry_s``; returns the expired node names."""
        self.flush()
        limit = now - self.settings.expiry_s
        for uid in [u for u, p in self.pods.items() if p.last_seen < limit]:
            self.pod_ended(uid)
        for key in [k for k, wl in self.workloads.items() if wl.last_seen < limit]:
            wl = self.workloads.pop(key)
            for uid in wl.pods:  # bound again lately but not sampled: rejoin a fresh model when sampled
                pod = self.pods.get(uid)
                if pod is not None:
                    pod.wl = None
            self._free(wl.row)
        gone = [n for n, node in self.nodes.items() if node.last_seen < limit]
        for name in gone:
            node = self.nodes.pop(name)
            for row in (*node.class_rows.values(), node.system_row):
                self._free(row)
            for uid in list(node.pods):
                self.pod_ended(uid)
        return gone

    def forget(self, nodes: list[str], workloads: list[WorkloadKey]) -> None:
        """Drop the models of ``nodes`` (with their pods) and of ``workloads`` (their pods stay, without
        a workload: a later sample does not bring the workload back), as :meth:`expire` would."""
        self.flush()
        for key in workloads:
            wl = self.workloads.pop(key, None)
            for pod in self.pods.values():
                if pod.workload == key:
                    pod.workload, pod.wl = None, None
            if wl is not None:
                self._free(wl.row)
        for name in nodes:
            node = self.nodes.pop(name, None)
            if node is None:
                continue
            for row in (*node.class_rows.values(), node.system_row):
                self._free(row)
            for uid in list(node.pods):
                self.pod_ended(uid)

    # ------------------------------------------------------------------ predictions

    def _peaks(self, rows: list[int]) -> tuple[list[int], list[int]]:
        """Peak CPU (milli-cores) and memory (bytes) of each row: percentile × (1 + margin)."""
        self.flush()
        s = self.settings
        scale = (100 + s.margin_percent) / 100.0
        cpu = self.cpu.percentiles(rows, s.cpu_percentile) * 1000.0 * scale
        mem = self.memory.percentiles(rows, s.memory_percentile) * scale
        return np.rint(cpu).astype(int).tolist(), np.rint(mem).astype(int).tolist()

    def workload_warm(self, wl: WorkloadModel, now: float) -> bool:
        """Whether ``wl`` has been observed for at least ``cold_start_s`` (the period a pod's own model needs)."""
        return now - wl.first_seen >= self.settings.cold_start_s

    def profile(self, name: str, now: float) -> NodeProfile:
        """The NodeProfile of node ``name`` at ``now``. Raises KeyError for an unknown node."""
        return self.profiles([name], now)[0]

    def profiles(self, names: list[str], now: float) -> list[NodeProfile]:
        """The NodeProfiles of nodes ``names`` at ``now`` (same order), with one percentile pass per bank
        for all of them. Raises KeyError for an unknown node."""
        nodes = [self.nodes[n] for n in names]
        cold_start_s = self.settings.cold_start_s
        per_node: list[tuple[NodeModel, list[PodModel], list[PodModel], int]] = []
        rows: list[int] = []
        wanted: dict[WorkloadKey, WorkloadModel] = {}
        for node in nodes:
            pods = sorted((self.pods[u] for u in node.pods if u in self.pods), key=lambda p: p.uid)
            modelled = [p for p in pods if p.row >= 0]
            per_node.append((node, pods, modelled, len(rows)))
            rows += [p.row for p in modelled]
            rows += [node.class_rows["prod"], node.system_row]
            if self.settings.cold_start_from_workload:
                for p in pods:
                    wl = self.workloads.get(p.workload) if p.workload is not None else None
                    if (wl is not None and (p.row < 0 or p.started_at is None or now - p.started_at < cold_start_s)
                            and self.workload_warm(wl, now)):
                        wanted[wl.key] = wl
        base = len(rows)
        rows += [wl.row for wl in wanted.values()]
        cpu_peaks, mem_peaks = self._peaks(rows)
        if self.adaptive is not None:
            self._adapt(per_node, cpu_peaks, mem_peaks)
        wl_peaks = {key: (cpu_peaks[base + i], mem_peaks[base + i]) for i, key in enumerate(wanted)}
        return [self._build(node, pods, modelled, cpu_peaks, mem_peaks, first, wl_peaks, now)
                for node, pods, modelled, first in per_node]

    def _adapt(self, per_node: list[tuple[NodeModel, list[PodModel], list[PodModel], int]], cpu_peaks: list[int],
               mem_peaks: list[int]) -> None:
        """Replace the reference peaks of modelled pods that have a learned margin by their adaptive peaks."""
        assert self.adaptive is not None
        index = [first + i for _, _, modelled, first in per_node for i in range(len(modelled))]
        pods = [p for _, _, modelled, _ in per_node for p in modelled]
        if not pods:
            return
        rows = np.array([p.row for p in pods], dtype=np.intp)
        requests = np.array([(p.cpu_request / 1000.0, float(p.memory_request)) for p in pods], dtype=np.float64)
        peak, use = self.adaptive.peaks(rows, self._bases(rows), requests)
        cpu = np.rint(peak[:, 0] * 1000.0).astype(int).tolist()
        mem = np.rint(peak[:, 1]).astype(int).tolist()
        for j, (i, (uc, um)) in enumerate(zip(index, use.tolist())):
            if uc:
                cpu_peaks[i] = cpu[j]
            if um:
                mem_peaks[i] = mem[j]

    def _build(self, node: NodeModel, pods: list[PodModel], modelled: list[PodModel], cpu_peaks: list[int],
               mem_peaks: list[int], base: int, wl_peaks: dict[WorkloadKey, tuple[int, int]],
               now: float) -> NodeProfile:
        """One NodeProfile from the peaks of its rows, which start at ``base`` (modelled pods, prod, system);
        ``wl_peaks`` are the peaks of the warm workloads of its pods that lack a usable model of their own."""
        k = len(modelled)
        peak_of = {p.uid: (cpu_peaks[base + i], mem_peaks[base + i]) for i, p in enumerate(modelled)}
        prod_cpu, prod_mem = cpu_peaks[base + k], mem_peaks[base + k]
        sys_cpu, sys_mem = cpu_peaks[base + k + 1], mem_peaks[base + k + 1]
        predictions: list[PodPrediction] = []
        req_cpu: list[int] = []
        req_mem: list[int] = []
        peak_cpu: list[int] = []
        peak_mem: list[int] = []
        warm_cpu = warm_mem = extra_cpu = extra_mem = 0
        cold_start_s = self.settings.cold_start_s
        for p in pods:
            cold = p.started_at is None or now - p.started_at < cold_start_s
            own = peak_of.get(p.uid)
            wp = wl_peaks.get(p.workload) if p.workload is not None else None
            from_workload = False
            if not cold and own is not None:
                c, m = own
            elif wp is not None:
                # The replica's distribution; the pod's own peak so far if higher; never above the request.
                c, m = (max(wp[0], own[0]), max(wp[1], own[1])) if own is not None else wp
                c = min(c, p.cpu_request) if p.cpu_request > 0 else c
                m = min(m, p.memory_request) if p.memory_request > 0 else m
                from_workload = True
            else:
                c, m = p.cpu_request, p.memory_request
            predictions.append(PodPrediction(uid=p.uid, cpu_peak=c, memory_peak=m, cold=cold,
                                             from_workload=from_workload))
            if p.priority_class == "prod":
                req_cpu.append(p.cpu_request)
                req_mem.append(p.memory_request)
                peak_cpu.append(c)
                peak_mem.append(m)
                if not cold or from_workload:
                    warm_cpu += p.cpu_request
                    warm_mem += p.memory_request
                if from_workload:  # its usage so far is in the class peak too: counted twice, on purpose
                    extra_cpu += c
                    extra_mem += m
        alloc = node.allocatable
        reclaim = Usage(
            cpu=prod_reclaimable(req_cpu, peak_cpu, warm_cpu, sys_cpu, prod_cpu + extra_cpu,
                                 alloc.cpu if alloc else None),
            memory=prod_reclaimable(req_mem, peak_mem, warm_mem, sys_mem, prod_mem + extra_mem,
                                    alloc.memory if alloc else None),
        )
        return NodeProfile(node=node.name, at=now, prod_reclaimable=reclaim,
                           system_peak=Usage(cpu=sys_cpu, memory=sys_mem),
                           prod_peak=Usage(cpu=prod_cpu, memory=prod_mem), pods=predictions)

    def workload_profiles(self, now: float) -> list[WorkloadProfile]:
        """One WorkloadProfile per namespace with a workload model, sorted by namespace, workloads by app;
        one percentile pass per bank for all of them."""
        keys = sorted(self.workloads)
        cpu, mem = self._peaks([self.workloads[k].row for k in keys])
        by_ns: dict[str, list[WorkloadPrediction]] = {}
        for (ns, app), c, m in zip(keys, cpu, mem):
            wl = self.workloads[(ns, app)]
            by_ns.setdefault(ns, []).append(WorkloadPrediction(
                app=app, cpu_peak=c, memory_peak=m, pods=len(wl.pods), since=wl.first_seen,
                warm=self.workload_warm(wl, now)))
        return [WorkloadProfile(namespace=ns, at=now, workloads=w) for ns, w in by_ns.items()]

    # ------------------------------------------------------------------ publishing

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
        return self._worth(node.last_sent if node is not None else None, profile)

    def _worth(self, last: NodeProfile | WorkloadProfile | None, new: NodeProfile | WorkloadProfile) -> bool:
        iv = self.settings.republish_interval_s
        if last is None or iv <= 0 or new.at - last.at >= iv:
            return True
        return bool(msgspec.structs.replace(new, at=last.at) != last)

    def workload_updates(self, now: float) -> list[WorkloadProfile]:
        """The WorkloadProfiles to publish at ``now``, recorded as sent: none until ``publish_interval_s``
        has passed since the last computation; then each namespace's profile when worth sending (as
        :meth:`worth_sending`), and an empty one for a namespace whose workloads all expired."""
        last = self.workloads_published
        if last is not None and now - last < self.settings.publish_interval_s:
            return []
        self.workloads_published = now
        current = self.workload_profiles(now)
        names = {p.namespace for p in current}
        out = [p for p in current if self._worth(self.workloads_sent.get(p.namespace), p)]
        out += [WorkloadProfile(namespace=ns, at=now) for ns in sorted(self.workloads_sent) if ns not in names]
        for p in out:
            if p.workloads:
                self.workloads_sent[p.namespace] = p
            else:
                self.workloads_sent.pop(p.namespace, None)
        return out
