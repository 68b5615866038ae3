"""The scheduling decision written as a straightforward per-node Python loop: the oracle of the property
tests (tests/scheduler/test_property_vectorized.py) and the baseline of bench/scheduler_inprocess.py.

Every in-tree PreFilter, Filter and Score plugin is re-implemented here node by node with Python
ints from its specification (docs/scheduler.md, REFERENCE.md §1 and §4, the Kubernetes and
Koordinator rules cited in the plugin modules), reading the :class:`NodeTable`'s node specs,
allocatable, allocated requests, metrics, assigned pods and app counts — not the plugins' per-cycle
arrays, masks or caches. The load estimate of assigned pods is recomputed from the assigned pods
and the last metric. Shared pure helpers are reused where they define the input format rather than
a plugin's arithmetic: label matching of node affinity (:mod:`colo.affinity`), the class rules
(:mod:`colo.classes`), the pod estimate and resource kind (:mod:`colo_scheduler.podinfo`, oracle
O3), the gap of one pod against a metric (:mod:`colo_scheduler.estimation`, tested on its own), the parsing of the threshold annotation and the choice of a metric's aggregated entry.
DeviceShare is one too (its Filter ``fit`` and its memo-free ``evaluate(..., fresh=True)`` over the GPUs it
booked, min-max normalised here). NodeNUMAResource is the other exception: the loop calls the plugin's memo-free ``choose_fresh`` / ``score_fresh`` over
the CPUs it booked (its accumulator and NUMA policy have their own tables, tests/scheduler/test_numa_accumulator.py),
so the comparison checks the memo and the class cache's row updates.

The decision: a node is feasible when every filter passes (none when a PreFilter rejects the pod);
total = Σ weight × score (normalized where the plugin normalizes, over the feasible nodes); the
best nodes are the feasible ones with the highest total (ties reported as a set).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from colo.affinity import affinity_problems, preferred_score, required_matches
from colo.classes import priority_class_of, qos_class_of, resource_kind_problems, validate_classes
from colo.messages import RESOURCE_NAMES, NodeMetric, PodSpec
from colo_scheduler.estimation import unreported_gap
from colo_scheduler.framework.registry import Profile, ProfileConfig, build_profile
from colo_scheduler.plugins.batchbalance import BATCH_CLASSES
from colo_scheduler.plugins.deviceshare.plugin import NO_FIT, RAW_PER_GPU, DeviceShare
from colo_scheduler.plugins.loadaware import (
    CUSTOM_THRESHOLDS_ANNOTATION,
    LoadAwareArgs,
    NodeThresholds,
    aggregated_usage,
    args_thresholds,
    parse_custom_thresholds,
)
from colo_scheduler.plugins.nodenumaresource import NodeNUMAResource
from colo_scheduler.plugins.nodenumaresource.knobs import cpu_request
from colo_scheduler.podinfo import PodInfo, estimate_pod, resource_kind
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable

_COLUMN = {name: i for i, name in enumerate(RESOURCE_NAMES)}


@dataclass
class LoopDecision:
    """Everything the loop computed for one pod: per filter its verdict per node, per score plugin
    its raw and final (normalized) score per node, the feasibility and weighted total per node, the
    best nodes, and the PreFilter that rejected the pod ("" when none)."""

    masks: dict[str, list[bool]] = field(default_factory=dict)
    raw: dict[str, list[int]] = field(default_factory=dict)
    scores: dict[str, list[int]] = field(default_factory=dict)
    feasible: list[bool] = field(default_factory=list)
    total: list[int] = field(default_factory=list)
    best: set[int] = field(default_factory=set)
    rejected_by: str = ""


# --------------------------------------------------------------------------- pod facts


def _requests(spec: PodSpec) -> list[int]:
    r = spec.requests
    return [r.cpu, r.memory, r.batch_cpu, r.batch_memory, r.mid_cpu, r.mid_memory, 1]


def _kind_column(name: str, kind: str) -> int:
    """Column of a scored resource name for a pod of ``kind``: cpu/memory follow the kind."""
    if kind != "native" and name in ("cpu", "memory"):
        return _COLUMN[f"{kind}_{name}"]
    return _COLUMN[name]


# --------------------------------------------------------------------------- filters


def _tolerated(spec: PodSpec, key: str, value: str, effect: str) -> bool:
    for t in spec.tolerations:
        if t.effect and t.effect != effect:
            continue
        if t.operator == "Exists":
            if t.key == "" or t.key == key:
                return True
        elif t.key == key and t.value == value:
            return True
    return False


def _taints_ok(spec: PodSpec, table: NodeTable, i: int) -> bool:
    return all(t.effect == "PreferNoSchedule" or _tolerated(spec, t.key, t.value, t.effect) for t in table.taints(i))


def _fits(req: list[int], alloc: list[int], allocated: list[int]) -> bool:
    return all(r <= 0 or a - u >= r for r, a, u in zip(req, alloc, allocated))


def _required_terms(spec: PodSpec) -> list[object] | None:
    na = spec.affinity.node_affinity if spec.affinity is not None else None
    if na is None or na.required is None:
        return None
    return list(na.required.node_selector_terms)


# --------------------------------------------------------------------------- load


@dataclass
class _Load:
    """LoadAware configuration for the loop."""

    args: LoadAwareArgs
    default_cpu: int
    default_memory: int
    memo: dict[int, tuple[int, int]] = field(default_factory=dict)

    def estimate(self, spec: PodSpec) -> tuple[int, int]:
        """The pod's estimate with the plugin's factors (remembered per pod for one decision)."""
        got = self.memo.get(id(spec))
        if got is None:
            f = self.args.estimated_scaling_factors
            got = self.memo[id(spec)] = estimate_pod(spec, f.get("cpu", 0), f.get("memory", 0), self.default_cpu,
                                                     self.default_memory)
        return got


def _thresholds(load: _Load, table: NodeTable, i: int) -> NodeThresholds:
    text = table.specs[i].annotations.get(CUSTOM_THRESHOLDS_ANNOTATION)
    if text is not None:
        try:
            return parse_custom_thresholds(text, load.args)
        except ValueError:
            pass
    return args_thresholds(load.args)


def _pending(load: _Load, table: NodeTable, i: int, metric: NodeMetric | None, prod_only: bool) -> list[int]:
    """Σ gaps of the assigned pods of row ``i`` (prod pods only when ``prod_only``, against the prod pods'
    own figures; else against the node's windowed mean): :func:`colo_scheduler.estimation.unreported_gap`."""
    usage = {p.uid: (p.cpu, p.memory) for p in metric.pods} if metric is not None else {}
    out = [0, 0]
    for uid, ap in table.node_pods[i].items():
        if prod_only and priority_class_of(ap.pod.spec) != "prod":
            continue
        est = load.estimate(ap.pod.spec)
        used = usage.get(uid)
        for r in range(2):
            if used is None or metric is None:
                out[r] += est[r]
            else:
                out[r] += unreported_gap(est[r], used[r], ap.assigned_at, metric.at, metric.window_s,
                                         windowed=not prod_only)
    return out


def _prod_reported(table: NodeTable, i: int, metric: NodeMetric) -> list[int]:
    out = [0, 0]
    pods = table.node_pods[i]
    for pm in metric.pods:
        cls = pm.priority_class
        if cls is None and pm.uid in pods:
            cls = priority_class_of(pods[pm.uid].pod.spec)
        if cls == "prod":
            out[0] += pm.cpu
            out[1] += pm.memory
    return out


def _over(x: int, a: int, t: int) -> bool:
    """round(100 x / a) > t with halves rounded up; never for t = 0 or a = 0."""
    return t > 0 and a > 0 and (200 * x + a) // (2 * a) > t


def _load_fits(load: _Load, table: NodeTable, i: int, now: float, spec: PodSpec, alloc: list[int]) -> bool:
    if spec.daemonset:
        return True
    metric = table.metrics[i]
    if metric is None:
        return True
    if now - metric.at >= load.args.node_metric_expiration_seconds:
        return not load.args.filter_expired_node_metrics
    th = _thresholds(load, table, i)
    p = load.estimate(spec)
    if th.prod is not None and priority_class_of(spec) == "prod":
        base = _prod_reported(table, i, metric)
        pend = _pending(load, table, i, metric, prod_only=True)
        limits = th.prod
    elif th.aggregated is not None:
        limits, stat, duration = th.aggregated
        agg = aggregated_usage(metric, stat, duration)
        if agg is None:
            return True
        base, pend = list(agg), _pending(load, table, i, metric, prod_only=False)
    else:
        base = [metric.node_usage.cpu, metric.node_usage.memory]
        pend = _pending(load, table, i, metric, prod_only=False)
        limits = th.usage
    return not any(_over(base[r] + pend[r] + p[r], alloc[r], limits[r]) for r in range(2))


def _load_score(load: _Load, table: NodeTable, i: int, now: float, spec: PodSpec, alloc: list[int]) -> int:
    metric = table.metrics[i]
    if metric is None or now - metric.at >= load.args.node_metric_expiration_seconds:
        return 0
    a = load.args
    if a.score_according_prod_usage and priority_class_of(spec) == "prod":
        base = _prod_reported(table, i, metric)
        pend = _pending(load, table, i, metric, prod_only=True)
    else:
        base = [metric.node_usage.cpu, metric.node_usage.memory]
        if a.aggregated.score_aggregation_type:
            agg = aggregated_usage(metric, a.aggregated.score_aggregation_type,
                                   a.aggregated.score_aggregated_duration_s)
            base = list(agg) if agg is not None else base
        pend = _pending(load, table, i, metric, prod_only=False)
    p = load.estimate(spec)
    weights = [a.resource_weights.get("cpu", 0), a.resource_weights.get("memory", 0)]
    total = 0
    for r in range(2):
        used = base[r] + pend[r] + p[r]
        s = 0 if alloc[r] <= 0 or used > alloc[r] else (alloc[r] - used) * 100 // alloc[r]
        total += s * weights[r]
    return total // sum(weights)


# --------------------------------------------------------------------------- resource scores


def _broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """Kubernetes BuildBrokenLinearFunction; Go's integer division truncates toward zero."""
    for k, (u, s) in enumerate(shape):
        if p <= u:
            if k == 0:
                return s
            u0, s0 = shape[k - 1]
            return s0 + int((s - s0) * (p - u0) / (u - u0))
    return shape[-1][1]


def _resource_score(strategy: str, shape: Sequence[tuple[int, int]], cols: list[tuple[int, int]],
                    spec: PodSpec, alloc: list[int], allocated: list[int]) -> int:
    """Kubernetes LeastAllocated / MostAllocated / RequestedToCapacityRatio / BalancedAllocation on one
    node, over (column, weight) pairs."""
    req = _requests(spec)
    if strategy == "Balanced":
        if not any(req[c] for c, _ in cols):
            return 0
        fractions = [min((allocated[c] + req[c]) / alloc[c], 1.0) for c, _ in cols if alloc[c] != 0]
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            acc = 0.0
            for f in fractions:
                acc = acc + (f - mean) * (f - mean)
            std = math.sqrt(acc / len(fractions))
        return int((1 - std) * 100)
    num = den = 0
    for c, w in cols:
        a, r = alloc[c], allocated[c] + req[c]
        if strategy == "RequestedToCapacityRatio":
            s = _broken_linear(shape, 100 if a == 0 or r > a else r * 100 // a)
            if s > 0:
                num += s * w
                den += w
            continue
        if a == 0:
            continue
        if strategy == "MostAllocated":
            s = min(r, a) * 100 // a
        else:
            s = 0 if r > a else (a - r) * 100 // a
        num += s * w
        den += w
    if den == 0:
        return 0
    if strategy == "RequestedToCapacityRatio":
        return (2 * num + den) // (2 * den)
    return num // den


# --------------------------------------------------------------------------- the decision


def _as_profile(profile: Profile | ProfileConfig, settings: SchedulerSettings) -> Profile:
    if isinstance(profile, ProfileConfig):
        from colo_scheduler.plugins import new_in_tree_registry

        return build_profile(profile, new_in_tree_registry(), settings)
    return profile


def _spec(pod: PodInfo | PodSpec) -> PodSpec:
    return pod.spec if isinstance(pod, PodInfo) else pod


def _pre_filter(name: str, spec: PodSpec) -> bool:
    if name == "QoSAdmission":
        return not (validate_classes(spec) or resource_kind_problems(spec))
    if name == "NodeAffinity":
        return not affinity_problems(spec.affinity)
    if name == "Coscheduling":  # a pod alone passes; a gang member's verdict hangs on its gang, not on one pod
        if spec.gang is not None:
            raise ValueError(f"the loop decides pods alone: {spec.uid} is a member of gang {spec.gang.name}")
        return True
    if name == "NodeNUMAResource":
        return not cpu_request(spec)[1]
    if name == "ElasticQuota":
        # not a node rule: its verdict is the quota book's (tests/scheduler/test_plugins_elasticquota.py); the
        # loop's tables define no quota, and with none every pod passes
        return True
    raise ValueError(f"the loop has no PreFilter {name!r}")


def loop_decision(table: NodeTable, now: float, pod: PodInfo | PodSpec, profile: Profile | ProfileConfig,
                  settings: SchedulerSettings, every_node: bool = True) -> LoopDecision:
    """The whole decision for ``pod`` on every row of ``table`` at clock time ``now``, node by node.

    ``profile`` is a built :class:`Profile` (its plugins' arguments are read from the instances) or a
    :class:`ProfileConfig` (built with the in-tree registry). ``every_node`` True evaluates every
    filter and score on every node (``masks``, ``raw`` and ``scores`` complete: the oracle); False
    works like a scheduler would — a node's filters stop at the first rejection and only feasible
    nodes are scored (``masks`` empty; ``raw``/``scores``/``total`` 0 on infeasible nodes): the
    benchmark baseline. Raises ValueError for a plugin the loop does not implement."""
    prof = _as_profile(profile, settings)
    spec = _spec(pod)
    n = table.n
    out = LoopDecision()
    for pre in prof.pre_filter:
        if not _pre_filter(pre.name, spec):
            out.rejected_by = pre.name
            out.feasible = [False] * n
            out.total = [0] * n
            return out
    alloc = table.alloc.tolist()
    allocated = table.allocated.tolist()
    la = prof.plugins.get("LoadAware")
    load = _Load(la.args, settings.default_cpu_estimate_milli,  # type: ignore[attr-defined]
                 settings.default_memory_estimate_bytes) if la is not None else None
    kind = resource_kind(spec)
    req = _requests(spec)
    app = spec.app
    counts = table.app_count(app).tolist() if app else [0] * n
    terms = _required_terms(spec)
    cap = spec.max_instance_per_node
    be_memory = qos_class_of(spec) == "BE" or spec.requests.batch_memory > 0 or spec.limits.batch_memory > 0
    pressure = table.memory_pressure.tolist()
    numa = prof.plugins.get("NodeNUMAResource")
    wish = cpu_request(spec)[0]
    ds = prof.plugins.get("DeviceShare")
    gpu_wish = ds.score_request_of(spec) if isinstance(ds, DeviceShare) else None

    def node_filter(name: str) -> Callable[[int], bool]:
        if name == "NodeSelector":
            return lambda i: all(table.labels(i).get(k) == v for k, v in spec.node_selector.items())
        if name == "NodeAffinity":
            return lambda i: terms is None or required_matches(terms, table.labels(i))  # type: ignore[arg-type]
        if name == "TaintToleration":
            return lambda i: _taints_ok(spec, table, i)
        if name == "NodeUnschedulable":
            return lambda i: not table.specs[i].unschedulable or _tolerated(spec, "node.kubernetes.io/unschedulable",
                                                                            "", "NoSchedule")
        if name == "NodeResourcesFit":
            return lambda i: _fits(req, alloc[i], allocated[i])
        if name == "MaxInstancePerNode":
            return lambda i: not app or cap < 0 or counts[i] < cap
        if name == "LoadAware" and load is not None:
            return lambda i: _load_fits(load, table, i, now, spec, alloc[i][:2])
        if name == "BEMemoryPressure":
            return lambda i: not (be_memory and pressure[i])
        if name == "NodeNUMAResource" and isinstance(numa, NodeNUMAResource):
            return lambda i: wish is None or numa.choose_fresh(table, i, wish)[0] is not None
        if name == "DeviceShare" and isinstance(ds, DeviceShare):
            return lambda i: spec.gpu is None or ds.fit(table, i, spec.gpu)
        raise ValueError(f"the loop has no Filter {name!r}")

    filters = [(f.name, node_filter(f.name)) for f in prof.filter]
    if every_node:
        for name, fn in filters:
            out.masks[name] = [fn(i) for i in range(n)]
        out.feasible = [all(m[i] for m in out.masks.values()) for i in range(n)]
    else:
        out.feasible = [all(fn(i) for _, fn in filters) for i in range(n)]
    rows = range(n) if every_node else [i for i in range(n) if out.feasible[i]]
    total = [0] * n
    for p, weight in prof.score:
        name = p.name
        raw = [0] * n
        if name == "LoadAware" and load is not None:
            for i in rows:
                raw[i] = _load_score(load, table, i, now, spec, alloc[i][:2])
        elif name in ("NodeResourcesFit", "NodeResourcesLeastAllocated", "NodeResourcesBalancedAllocation"):
            strategy: str = p.strategy  # type: ignore[attr-defined]
            shape: Sequence[tuple[int, int]] = p.shape  # type: ignore[attr-defined]
            col_arr, w_arr = p.columns[_kind_column("cpu", kind)]  # type: ignore[attr-defined]
            cols = list(zip(col_arr.tolist(), w_arr.tolist()))
            for i in rows:
                raw[i] = _resource_score(strategy, shape, cols, spec, alloc[i], allocated[i])
        elif name == "BatchResourcesBalancedAllocation":  # batch/free pods only; 0 everywhere for the others
            inner = p._balanced  # type: ignore[attr-defined]
            col_arr, w_arr = inner.columns[_kind_column("cpu", kind)]
            cols = list(zip(col_arr.tolist(), w_arr.tolist()))
            if priority_class_of(spec) in BATCH_CLASSES:
                for i in rows:
                    raw[i] = _resource_score("Balanced", (), cols, spec, alloc[i], allocated[i])
        elif name == "NodeAffinity":
            na = spec.affinity.node_affinity if spec.affinity is not None else None
            preferred = list(na.preferred) if na is not None else []
            for i in rows:
                raw[i] = preferred_score(preferred, table.labels(i))
        elif name == "SelectorSpread":
            for i in rows:
                raw[i] = counts[i]
        elif name == "NodeNUMAResource" and isinstance(numa, NodeNUMAResource):
            for i in rows:
                raw[i] = numa.score_fresh(table, i, wish) if wish is not None else 0
        elif name == "DeviceShare" and isinstance(ds, DeviceShare):
            for i in rows:
                if gpu_wish is not None:
                    s = ds.evaluate(table, i, gpu_wish, spec.requests.cpu, fresh=True)[0]
                    raw[i] = round(s * RAW_PER_GPU) if s > -float("inf") else NO_FIT
        else:
            raise ValueError(f"the loop has no Score {name!r}")
        top = max((raw[i] for i in range(n) if out.feasible[i]), default=0)
        if name == "NodeAffinity":  # × 100 // max over feasible nodes (above max: as max)
            final = [0] * n
            for i in rows:
                final[i] = min(raw[i], top) * 100 // top if top > 0 else 0
        elif name == "SelectorSpread":  # 100 × (max − count) // max; 100 when max is 0
            final = [0] * n
            for i in rows:
                final[i] = 100 if top <= 0 else 100 * (top - min(raw[i], top)) // top
        elif name == "DeviceShare" and gpu_wish is not None:  # min-max over the feasible nodes
            vals = [raw[i] for i in range(n) if out.feasible[i]]
            lo, hi = min(vals, default=0), max(vals, default=0)
            final = [0] * n
            for i in rows:
                final[i] = (raw[i] - lo) * 100 // (hi - lo) if hi > lo and out.feasible[i] else 0
        else:
            final = raw
        out.raw[name] = raw
        out.scores[name] = final
        for i in rows:
            total[i] += weight * final[i]
    out.total = total
    best = max((total[i] for i in range(n) if out.feasible[i]), default=None)
    out.best = {i for i in range(n) if out.feasible[i] and total[i] == best}
    return out


def loop_feasible(table: NodeTable, now: float, pod: PodInfo | PodSpec, profile: Profile | ProfileConfig,
                  settings: SchedulerSettings) -> list[bool]:
    """(n,) whether each row passes every PreFilter and Filter of ``profile``."""
    return loop_decision(table, now, pod, profile, settings, every_node=False).feasible


def loop_scores(table: NodeTable, now: float, pod: PodInfo | PodSpec, profile: Profile | ProfileConfig,
                settings: SchedulerSettings) -> list[int]:
    """(n,) the weighted total Σ weight × (normalized) score of each row (meaningful on feasible rows)."""
    return loop_decision(table, now, pod, profile, settings).total


def loop_best_nodes(table: NodeTable, now: float, pod: PodInfo | PodSpec, profile: Profile | ProfileConfig,
                    settings: SchedulerSettings) -> set[int]:
    """The feasible rows with the highest total (empty when no row is feasible); filters stop at a
    node's first rejection and only feasible nodes are scored, as a scheduler loop would."""
    return loop_decision(table, now, pod, profile, settings, every_node=False).best


def loop_masks(table: NodeTable, now: float, pod: PodInfo | PodSpec, profile: Profile | ProfileConfig,
               settings: SchedulerSettings) -> Mapping[str, list[bool]]:
    """Per filter plugin its verdict per row."""
    return loop_decision(table, now, pod, profile, settings).masks
