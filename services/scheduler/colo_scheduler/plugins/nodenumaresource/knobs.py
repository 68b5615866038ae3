"""What NodeNUMAResource reads from pods and nodes (Koordinator's names; docs/topology.md "Pod and node knobs").

Pod (:func:`cpu_request`): LSE and LSR pods (``koordinator.sh/qosClass``, REFERENCE.md §1) whose CPU request is
a whole, non-zero number of cores get a cpuset of that many CPUs. The annotation
``scheduling.koordinator.sh/resource-spec`` (JSON) may set ``preferredCPUBindPolicy`` / ``requiredCPUBindPolicy``
(``Default``, ``FullPCPUs``, ``SpreadByPCPUs``; ``Default`` = the plugin's default) and
``preferredCPUExclusivePolicy`` (``None``, ``PCPULevel``, ``NUMANodeLevel``).

Node (:func:`node_knobs`): label ``node.koordinator.sh/cpu-bind-policy`` (``FullPCPUsOnly``, ``SpreadByPCPUs``)
overrides a pod's preferred bind policy (and rejects a pod whose required one differs); annotation
``kubelet.koordinator.sh/cpu-manager-policy`` (JSON ``{"policy": "static", "options": {"full-pcpus-only":
"true"}}``) counts as ``FullPCPUsOnly``; label ``node.koordinator.sh/numa-topology-policy`` (``None``,
``BestEffort``, ``Restricted``, ``SingleNUMANode``) gives the NUMA topology policy (else the plugin's default).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from colo.classes import qos_class_of
from colo.messages import NodeSpec, PodSpec, cpuset_parse
from colo_scheduler.plugins.nodenumaresource.accumulator import BindPolicy, ExclusivePolicy
from colo_scheduler.plugins.nodenumaresource.hints import NUMA_POLICIES, NUMATopologyPolicy

RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
NODE_CPU_BIND_POLICY = "node.koordinator.sh/cpu-bind-policy"
NODE_NUMA_TOPOLOGY_POLICY = "node.koordinator.sh/numa-topology-policy"
KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"

_BIND = ("Default", "FullPCPUs", "SpreadByPCPUs")
_EXCLUSIVE = ("None", "PCPULevel", "NUMANodeLevel")


@dataclass(frozen=True)
class CPURequest:
    """A pod's cpuset wish: ``n`` CPUs, ``bind`` policy (``Default`` resolved later), whether the bind policy is
    ``required``, and the ``exclusive`` policy."""

    n: int
    bind: str = "Default"
    required: bool = False
    exclusive: ExclusivePolicy = "None"


@dataclass(frozen=True)
class NodeKnobs:
    """A node's cpuset settings: ``bind`` policy forced by the node (None = the pod's), NUMA ``policy``,
    ``reserved`` CPU ids (``NodeSpec.reserved_cpus``, never given to pods) and the ``problems`` of its labels."""

    bind: BindPolicy | None
    policy: NUMATopologyPolicy
    reserved: frozenset[int]
    problems: tuple[str, ...] = ()


def cpu_request(spec: PodSpec) -> tuple[CPURequest | None, list[str]]:
    """(The cpuset wish of ``spec`` or None when it gets none, every problem of its annotation). A pod with
    problems gets no wish: the plugin refuses it."""
    cpu = spec.requests.cpu
    if cpu <= 0 or cpu % 1000 or qos_class_of(spec) not in ("LSE", "LSR"):
        return None, []
    raw = spec.annotations.get(RESOURCE_SPEC)
    if raw is None:
        return CPURequest(cpu // 1000), []
    where = f"annotations[{RESOURCE_SPEC}]"
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        return None, [f"{where}: not JSON ({exc})"]
    if not isinstance(doc, dict):
        return None, [f"{where}: must be a JSON object"]
    problems: list[str] = []
    preferred, required = doc.get("preferredCPUBindPolicy", "Default"), doc.get("requiredCPUBindPolicy", "")
    exclusive = doc.get("preferredCPUExclusivePolicy", "None")
    if preferred not in _BIND:
        problems.append(f"{where}.preferredCPUBindPolicy: {preferred!r} is not one of {', '.join(_BIND)}")
    if required not in ("", *_BIND):
        problems.append(f"{where}.requiredCPUBindPolicy: {required!r} is not one of {', '.join(_BIND)}")
    if exclusive not in _EXCLUSIVE:
        problems.append(f"{where}.preferredCPUExclusivePolicy: {exclusive!r} is not one of {', '.join(_EXCLUSIVE)}")
    if problems:
        return None, problems
    bind = required or preferred
    return CPURequest(cpu // 1000, bind, bool(required) and required != "Default", exclusive), []


def node_knobs(spec: NodeSpec, default_policy: NUMATopologyPolicy) -> NodeKnobs:
    """The cpuset settings of node ``spec``; a bad label or annotation is listed in ``problems`` and ignored."""
    problems: list[str] = []
    bind: BindPolicy | None = None
    label = spec.labels.get(NODE_CPU_BIND_POLICY)
    if label == "FullPCPUsOnly":
        bind = "FullPCPUs"
    elif label == "SpreadByPCPUs":
        bind = "SpreadByPCPUs"
    elif label not in (None, "", "None", "Default"):
        problems.append(f"labels[{NODE_CPU_BIND_POLICY}]: {label!r} is not FullPCPUsOnly or SpreadByPCPUs")
    kubelet = spec.annotations.get(KUBELET_CPU_MANAGER_POLICY)
    if kubelet:
        try:
            doc = json.loads(kubelet)
            opts = doc.get("options") or {} if isinstance(doc, dict) else {}
            if doc.get("policy") == "static" and str(opts.get("full-pcpus-only", "")).lower() == "true":
                bind = bind or "FullPCPUs"
        except (ValueError, AttributeError) as exc:
            problems.append(f"annotations[{KUBELET_CPU_MANAGER_POLICY}]: not a JSON object ({exc})")
    policy = spec.labels.get(NODE_NUMA_TOPOLOGY_POLICY, "") or default_policy
    if policy not in NUMA_POLICIES:
        problems.append(f"labels[{NODE_NUMA_TOPOLOGY_POLICY}]: {policy!r} is not one of {', '.join(NUMA_POLICIES)}")
        policy = default_policy
    try:
        reserved = frozenset(cpuset_parse(spec.reserved_cpus))
    except ValueError as exc:
        problems.append(f"reserved_cpus: {exc}")
        reserved = frozenset()
    return NodeKnobs(bind, policy, reserved, tuple(problems))


def resolve_bind(req: CPURequest, node: NodeKnobs, default: BindPolicy) -> tuple[BindPolicy | None, str]:
    """(The bind policy for ``req`` on ``node``, "") or (None, why not) when the pod requires a policy the node
    forbids."""
    wanted: BindPolicy = default if req.bind == "Default" else req.bind  # type: ignore[assignment]
    if node.bind is None:
        return wanted, ""
    if req.required and wanted != node.bind:
        return None, f"node CPU bind policy {node.bind} conflicts with the pod's required {wanted}"
    return node.bind, ""
