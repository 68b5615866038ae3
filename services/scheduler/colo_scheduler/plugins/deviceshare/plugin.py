"""DeviceShare: GPUs (whole or a share of one) chosen at Reserve, fragmentation-aware Score (Koordinator
``pkg/scheduler/plugins/deviceshare``; docs/gpu.md "The DeviceShare plugin").

A pod's GPU request is ``PodSpec.gpu`` (:class:`colo.messages.GPURequest`: ``count`` devices of ``milli``
milli-GPU, allowed ``models``; parsed from ``nvidia.com/gpu``, ``koordinator.sh/gpu-core``/``gpu-memory-ratio``,
``colo.io/gpu-milli``, ``colo.io/gpu-spec`` by :mod:`colo.manifests.gpu`). A node's GPUs are ``NodeSpec.gpus``.

* Filter: a GPU pod passes a node with ``count`` GPUs of an allowed model having ``milli`` free each (a whole
  GPU needs 1000 free: whole-GPU pods never share). Pods without a GPU request pass (``filter`` is None).
* Score: the policy's node score s in GPUs (``Ours`` — :mod:`.fgdplus`, FGD's fragmentation gradient plus
  CPU-stranded GPU and a packing tie-break; or ``FGD``, s = −ΔF / 1000) against the target workload; the raw
  score is ``round(s · 10⁴)`` (10⁻⁴ GPU resolution), which NormalizeScore maps onto 0..100 over the feasible
  nodes, min to max (kube-scheduler's min-max normalisation; one value everywhere → 0). Pods without GPUs are
  scored once the target gives GPUs a CPU need (``score_cpu_pods`` None, the default; True always, False never):
  ΔF, CPU stranding and packing of their CPU on GPU nodes, 0 (the best) on nodes without GPUs; else 0 everywhere.
  CPU and memory fit stay with NodeResourcesFit; the node's free CPU (milli-cores) enters the score as in the
  paper. Filter and Score run compiled over table rows (:mod:`.rows`); ``fit`` and ``evaluate`` are the
  per-node reference.
* Target workload: ``DeviceShareArgs.target`` when given (shapes and weights), else the GPU pods reserved so
  far (shape = CPU request, milli per device, device count), rebuilt when their number reaches 1, 2, 4, …,
  ``refresh_every`` and every ``refresh_every`` after (the authors' "typical pods": the most frequent shapes
  covering 95 %). Until a GPU pod is seen: one whole GPU with no CPU. A rebuild touches every GPU node's row so
  cached scores are recomputed (the row-local contract).
* Reserve: a GPU-share pod takes the device the policy chose (least fragmentation after), else the tightest
  fitting one; whole GPUs the lowest-indexed fully free ones of an allowed model. The choice goes on the pod
  (:data:`ASSIGNED_DEVICES`, ``"index:milli,..."``); a pod that arrives with devices (adopted from the store)
  books exactly those. Unreserve frees them.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import msgspec
import numpy as np

from colo.messages import GPURequest, NodeSpec, PodSpec, devices_format, devices_parse
from colo_scheduler.framework.interface import (
    NODE_ADD,
    POD_DELETE,
    CycleState,
    IntpArray,
    SparseScores,
)
from colo_scheduler.plugins.deviceshare.book import NodeGPUs
from colo_scheduler.plugins.deviceshare.fgdplus import PACKING_WEIGHT, STRANDING_WEIGHT, cpu_per_gpu
from colo_scheduler.plugins.deviceshare.frag import delta_one
from colo_scheduler.plugins.deviceshare.policies import MAX_SPEC_CPU, MAX_SPEC_GPU
from colo_scheduler.plugins.deviceshare.preempt import candidate_rows, hold_devices, hold_key, simulate
from colo_scheduler.plugins.deviceshare.rows import (
    NO_FIT,
    RAW_PER_GPU,
    GpuRows,
    ScoreCache,
    fit_rows,
    min_max,
    score_target,
    warm_up,
)
from colo_scheduler.plugins.deviceshare.state import GPU_MILLI, TargetWorkload
from colo_scheduler.podinfo import ASSIGNED_DEVICES, IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

log = logging.getLogger("colo.scheduler")

_NO_GPU = GPURequest(count=0, milli=0)
"""The score request of a CPU pod under ``score_cpu_pods``."""
_NO_MODEL = 62
"""Model bit of a name no node has: a pod restricted to it fits nowhere."""


class TargetShape(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One pod shape of a configured target workload: ``cpu`` milli-cores, ``gpu_milli`` per device,
    ``num_gpu`` devices, relative ``weight``."""

    cpu: int = 0
    gpu_milli: int = GPU_MILLI
    num_gpu: int = 1
    weight: float = 1.0


class DeviceShareArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arguments of DeviceShare: ``policy`` (``Ours`` default, or ``FGD``), ``target`` (a fixed target
    workload; empty = the GPU pods seen so far), ``refresh_every`` (GPU pods between rebuilds of the seen
    target, after the doubling start; module doc)."""

    policy: Literal["Ours", "FGD"] = "Ours"
    target: list[TargetShape] = []
    refresh_every: int = 2048
    score_cpu_pods: bool | None = None
    """Score pods without GPUs too: True always, False never (they score 0 everywhere, Koordinator's
    behaviour), None (default) when the target workload gives its GPUs a CPU need (r̄ > 0: some GPU shape asks
    for CPU), the only case where a CPU pod can change ΔF or the CPU-stranded GPU. A scored CPU pod gets on a
    GPU node the policy's score of its CPU (ΔF, CPU stranding, packing), on a node without GPUs 0, the best
    score (it strands no GPU there)."""


__all__ = ["NO_FIT", "RAW_PER_GPU", "DeviceShare", "DeviceShareArgs", "TargetShape", "normalize_min_max"]


def normalize_min_max(raw: IntArray, feasible: BoolArray) -> SparseScores | int:
    """``100 · (raw − min) // (max − min)`` with min and max over the feasible nodes (0 elsewhere) as
    :class:`SparseScores` over the rows above 0 (:func:`.rows.min_max`; the framework then picks with one
    compiled pass instead of dense vector operations); the int 0 when every feasible node has the same raw
    score. (Measured against a scale from the best node down, 10⁻³ GPU per point: min-max allocated more GPUs
    in ``bench/deviceshare_trace.py``, docs/gpu.md.)"""
    out = min_max(raw, feasible)
    return 0 if out is None else SparseScores(0, out[0], out[1])


class DeviceShare:
    """The plugin (module doc). State: per node name its :class:`NodeGPUs`; model name → bit; the target."""

    name = "DeviceShare"
    events = frozenset({NODE_ADD, POD_DELETE})
    settled_none = True  # filter() is None for a pod without a GPU request at every table state
    app_blind = True

    MEMO_SIZE = 65_536

    def __init__(self, args: DeviceShareArgs | None = None) -> None:
        self.args = args or DeviceShareArgs()
        self.nodes: dict[str, NodeGPUs] = {}
        self._specs: dict[str, NodeSpec] = {}
        self._models: dict[str, int] = {}
        self._seen: Counter[tuple[int, int, int, int]] = Counter()
        self._seen_total = 0
        self._next_refresh = 1
        self.target_version = 0
        self._memo: dict[tuple[object, ...], tuple[float, int]] = {}
        self.cache = ScoreCache()
        """Raw scores per pod shape, policy and row (cleared with every new target)."""
        self.rows = GpuRows()
        """The bookings as arrays over the node table's rows (the compiled Filter and Score read them)."""
        self._table: NodeTable | None = None
        self._node_seq = -1
        warm_up()  # the compiled Filter and Score loaded (or compiled) now, not inside the first decision
        if self.args.target:
            counts = {(t.cpu, t.gpu_milli, t.num_gpu, 0): t.weight for t in self.args.target}
            self._set_target(TargetWorkload.from_counts(counts))
        else:
            self._set_target(TargetWorkload.from_counts({(0, GPU_MILLI, 1, 0): 1.0}))

    # ------------------------------------------------------------------ target workload

    def _set_target(self, target: TargetWorkload) -> None:
        self.target = target
        self._ratio = cpu_per_gpu(target)
        self.target_version += 1
        self._memo.clear()
        self.cache.clear()

    def _observe(self, table: NodeTable, req: GPURequest, cpu: int) -> None:
        """Count a reserved GPU pod into the seen target; rebuild it at the refresh points (module doc)."""
        if self.args.target:
            return
        self._seen[(cpu, req.milli, req.count, 0)] += 1
        self._seen_total += 1
        if self._seen_total < self._next_refresh:
            return
        step = self.args.refresh_every
        self._next_refresh = self._next_refresh * 2 if self._next_refresh < step else self._next_refresh + step
        self._set_target(TargetWorkload.from_counts(self._seen, 0.95))
        for name in self.nodes:
            i = table.index.get(name)
            if i is not None:
                table.touch(i)

    # ------------------------------------------------------------------ pod and node facts

    def request(self, pod: PodInfo) -> GPURequest | None:
        """The pod's GPU request (None: no GPU)."""
        return pod.spec.gpu

    def score_request(self, pod: PodInfo) -> GPURequest | None:
        """What the Score scores: the GPU request; a CPU pod as zero GPUs with ``score_cpu_pods``; else None."""
        return self.score_request_of(pod.spec)

    def score_request_of(self, spec: PodSpec) -> GPURequest | None:
        """:meth:`score_request` of a spec."""
        if spec.gpu is None:
            wanted = self.args.score_cpu_pods
            return _NO_GPU if wanted or (wanted is None and self._ratio > 0) else None
        return spec.gpu

    def model_bit(self, name: str) -> int:
        """The bit of GPU model ``name`` (assigned on first sight, up to 62 models)."""
        bit = self._models.get(name)
        if bit is None:
            bit = self._models[name] = min(len(self._models), _NO_MODEL - 1)
        return bit

    def node(self, table: NodeTable, i: int) -> NodeGPUs | None:
        """The GPUs of row ``i`` (None: the node has none); rebuilt, bookings kept, when its spec changes."""
        spec = table.specs[i]
        if self._specs.get(spec.name) is not spec:
            self._specs[spec.name] = spec
            old = self.nodes.pop(spec.name, None)
            if spec.gpus:
                fresh = NodeGPUs.of(list(spec.gpus))
                for m in fresh.models:
                    self.model_bit(m)
                if old is not None:
                    fresh.version = old.version + 1
                    for uid, held in old.pods.items():
                        moved = tuple((fresh.position(old.index[p]), m) for p, m in held)
                        for problem in fresh.add(uid, moved):
                            log.error("pod %s on %s after a node update: %s", uid, spec.name, problem)
                self.nodes[spec.name] = fresh
            self._write(i, self.nodes.get(spec.name))
        return self.nodes.get(spec.name)

    def _write(self, i: int, gpus: NodeGPUs | None) -> None:
        """Row ``i`` of :attr:`rows` from ``gpus`` (None: the node has none)."""
        if gpus is None:
            self.rows.write(i, None, [])
        else:
            self.rows.write(i, gpus.free, [self.model_bit(m) for m in gpus.models])

    def sync(self, table: NodeTable) -> None:
        """Bring :attr:`rows` up to date with the table's node specs (rows added or whose spec changed since
        the last call; every row for a new table or when the table's node log no longer reaches back)."""
        seq = table.node_change_seq
        if table is self._table and seq == self._node_seq:
            return
        changed = table.node_changes_since(self._node_seq) if table is self._table else None
        if table is not self._table:
            self._specs.clear()  # every row is rewritten from its spec, bookings kept by node name
        self._table = table
        self._node_seq = seq
        self.rows.ensure(table.n)
        for i in (range(table.n) if changed is None else set(changed)):
            if i < table.n:
                self.node(table, i)

    def mask(self, req: GPURequest) -> int:
        """Bit mask of the models ``req`` allows (0: any; a bit no node has when it names no known model)."""
        if not req.models:
            return 0
        out = 0
        for m in req.models:
            bit = self._models.get(m)
            if bit is not None:
                out |= 1 << bit
        return out or 1 << _NO_MODEL

    def allowed(self, gpus: NodeGPUs, req: GPURequest) -> list[int]:
        """Positions of ``gpus`` whose model ``req`` allows (every position when it names none)."""
        if not req.models:
            return list(range(len(gpus.index)))
        return [p for p, m in enumerate(gpus.models) if m in req.models]

    def fit(self, table: NodeTable, i: int, req: GPURequest) -> bool:
        """True when row ``i`` has ``req.count`` allowed GPUs with ``req.milli`` free each."""
        gpus = self.node(table, i)
        if gpus is None:
            return False
        return sum(1 for p in self.allowed(gpus, req) if gpus.free[p] >= req.milli) >= req.count

    # ------------------------------------------------------------------ filter

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the pod's GPUs fit; None for a pod without a GPU request."""
        req = self.request(pod)
        if req is None:
            return None
        table = state.table
        self.sync(table)
        return fit_rows(np.arange(table.n, dtype=np.intp), self.rows.free, self.rows.bits, req.count, req.milli,
                        self.mask(req))

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> BoolArray:
        """(len(rows),) the filter on ``rows``."""
        req = self.request(pod)
        if req is None:
            return np.ones(len(rows), np.bool_)
        self.sync(state.table)
        return fit_rows(rows, self.rows.free, self.rows.bits, req.count, req.milli, self.mask(req))

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """The filter on row ``i``."""
        req = self.request(pod)
        if req is None:
            return True
        self.sync(state.table)
        return bool(fit_rows(np.array([i], np.intp), self.rows.free, self.rows.bits, req.count, req.milli,
                             self.mask(req))[0])

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """Reason → number of ``rejected`` nodes this plugin rejects for it."""
        req = self.request(pod)
        out: dict[str, int] = {}
        if req is None:
            return out
        self.sync(state.table)
        rows = np.flatnonzero(rejected)
        g = self.rows
        mask = self.mask(req)
        none = ~g.has[rows]
        model = (~none & ~((g.bits[rows] & mask) != 0).any(axis=1)) if mask else np.zeros(len(rows), np.bool_)
        short = ~none & ~model & ~fit_rows(rows, g.free, g.bits, req.count, req.milli, mask)
        whys = (("no GPUs", none), ("no GPU of model " + "|".join(req.models), model),
                ("Insufficient nvidia.com/gpu" if req.milli >= GPU_MILLI else "Insufficient GPU share", short))
        for why, hit in whys:
            count = int(np.count_nonzero(hit))
            if count:
                out[why] = count
        return out

    # ------------------------------------------------------------------ score

    def evaluate(self, table: NodeTable, i: int, req: GPURequest, cpu: int, fresh: bool = False
                 ) -> tuple[float, int]:
        """(node score in GPUs, position a GPU-share pod would take or −1) on row ``i`` for a pod that
        fits; (−inf, −1) where it does not (memoised on the node's version and the target; ``fresh``: computed
        anew, the per-node loop oracle compares the two)."""
        gpus = self.node(table, i)
        cpu_free = int(table.free[i, 0])
        if gpus is None and req.count == 0:  # a CPU pod on a node without GPUs strands no GPU
            return 0.0, -1
        if gpus is None or not self.fit(table, i, req):
            return -math.inf, -1
        key = (table.names[i], gpus.version, cpu_free, self.target_version, req.count, req.milli,
               tuple(req.models), cpu)
        got = None if fresh else self._memo.get(key)
        if got is not None:
            return got
        allowed = self.allowed(gpus, req)
        row = gpus.free.copy()
        if len(allowed) < len(gpus.index):  # the pod cannot take the other models' GPUs: hide them
            mask = np.zeros_like(row)
            mask[allowed] = 1
            row = row * mask
        row = np.maximum(row, 0)
        t = self.target
        model = self.model_bit(gpus.models[0]) if gpus.models else 0
        delta, dev = delta_one(row, max(cpu_free, 0), model, cpu, req.count, req.milli,
                               t.cpu, t.gpu_milli, t.num_gpu, t.models, t.prob)
        if self.args.policy == "FGD":
            s = -delta / 1000.0
        else:
            g = int(row.sum())
            p_gpu = req.count * req.milli
            ds = 0.0
            if self._ratio > 0:
                ds = (max(0.0, (g - p_gpu) - (cpu_free - cpu) / self._ratio)
                      - max(0.0, g - cpu_free / self._ratio))
            left = 0.5 * (cpu_free - cpu) / MAX_SPEC_CPU + 0.5 * (g - p_gpu) / MAX_SPEC_GPU
            s = -delta / 1000.0 - STRANDING_WEIGHT * ds / 1000.0 - PACKING_WEIGHT * left
        got = (s, int(dev))
        if len(self._memo) >= self.MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = got
        return got

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """Raw score of row ``i``: ``round(s · RAW_PER_GPU)``, :data:`NO_FIT` where the pod does not fit."""
        req = self.score_request(pod)
        if req is None:
            return 0
        return int(self._scored(state.table, np.array([i], np.intp), req, pod.spec.requests.cpu)[0][0])

    def _scored(self, table: NodeTable, rows: IntpArray, req: GPURequest, cpu: int) -> tuple[IntArray, IntArray]:
        """(raw scores, device) over ``rows`` (:func:`.rows.score_rows`, the compiled :meth:`evaluate`)."""
        self.sync(table)
        return score_target(rows, self.rows, table.free[:, 0], req.count, req.milli, self.mask(req), cpu,
                            self.target, self._ratio, self.args.policy != "FGD", self.cache)

    def normalize(self, state: CycleState, pod: PodInfo, raw: IntArray, feasible: BoolArray) -> SparseScores | int:
        """Min-max over the feasible nodes onto 0..100 (:func:`normalize_min_max`); 0 for unscored pods."""
        if self.score_request(pod) is None:
            return 0
        return normalize_min_max(raw, feasible)

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) raw scores (:meth:`score_node`)."""
        return self.score_rows(state, pod, np.arange(state.table.n, dtype=np.intp))

    def score_rows(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> IntArray:
        """(len(rows),) raw scores (:meth:`score_node`)."""
        req = self.score_request(pod)
        if req is None:
            return np.zeros(len(rows), np.int64)
        return self._scored(state.table, rows, req, pod.spec.requests.cpu)[0]

    # ------------------------------------------------------------------ reserve

    def choose(self, table: NodeTable, i: int, req: GPURequest, cpu: int) -> tuple[tuple[int, int], ...] | None:
        """((position, milli), ...) for ``req`` on row ``i`` (module doc, Reserve); None when it does not fit."""
        gpus = self.node(table, i)
        if gpus is None or not self.fit(table, i, req):
            return None
        allowed = self.allowed(gpus, req)
        if req.count == 1 and req.milli < GPU_MILLI:
            dev = int(self._scored(table, np.array([i], np.intp), req, cpu)[1][0])
            if dev not in allowed or gpus.free[dev] < req.milli:
                dev = min((int(gpus.free[p]), p) for p in allowed if gpus.free[p] >= req.milli)[1]
            return ((dev, req.milli),)
        free = [p for p in allowed if gpus.free[p] >= GPU_MILLI]
        return tuple((p, GPU_MILLI) for p in free[:req.count])

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Book the pod's GPUs on row ``node`` (carried-in devices as they are, else :meth:`choose`)."""
        req = self.request(pod)
        carried = pod.extra.get(ASSIGNED_DEVICES)
        if req is None and not carried:
            return
        name = table.names[node]
        gpus = self.node(table, node)
        if gpus is None:
            log.error("pod %s on %s: the node has no GPUs, the pod gets none", pod.uid, name)
            return
        if isinstance(carried, str) and carried:
            try:
                chosen = tuple((gpus.position(idx), milli) for idx, milli in devices_parse(carried))
            except ValueError as exc:
                log.error("pod %s on %s: stored devices %r ignored: %s", pod.uid, name, carried, exc)
                return
        else:
            assert req is not None
            got = self.choose(table, node, req, pod.spec.requests.cpu)
            if got is None:  # the state moved since the filter
                log.error("pod %s on %s gets no GPU: none fits any more", pod.uid, name)
                return
            chosen = got
        for problem in gpus.add(pod.uid, chosen):
            log.error("pod %s on %s: %s", pod.uid, name, problem)
        self._write(node, gpus)
        pod.extra[ASSIGNED_DEVICES] = devices_format([(gpus.index[p], m) for p, m in gpus.pods[pod.uid]])
        table.touch(node)
        if req is not None:
            self._observe(table, req, pod.spec.requests.cpu)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Free the pod's GPUs on row ``node``."""
        pod.extra.pop(ASSIGNED_DEVICES, None)
        gpus = self.nodes.get(table.names[node])
        if gpus is not None and gpus.remove(pod.uid):
            self._write(node, gpus)
            table.touch(node)

    # ------------------------------------------------------------------ preemption (PreemptionRemovalSimulator)

    def preemption_applies(self, pod: PodInfo) -> bool:
        """True for a GPU pod: removing pods frees GPUs only for it."""
        return self.request(pod) is not None

    def preemption_candidates(self, state: CycleState, pod: PodInfo, below: int) -> BoolArray:
        """(n,) rows whose allowed GPUs could hold the pod once every pod of priority below ``below`` left
        (:func:`.preempt.candidate_rows`); all True for a pod without a GPU request."""
        table = state.table
        req = self.request(pod)
        if req is None:
            return np.ones(table.n, np.bool_)
        assigned = table.assigned

        def priority_of(uid: str) -> int | None:
            ap = assigned.get(uid)
            return None if ap is None else ap.pod.priority

        rows = [(i, g) for i in range(table.n) if (g := self.node(table, i)) is not None]
        out = np.zeros(table.n, np.bool_)
        out[candidate_rows(rows, lambda g: self.allowed(g, req), req, priority_of, below)] = True
        return out

    def simulate_remove(self, table: NodeTable, row: int, victim: PodInfo) -> None:
        """Free ``victim``'s GPUs on ``row`` for the victim simulation (:func:`.preempt.simulate`: the bookings
        and the compiled row the Filter reads)."""
        self.sync(table)
        simulate(self.nodes.get(table.names[row]), victim.uid, 1, self.rows.free[row])

    def simulate_add(self, table: NodeTable, row: int, victim: PodInfo) -> None:
        """Book ``victim``'s GPUs on ``row`` again after :meth:`simulate_remove`."""
        simulate(self.nodes.get(table.names[row]), victim.uid, -1, self.rows.free[row])

    def preemption_hold(self, table: NodeTable, row: int, pod: PodInfo, victims: Sequence[str]) -> None:
        """Book the GPUs nominated ``pod`` will take on ``row`` once ``victims`` (uids) left, until
        :meth:`preemption_unhold` (:func:`.preempt.hold_devices`; overcommitted while the victims leave)."""
        req = self.request(pod)
        gpus = self.node(table, row)
        if req is None or gpus is None:
            return
        devices = hold_devices(gpus, self.allowed(gpus, req), req, victims)
        if devices:
            gpus.add(hold_key(pod.uid), devices)  # the overcommit it reports is the point of the hold
            self._write(row, gpus)
            table.touch(row)

    def preemption_unhold(self, table: NodeTable, row: int, pod: PodInfo) -> None:
        """Free what :meth:`preemption_hold` booked for ``pod`` on ``row`` (nothing when it booked nothing)."""
        gpus = self.nodes.get(table.names[row])
        if gpus is not None and gpus.remove(hold_key(pod.uid)):
            self._write(row, gpus)
            table.touch(row)
