"""``kind: Pod`` (and the pod ``template`` of the workload kinds) → :class:`colo.messages.PodSpec`.

Every problem is reported with its field path, e.g.
``items[2].spec.containers[0].resources.requests.cpu: not a quantity: '5x'``. Quantities follow Kubernetes: ``cpu`` "500m"/"2" → milli-cores,
``memory`` "2Gi" → bytes; ``kubernetes.io/batch-cpu`` and ``mid-cpu`` are integer
milli-cores and ``batch-memory``/``mid-memory`` bytes (REFERENCE.md §1). Container
requests and limits are summed per pod.
"""

from __future__ import annotations

from typing import Any

import msgspec

from colo.classes import PRIORITY_RANGES, validate_classes
from colo.manifests.base import Ctx, join, resource_list
from colo.messages import PodSpec, PriorityClass, Resources, Toleration

PRIORITY_CLASS_NAMES: dict[str, PriorityClass] = {"koord-prod": "prod", "koord-mid": "mid", "koord-batch": "batch",
                                                  "koord-free": "free"}
"""Koordinator's PriorityClass names → priority class."""
_QOS = ("SYSTEM", "LSE", "LSR", "LS", "BE")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
"""Kubernetes ``spec.preemptionPolicy`` values."""


def _container(ctx: Ctx, obj: Any, path: str, req: dict[str, int], lim: dict[str, int],
               command: list[str], env: dict[str, str]) -> None:
    if obj is None:
        obj = {}  # a container without fields: BestEffort, nothing to run in the sim
    c = ctx.mapping(obj, path)
    res = ctx.mapping(c.get("resources"), join(path, "resources"))
    for key, acc in (("requests", req), ("limits", lim)):
        for name, v in resource_list(ctx, res.get(key), join(join(path, "resources"), key)).items():
            acc[name] = acc.get(name, 0) + v
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
        env[e["name"]] = str(e.get("value", ""))


def _tolerations(ctx: Ctx, obj: Any, path: str) -> list[Toleration]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        ctx.err(path, "expected a list")
        return []
    out = []
    for i, t in enumerate(obj):
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


def parse_pod(ctx: Ctx, doc: dict[str, Any], path: str, now: float) -> PodSpec | None:
    """A ``kind: Pod`` document (``kind`` may be absent) → PodSpec with uid ``metadata.uid`` or
    ``<namespace>-<name>`` and ``created_at = now`` (seconds); None after recording problems."""
    before = len(ctx.errors)
    meta = ctx.mapping(doc.get("metadata"), join(path, "metadata"), required=True)
    name = ctx.name(meta, join(path, "metadata")) if isinstance(doc.get("metadata"), dict) else ""
    pod = _body(ctx, meta, doc.get("spec"), path, now)
    if pod is None or len(ctx.errors) > before:
        return None
    namespace = pod.namespace
    return msgspec.structs.replace(pod, uid=str(meta.get("uid") or f"{namespace}-{name}"), name=name)


def parse_template(ctx: Ctx, obj: Any, path: str, now: float) -> PodSpec | None:
    """A workload's ``spec.template`` (``metadata`` optional, ``spec`` as a Pod's) → PodSpec with empty
    ``uid`` and ``name`` (admission names each pod); None after recording problems."""
    before = len(ctx.errors)
    doc = ctx.mapping(obj, path, required=True)
    if not doc:
        return None
    meta = ctx.mapping(doc.get("metadata"), join(path, "metadata"))
    pod = _body(ctx, meta, doc.get("spec"), path, now)
    return None if len(ctx.errors) > before else pod


def _body(ctx: Ctx, meta: dict[str, Any], raw_spec: Any, path: str, now: float) -> PodSpec | None:
    mp = join(path, "metadata")
    namespace = str(meta.get("namespace", "default"))
    labels = ctx.str_map(meta.get("labels"), join(mp, "labels"))
    annotations = ctx.str_map(meta.get("annotations"), join(mp, "annotations"))
    sp = join(path, "spec")
    spec = ctx.mapping(raw_spec, sp, required=True)
    containers = spec.get("containers")
    req: dict[str, int] = {}
    lim: dict[str, int] = {}
    command: list[str] = []
    env: dict[str, str] = {}
    if not isinstance(containers, list) or not containers:
        ctx.err(join(sp, "containers"), "required: a non-empty list")
    else:
        for i, c in enumerate(containers):
            _container(ctx, c, join(join(sp, "containers"), i), req, lim, command, env)
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
    pod = PodSpec(
        uid="", name="", namespace=namespace, labels=labels, annotations=annotations,
        priority=priority, priority_class=priority_class,
        scheduler_name=str(spec.get("schedulerName", "colo-scheduler")),
        requests=Resources(**req), limits=Resources(**lim), node_selector=selector,
        tolerations=tolerations, app=labels.get("app", ""), command=command, env=env, created_at=now,
        mirror=MIRROR_ANNOTATION in annotations,
        static=annotations.get(SOURCE_ANNOTATION, "api") != "api", local_storage=local_storage,
        preemption_policy=policy,
    )
    for problem in validate_classes(pod):
        ctx.err(sp, problem)
    return pod
