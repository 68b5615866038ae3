"""Kubernetes-like pod manifests (YAML or JSON) → :class:`colo.messages.PodSpec`.

A file holds one pod, a list of pods, a ``kind: List`` with ``items``, or several YAML
documents. Every problem is reported with its field path, e.g.
``items[2].spec.containers[0].resources.requests.cpu: not a quantity: '5x'``, and
:func:`parse_pods` returns pods only when the whole file is valid, so that nothing is
half-submitted. Quantities follow Kubernetes: ``cpu`` "500m"/"2" → milli-cores,
``memory`` "2Gi" → bytes; ``kubernetes.io/batch-cpu`` and ``mid-cpu`` are integer
milli-cores and ``batch-memory``/``mid-memory`` bytes (REFERENCE.md §1). Container
requests and limits are summed per pod.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import yaml

from colo.classes import PRIORITY_RANGES, validate_classes
from colo.messages import KUBERNETES_RESOURCE_NAMES, PodSpec, PriorityClass, Resources, Toleration
from colo.quantity import QuantityError, parse_cpu, parse_memory

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
PRIORITY_CLASS_NAMES: dict[str, PriorityClass] = {"koord-prod": "prod", "koord-mid": "mid", "koord-batch": "batch", "koord-free": "free"}
"""Koordinator's PriorityClass names → priority class."""
_QOS = ("SYSTEM", "LSE", "LSR", "LS", "BE")


class PodFileError(ValueError):
    """A manifest with problems; ``errors`` lists each as ``"<field path>: <problem>"``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Ctx:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def err(self, path: str, msg: str) -> None:
        self.errors.append(f"{path or '<root>'}: {msg}")

    def mapping(self, obj: Any, path: str, required: bool = False) -> dict[str, Any]:
        if obj is None:
            if required:
                self.err(path, "required")
            return {}
        if not isinstance(obj, dict):
            self.err(path, f"expected a mapping, got {type(obj).__name__}")
            return {}
        return obj

    def str_map(self, obj: Any, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v in self.mapping(obj, path).items():
            if not isinstance(v, (str, int, float)):
                self.err(_join(path, str(k)), f"expected a string, got {type(v).__name__}")
                continue
            out[str(k)] = str(v)
        return out


def _resources(ctx: _Ctx, obj: Any, path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in ctx.mapping(obj, path).items():
        p = _join(path, str(name))
        field = KUBERNETES_RESOURCE_NAMES.get(str(name))
        if field is None or field == "pods":
            ctx.err(p, f"unknown resource {name!r} (known: cpu, memory, kubernetes.io/batch-cpu, "
                       "kubernetes.io/batch-memory, kubernetes.io/mid-cpu, kubernetes.io/mid-memory)")
            continue
        try:
            out[field] = parse_cpu(value) if field == "cpu" else parse_memory(value)
        except QuantityError as exc:
            ctx.err(p, str(exc))
    return out


def _container(ctx: _Ctx, obj: Any, path: str, req: dict[str, int], lim: dict[str, int],
               command: list[str], env: dict[str, str]) -> None:
    if obj is None:
        obj = {}  # a container without fields: BestEffort, nothing to run in the sim
    c = ctx.mapping(obj, path)
    res = ctx.mapping(c.get("resources"), _join(path, "resources"))
    for key, acc in (("requests", req), ("limits", lim)):
        for name, v in _resources(ctx, res.get(key), _join(_join(path, "resources"), key)).items():
            acc[name] = acc.get(name, 0) + v
    for key in ("command", "args"):
        val = c.get(key)
        if val is None:
            continue
        if not isinstance(val, list) or not all(isinstance(x, (str, int, float)) for x in val):
            ctx.err(_join(path, key), "expected a list of strings")
        elif not command or key == "args":
            command.extend(str(x) for x in val)
    for i, e in enumerate(c.get("env") or []):
        ep = _join(_join(path, "env"), i)
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            ctx.err(ep, "expected {name, value}")
            continue
        env[e["name"]] = str(e.get("value", ""))


def _tolerations(ctx: _Ctx, obj: Any, path: str) -> list[Toleration]:
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
            ctx.err(_join(path, i), str(exc))
    return out


LOCAL_STORAGE_VOLUMES = ("emptyDir", "hostPath")
"""Volume sources whose data lives on the node and is lost on eviction (Kubernetes; the descheduler's
``evictLocalStoragePods``)."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Annotation the kubelet puts on a mirror pod (the API copy of a static pod)."""
SOURCE_ANNOTATION = "kubernetes.io/config.source"
"""Annotation the kubelet puts on the pods it runs; any value other than ``api`` (``file``, ``http``) marks a
static pod."""


def _local_storage(ctx: _Ctx, obj: Any, path: str) -> bool:
    """Whether ``spec.volumes`` holds an emptyDir or hostPath volume (each entry must be a mapping)."""
    if obj is None:
        return False
    if not isinstance(obj, list):
        ctx.err(path, "expected a list")
        return False
    found = False
    for i, v in enumerate(obj):
        volume = ctx.mapping(v, _join(path, i), required=True)
        found = found or any(k in volume for k in LOCAL_STORAGE_VOLUMES)
    return found


def _pod(ctx: _Ctx, obj: Any, path: str, now: float) -> PodSpec | None:
    before = len(ctx.errors)
    doc = ctx.mapping(obj, path, required=True)
    if not doc:
        return None
    kind = doc.get("kind", "Pod")
    if kind != "Pod":
        ctx.err(_join(path, "kind"), f"expected Pod, got {kind!r}")
    meta = ctx.mapping(doc.get("metadata"), _join(path, "metadata"), required=True)
    name = meta.get("name")
    if isinstance(doc.get("metadata"), dict) and (not isinstance(name, str) or not _NAME.match(name)):
        ctx.err(_join(_join(path, "metadata"), "name"),
                "required: a lowercase DNS name" if name is None else f"not a valid name: {name!r}")
    namespace = str(meta.get("namespace", "default"))
    labels = ctx.str_map(meta.get("labels"), _join(_join(path, "metadata"), "labels"))
    annotations = ctx.str_map(meta.get("annotations"), _join(_join(path, "metadata"), "annotations"))
    sp = _join(path, "spec")
    spec = ctx.mapping(doc.get("spec"), sp, required=True)
    containers = spec.get("containers")
    req: dict[str, int] = {}
    lim: dict[str, int] = {}
    command: list[str] = []
    env: dict[str, str] = {}
    if not isinstance(containers, list) or not containers:
        ctx.err(_join(sp, "containers"), "required: a non-empty list")
    else:
        for i, c in enumerate(containers):
            _container(ctx, c, _join(_join(sp, "containers"), i), req, lim, command, env)
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        ctx.err(_join(sp, "priority"), f"expected an integer, got {priority!r}")
        priority = None
    pc_name = spec.get("priorityClassName")
    priority_class = None
    if pc_name is not None:
        priority_class = PRIORITY_CLASS_NAMES.get(str(pc_name))
        if priority_class is None:
            ctx.err(_join(sp, "priorityClassName"),
                    f"unknown priority class {pc_name!r} (known: {', '.join(PRIORITY_CLASS_NAMES)})")
        elif priority is None:
            priority = PRIORITY_RANGES[priority_class][2]
    qos = labels.get("koordinator.sh/qosClass")
    if qos is not None and qos not in _QOS:
        ctx.err(_join(_join(_join(path, "metadata"), "labels"), "koordinator.sh/qosClass"),
                f"unknown QoS class {qos!r} (known: {', '.join(_QOS)})")
    selector = ctx.str_map(spec.get("nodeSelector"), _join(sp, "nodeSelector"))
    tolerations = _tolerations(ctx, spec.get("tolerations"), _join(sp, "tolerations"))
    local_storage = _local_storage(ctx, spec.get("volumes"), _join(sp, "volumes"))
    if len(ctx.errors) > before:
        return None
    uid = str(meta.get("uid") or f"{namespace}-{name}")
    pod = PodSpec(
        uid=uid, name=str(name), namespace=namespace, labels=labels, annotations=annotations,
        priority=priority, priority_class=priority_class,
        scheduler_name=str(spec.get("schedulerName", "colo-scheduler")),
        requests=Resources(**req), limits=Resources(**lim), node_selector=selector,
        tolerations=tolerations, app=labels.get("app", ""), command=command, env=env, created_at=now,
        mirror=MIRROR_ANNOTATION in annotations,
        static=annotations.get(SOURCE_ANNOTATION, "api") != "api", local_storage=local_storage,
    )
    for problem in validate_classes(pod):
        ctx.err(sp, problem)
    return pod


def parse_pods(text: str, now: float = 0.0) -> list[PodSpec]:
    """Every pod of a manifest; raises PodFileError listing every problem with its path.

    ``now`` becomes each pod's ``created_at`` (seconds).
    """
    ctx = _Ctx()
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise PodFileError([f"<root>: not valid YAML/JSON: {exc}"]) from exc
    items: list[tuple[Any, str]] = []
    if len(docs) > 1:
        items = [(d, f"[{i}]") for i, d in enumerate(docs)]
    elif len(docs) == 1 and isinstance(docs[0], list):
        items = [(d, f"[{i}]") for i, d in enumerate(docs[0])]
    elif len(docs) == 1 and isinstance(docs[0], dict) and docs[0].get("kind") == "List":
        raw = docs[0].get("items")
        if not isinstance(raw, list):
            raise PodFileError(["items: required: a list of pods"])
        items = [(d, f"items[{i}]") for i, d in enumerate(raw)]
    elif len(docs) == 1:
        items = [(docs[0], "")]
    if not items:
        raise PodFileError(["<root>: no pods in file"])
    pods = [_pod(ctx, obj, path, now) for obj, path in items]
    seen: dict[str, str] = {}
    for (_, path), pod in zip(items, pods):
        if pod is not None:
            if pod.uid in seen:
                ctx.err(_join(path, "metadata"), f"duplicate pod {pod.uid!r} (also at {seen[pod.uid] or '<root>'})")
            seen[pod.uid] = path
    if ctx.errors:
        raise PodFileError(ctx.errors)
    return [p for p in pods if p is not None]


def load_pod_file(path: Path, now: float = 0.0) -> list[PodSpec]:
    """:func:`parse_pods` of a file; raises PodFileError (also when the file cannot be read)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise PodFileError([f"{path}: cannot read: {exc.strerror or exc}"]) from exc
    return parse_pods(text, now)
