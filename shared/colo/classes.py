"""Priority and QoS classes of a pod, and their valid combinations (REFERENCE.md §1)."""

from __future__ import annotations

from colo.messages import PodSpec, PriorityClass, QoSClass

PRIORITY_RANGES: dict[PriorityClass, tuple[int, int, int]] = {
    "prod": (9000, 9999, 9500),
    "mid": (7000, 7999, 7500),
    "batch": (5000, 5999, 5500),
    "free": (3000, 3999, 3500),
}
"""Priority class → (lowest, highest, default value), inclusive; REFERENCE.md §1."""

PRIORITY_CLASS_LABEL = "koordinator.sh/priority-class"
QOS_CLASS_LABEL = "koordinator.sh/qosClass"


def priority_class_of_value(priority: int | None) -> PriorityClass:
    """The class whose range holds ``priority``; ``"none"`` outside every range or None."""
    if priority is None:
        return "none"
    for name, (lo, hi, _) in PRIORITY_RANGES.items():
        if lo <= priority <= hi:
            return name
    return "none"


def kubernetes_qos(pod: PodSpec) -> QoSClass:
    """QoS class from requests/limits as Kubernetes derives it, mapped per REFERENCE.md §1.

    Guaranteed (cpu and memory requests equal non-zero limits) → LSR, BestEffort (no
    cpu/memory/batch/mid requests or limits at all) → BE, else Burstable → LS.
    """
    r, lim = pod.requests, pod.limits
    native = (r.cpu, r.memory, lim.cpu, lim.memory)
    extended = (r.batch_cpu, r.batch_memory, lim.batch_cpu, lim.batch_memory,
                r.mid_cpu, r.mid_memory, lim.mid_cpu, lim.mid_memory)
    if not any(native) and not any(extended):
        return "BE"
    if lim.cpu and lim.memory and r.cpu in (0, lim.cpu) and r.memory in (0, lim.memory):
        return "LSR"
    return "LS"


def qos_class_of(pod: PodSpec) -> QoSClass:
    """The pod's QoS class: explicit field, then label, then :func:`kubernetes_qos`."""
    if pod.qos_class is not None:
        return pod.qos_class
    label = pod.labels.get(QOS_CLASS_LABEL)
    if label in ("SYSTEM", "LSE", "LSR", "LS", "BE"):
        return label  # type: ignore[return-value]
    return kubernetes_qos(pod)


def priority_class_of(pod: PodSpec) -> PriorityClass:
    """The pod's priority class: explicit field or label, then priority range, then QoS class.

    REFERENCE.md §1: SYSTEM/LSE/LSR/LS → prod, BE → batch when nothing else decides.
    """
    if pod.priority_class is not None:
        return pod.priority_class
    label = pod.labels.get(PRIORITY_CLASS_LABEL)
    if label in ("prod", "mid", "batch", "free", "none"):
        return label  # type: ignore[return-value]
    by_value = priority_class_of_value(pod.priority)
    if by_value != "none" or pod.priority is not None:
        return by_value
    return "batch" if qos_class_of(pod) == "BE" else "prod"


def validate_classes(pod: PodSpec) -> list[str]:
    """Every violation of the valid class combinations (REFERENCE.md §1); empty when valid.

    BE must not be prod or unclassified; LSR/LSE must be prod and request a whole,
    non-zero number of cores; pods requesting batch-* must be BE.
    """
    errors: list[str] = []
    qos = qos_class_of(pod)
    prio = priority_class_of(pod)
    if qos == "BE" and prio in ("prod", "none"):
        errors.append(f"QoS class BE cannot have priority class {prio}")
    if qos in ("LSR", "LSE"):
        if prio != "prod":
            errors.append(f"QoS class {qos} requires priority class prod, got {prio}")
        if pod.requests.cpu <= 0 or pod.requests.cpu % 1000:
            errors.append(
                f"QoS class {qos} requires a whole, non-zero number of cores, "
                f"got {pod.requests.cpu}m"
            )
    batch = (pod.requests.batch_cpu, pod.requests.batch_memory,
             pod.limits.batch_cpu, pod.limits.batch_memory)
    if any(batch) and qos != "BE":
        errors.append(f"pods requesting batch-* resources must be BE, got {qos}")
    return errors


def resource_kind_problems(pod: PodSpec) -> list[str]:
    """Violations of the resource model of REFERENCE.md §1 beyond :func:`validate_classes`: mid-class
    pods request mid-*, so a pod requesting ``mid-*`` resources must have priority class mid, and a
    pod requests one kind only (native, batch-* or mid-*). Empty when valid."""
    errors: list[str] = []
    r, lim = pod.requests, pod.limits
    batch = any((r.batch_cpu, r.batch_memory, lim.batch_cpu, lim.batch_memory))
    mid = any((r.mid_cpu, r.mid_memory, lim.mid_cpu, lim.mid_memory))
    native = any((r.cpu, r.memory, lim.cpu, lim.memory))
    if mid and priority_class_of(pod) != "mid":
        errors.append(f"pods requesting mid-* resources must have priority class mid, got {priority_class_of(pod)}")
    if native + batch + mid > 1:
        kinds = [k for k, on in (("cpu/memory", native), ("batch-*", batch), ("mid-*", mid)) if on]
        errors.append(f"a pod requests one kind of resources, got {' and '.join(kinds)}")
    return errors
