"""``kind: Pod`` (and the pod ``template`` of the workload kinds) → :class:`colo.messages.PodSpec`.

Every problem is reported with its field path, e.g.
``items[2].spec.containers[0].resources.requests.cpu: not a quantity: '5x'``. Quantities follow Kubernetes: ``cpu`` "500m"/"2" → milli-cores,
``memory`` "2Gi" → bytes; ``kubernetes.io/batch-cpu`` and ``mid-cpu`` are integer
milli-cores and ``batch-memory``/``mid-memory`` bytes (REFERENCE.md §1). Container
requests and limits are summed per pod.

Strict: a field Colo does not read is an error with the nearest known name (``spec.nodeSelectr: unknown
field (did you mean 'nodeSelector'?)``), never dropped; each container's limit must be at least its request;
the pod as a whole must pass :func:`colo.validation.pod_problems`, admission's own checks. Node affinity is
``spec.affinity.nodeAffinity`` as Kubernetes writes it. What a pod does under the ``sim`` node backend can be
given by the :data:`SIM_ANNOTATIONS` (docs/cli.md "Simulated work").
"""

from __future__ import annotations

from typing import Any

import msgspec

from colo.classes import PRIORITY_RANGES
from colo.manifests.base import (
    METADATA_FIELDS,
    Ctx,
    check_prefixed_keys,
    duration_s,
    join,
    resource_list,
)
from colo.manifests.gpu import gpu_request, split_gpu
from colo.messages import (
    KUBERNETES_RESOURCE_NAMES,
    Affinity,
    PodSpec,
    PriorityClass,
    Resources,
    SimWorkload,
    Toleration,
)
from colo.quantity import QuantityError, format_cpu, format_memory, parse_cpu, parse_memory
from colo.validation import pod_problems

PRIORITY_CLASS_NAMES: dict[str, PriorityClass] = {"koord-prod": "prod", "koord-mid": "mid", "koord-batch": "batch",
                                                  "koord-free": "free"}
"""Koordinator's PriorityClass names → priority class."""
_QOS = ("SYSTEM", "LSE", "LSR", "LS", "BE")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
"""Kubernetes ``spec.preemptionPolicy`` values."""


SPEC_FIELDS = ("containers", "priority", "priorityClassName", "preemptionPolicy", "nodeSelector", "affinity",
               "tolerations", "volumes", "schedulerName")
"""The fields of a pod's ``spec`` Colo reads; any other is an error."""
CONTAINER_FIELDS = ("name", "image", "command", "args", "env", "resources")
"""The fields of a container Colo reads (``name`` and ``image`` are accepted and not used)."""
SIM_PREFIX = "colo.io/sim-"
SIM_ANNOTATIONS = (SIM_PREFIX + "duration", SIM_PREFIX + "cpu", SIM_PREFIX + "memory")
"""A pod's work under the ``sim`` node backend (:class:`colo.messages.SimWorkload`, kind ``batch``): it needs
``cpu`` (a CPU quantity; default: its cpu, batch-cpu or mid-cpu request) while running, holds ``memory`` (a
memory quantity; default: its memory request of any kind) and completes after ``duration`` (seconds or
``"10m"``, required with the others) of full service. Ignored by the host backend."""


def _container(ctx: Ctx, obj: Any, path: str, req: dict[str, int], lim: dict[str, int],
               command: list[str], env: dict[str, str], gpus: dict[str, tuple[dict[str, int], dict[str, int]]]
               ) -> None:
    if obj is None:
        obj = {}  # a container without fields: BestEffort, nothing to run in the sim
    c = ctx.mapping(obj, path)
    ctx.known(c, path, CONTAINER_FIELDS)
    rp = join(path, "resources")
    res = ctx.mapping(c.get("resources"), rp)
    ctx.known(res, rp, ("requests", "limits"))
    own: dict[str, dict[str, int]] = {}
    gpu: dict[str, dict[str, int]] = {}
    for key, acc in (("requests", req), ("limits", lim)):
        rest, gpu[key] = split_gpu(ctx, res.get(key), join(rp, key))
        own[key] = resource_list(ctx, rest, join(rp, key))
        for name, v in own[key].items():
            acc[name] = acc.get(name, 0) + v
    for name, request in own["requests"].items():
        limit = own["limits"].get(name)
        if limit is not None and limit < request:
            k8s_name = next(k for k, f in KUBERNETES_RESOURCE_NAMES.items() if f == name)
            fmt = format_memory if "memory" in name else format_cpu if name == "cpu" else str
            ctx.err(join(join(rp, "limits"), k8s_name), f"limit {fmt(limit)} is below the request {fmt(request)}")
    if any(gpu.values()):
        gpus[rp] = (gpu["requests"], gpu["limits"])
    for key in ("command", "args"):
        val = c.get(key)
        if val is None:
            continue
        if not isinstance(val, list) or not all(isinstance(x, (str, int, float)) for x in val):
            ctx.err(join(path, key), "expected a list of strings")
        elif not command or key == "args":
            command.extend(str(x) for x in val)
    for i, e in enumerate(c.get("env") or []):
        ep = join(join(path, "env"), i)
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            ctx.err(ep, "expected {name, value}")
            continue
        ctx.known(e, ep, ("name", "value"))
        env[e["name"]] = str(e.get("value", ""))


def _tolerations(ctx: Ctx, obj: Any, path: str) -> list[Toleration]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        ctx.err(path, "expected a list")
        return []
    out = []
    for i, t in enumerate(obj):
        if isinstance(t, dict):
            ctx.known(t, join(path, i), Toleration.__struct_fields__)
        try:
            out.append(msgspec.convert(t, Toleration))
        except msgspec.ValidationError as exc:
            ctx.err(join(path, i), str(exc))
    return out


LOCAL_STORAGE_VOLUMES = ("emptyDir", "hostPath")
"""Volume sources whose data lives on the node and is lost on eviction (Kubernetes; the descheduler's
``evictLocalStoragePods``)."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Annotation the kubelet puts on a mirror pod (the API copy of a static pod)."""
SOURCE_ANNOTATION = "kubernetes.io/config.source"
"""Annotation the kubelet puts on the pods it runs; any value other than ``api`` (``file``, ``http``) marks a
static pod."""


def _local_storage(ctx: Ctx, obj: Any, path: str) -> bool:
    """Whether ``spec.volumes`` holds an emptyDir or hostPath volume (each entry must be a mapping)."""
    if obj is None:
        return False
    if not isinstance(obj, list):
        ctx.err(path, "expected a list")
        return False
    found = False
    for i, v in enumerate(obj):
        volume = ctx.mapping(v, join(path, i), required=True)
        found = found or any(k in volume for k in LOCAL_STORAGE_VOLUMES)
    return found


_EXPRESSION_FIELDS = ("key", "operator", "values")


def _term(ctx: Ctx, obj: Any, path: str) -> dict[str, Any]:
    """A Kubernetes NodeSelectorTerm (``matchExpressions``) → the message's shape."""
    term = ctx.mapping(obj, path, required=True)
    ctx.known(term, path, ("matchExpressions",))
    raw = term.get("matchExpressions") or []
    if not isinstance(raw, list):
        ctx.err(join(path, "matchExpressions"), "expected a list")
        return {}
    out = []
    for i, e in enumerate(raw):
        ep = join(join(path, "matchExpressions"), i)
        expr = ctx.mapping(e, ep, required=True)
        ctx.known(expr, ep, _EXPRESSION_FIELDS)
        values = expr.get("values") or []
        if not isinstance(values, list):
            ctx.err(join(ep, "values"), "expected a list of strings")
            values = []
        out.append({"key": str(expr.get("key", "")), "operator": str(expr.get("operator", "")),
                    "values": [str(v) for v in values]})
    return {"match_expressions": out}


REQUIRED_TERMS = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_TERMS = "preferredDuringSchedulingIgnoredDuringExecution"


def _affinity(ctx: Ctx, obj: Any, path: str) -> Affinity | None:
    """``spec.affinity`` (only ``nodeAffinity``, Kubernetes' shape) → :class:`colo.messages.Affinity`; the
    operators and values are checked by :func:`colo.validation.pod_problems`."""
    if obj is None:
        return None
    aff = ctx.mapping(obj, path)
    ctx.known(aff, path, ("nodeAffinity",))
    np_ = join(path, "nodeAffinity")
    node = ctx.mapping(aff.get("nodeAffinity"), np_)
    ctx.known(node, np_, (REQUIRED_TERMS, PREFERRED_TERMS))
    out: dict[str, Any] = {}
    if REQUIRED_TERMS in node:
        rp = join(np_, REQUIRED_TERMS)
        req = ctx.mapping(node[REQUIRED_TERMS], rp, required=True)
        ctx.known(req, rp, ("nodeSelectorTerms",))
        terms = req.get("nodeSelectorTerms")
        if not isinstance(terms, list) or not terms:
            ctx.err(join(rp, "nodeSelectorTerms"), "required: a non-empty list of terms")
            terms = []
        out["required"] = {"node_selector_terms": [_term(ctx, t, join(join(rp, "nodeSelectorTerms"), i))
                                     for i, t in enumerate(terms)]}
    preferred = node.get(PREFERRED_TERMS) or []
    if not isinstance(preferred, list):
        ctx.err(join(np_, PREFERRED_TERMS), "expected a list")
        preferred = []
    prefs = []
    for i, p in enumerate(preferred):
        pp = join(join(np_, PREFERRED_TERMS), i)
        entry = ctx.mapping(p, pp, required=True)
        ctx.known(entry, pp, ("weight", "preference"))
        prefs.append({"weight": ctx.integer(entry.get("weight"), join(pp, "weight"), 1, 1),
                      "preference": _term(ctx, entry.get("preference"), join(pp, "preference"))})
    if prefs:
        out["preferred"] = prefs
    try:
        return msgspec.convert({"node_affinity": out}, Affinity) if out else None
    except msgspec.ValidationError as exc:
        ctx.err(path, str(exc))
        return None


def _sim(ctx: Ctx, annotations: dict[str, str], path: str, requests: dict[str, int]) -> SimWorkload | None:
    """The :data:`SIM_ANNOTATIONS` of a pod → a batch SimWorkload, or None when it has none."""
    given = {k: v for k, v in annotations.items() if k in SIM_ANNOTATIONS}  # other colo.io/ keys: check_prefixed_keys
    if not given:
        return None
    duration_key, cpu_key, memory_key = SIM_ANNOTATIONS
    if duration_key not in given:
        ctx.err(join(path, duration_key), "required with the other colo.io/sim-* annotations")
        return None
    duration = duration_s(ctx, given[duration_key], join(path, duration_key), 0.0)
    cpu = requests.get("cpu") or requests.get("batch_cpu") or requests.get("mid_cpu") or 0
    memory = requests.get("memory") or requests.get("batch_memory") or requests.get("mid_memory") or 0
    try:
        if cpu_key in given:
            cpu = parse_cpu(given[cpu_key])
    except QuantityError as exc:
        ctx.err(join(path, cpu_key), str(exc))
    try:
        if memory_key in given:
            memory = parse_memory(given[memory_key])
    except QuantityError as exc:
        ctx.err(join(path, memory_key), str(exc))
    return SimWorkload(kind="batch", cpu_milli=cpu, memory_bytes=memory, duration_s=duration)


def parse_pod(ctx: Ctx, doc: dict[str, Any], path: str, now: float) -> PodSpec | None:
    """A ``kind: Pod`` document (``kind`` may be absent) → PodSpec with uid ``metadata.uid`` or
    ``<namespace>-<name>`` and ``created_at = now`` (seconds); None after recording problems."""
    before = len(ctx.errors)
    meta = ctx.mapping(doc.get("metadata"), join(path, "metadata"), required=True)
    name = ctx.name(meta, join(path, "metadata")) if isinstance(doc.get("metadata"), dict) else ""
    pod = _body(ctx, meta, doc.get("spec"), path, now)
    if pod is None:
        return None
    namespace = pod.namespace
    pod = msgspec.structs.replace(pod, uid=str(meta.get("uid") or f"{namespace}-{name}"), name=name)
    _admission_checks(ctx, pod, path, before, identity=bool(name))
    return None if len(ctx.errors) > before else pod


def parse_template(ctx: Ctx, obj: Any, path: str, now: float) -> PodSpec | None:
    """A workload's ``spec.template`` (``metadata`` optional, ``spec`` as a Pod's) → PodSpec with empty
    ``uid`` and ``name`` (admission names each pod); None after recording problems."""
    before = len(ctx.errors)
    doc = ctx.mapping(obj, path, required=True)
    if not doc:
        return None
    ctx.known(doc, path, ("metadata", "spec"))
    meta = ctx.mapping(doc.get("metadata"), join(path, "metadata"))
    ctx.known(meta, join(path, "metadata"), METADATA_FIELDS)
    for key in ("labels", "annotations"):
        check_prefixed_keys(ctx, meta.get(key), join(join(path, "metadata"), key))
    pod = _body(ctx, meta, doc.get("spec"), path, now)
    if pod is not None:
        _admission_checks(ctx, pod, path, before, identity=False)
    return None if len(ctx.errors) > before else pod


def _admission_checks(ctx: Ctx, pod: PodSpec, path: str, before: int, identity: bool) -> None:
    """Record admission's problems of ``pod`` (:func:`colo.validation.pod_problems`) at ``path.spec``
    (identifiers at ``path.metadata``), except those a field-level error recorded since ``before`` already
    tells (a limit below its request, a bad name)."""
    told_limits = any(": limit " in e and "below the request" in e for e in ctx.errors[before:])
    for problem in pod_problems(pod, identity=identity):
        if told_limits and " exceeds limit " in problem:
            continue
        where = "metadata" if problem.startswith(("uid ", "name ", "namespace ")) else "spec"
        ctx.err(join(path, where), problem)


def _body(ctx: Ctx, meta: dict[str, Any], raw_spec: Any, path: str, now: float) -> PodSpec | None:
    mp = join(path, "metadata")
    namespace = str(meta.get("namespace", "default"))
    labels = ctx.str_map(meta.get("labels"), join(mp, "labels"))
    annotations = ctx.str_map(meta.get("annotations"), join(mp, "annotations"))
    sp = join(path, "spec")
    spec = ctx.mapping(raw_spec, sp, required=True)
    ctx.known(spec, sp, SPEC_FIELDS)
    containers = spec.get("containers")
    req: dict[str, int] = {}
    lim: dict[str, int] = {}
    command: list[str] = []
    env: dict[str, str] = {}
    gpus: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    if not isinstance(containers, list) or not containers:
        ctx.err(join(sp, "containers"), "required: a non-empty list")
    else:
        for i, c in enumerate(containers):
            _container(ctx, c, join(join(sp, "containers"), i), req, lim, command, env, gpus)
    gpu = None
    if len(gpus) > 1:
        ctx.err(join(sp, "containers"), "GPUs requested by more than one container (" + ", ".join(gpus) + "): "
                "DeviceShare books one pod-level request, put it on one container")
    elif gpus:
        (gpath, (greq, glim)), = gpus.items()
        gpu = gpu_request(ctx, greq, glim, gpath, annotations, join(mp, "annotations"))
    elif "colo.io/gpu-spec" in annotations:
        ctx.err(join(join(mp, "annotations"), "colo.io/gpu-spec"), "set on a pod that requests no GPU")
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        ctx.err(join(sp, "priority"), f"expected an integer, got {priority!r}")
        priority = None
    pc_name = spec.get("priorityClassName")
    priority_class = None
    if pc_name is not None:
        priority_class = PRIORITY_CLASS_NAMES.get(str(pc_name))
        if priority_class is None:
            ctx.err(join(sp, "priorityClassName"),
                    f"unknown priority class {pc_name!r} (known: {', '.join(PRIORITY_CLASS_NAMES)})")
        elif priority is None:
            priority = PRIORITY_RANGES[priority_class][2]
    qos = labels.get("koordinator.sh/qosClass")
    if qos is not None and qos not in _QOS:
        ctx.err(join(join(mp, "labels"), "koordinator.sh/qosClass"),
                f"unknown QoS class {qos!r} (known: {', '.join(_QOS)})")
    policy = spec.get("preemptionPolicy", "PreemptLowerPriority")
    if policy not in PREEMPTION_POLICIES:
        ctx.err(join(sp, "preemptionPolicy"), f"expected one of {', '.join(PREEMPTION_POLICIES)}, got {policy!r}")
        policy = "PreemptLowerPriority"
    selector = ctx.str_map(spec.get("nodeSelector"), join(sp, "nodeSelector"))
    tolerations = _tolerations(ctx, spec.get("tolerations"), join(sp, "tolerations"))
    local_storage = _local_storage(ctx, spec.get("volumes"), join(sp, "volumes"))
    affinity = _affinity(ctx, spec.get("affinity"), join(sp, "affinity"))
    sim = _sim(ctx, annotations, join(mp, "annotations"), req)
    pod = PodSpec(
        uid="", name="", namespace=namespace, labels=labels, annotations=annotations,
        priority=priority, priority_class=priority_class,
        scheduler_name=str(spec.get("schedulerName", "colo-scheduler")),
        requests=Resources(**req), limits=Resources(**lim), node_selector=selector,
        tolerations=tolerations, app=labels.get("app", ""), command=command, env=env, created_at=now,
        mirror=MIRROR_ANNOTATION in annotations,
        static=annotations.get(SOURCE_ANNOTATION, "api") != "api", local_storage=local_storage,
        preemption_policy=policy, affinity=affinity, sim=sim, gpu=gpu,
    )
    return pod
