"""Where pods live in the cgroup tree (the kubelet's ``cgroupfs`` layout under ``kubepods``).

Guaranteed pods (LSR/LSE) sit directly under ``kubepods``, Burstable (LS) under ``kubepods/burstable`` and
BestEffort (BE) under ``kubepods/besteffort``; the QoS-level directories are where the agent's BE-wide
settings (suppress cpuset/quota, cpu.idle, the BE memory limit) go.
"""

from __future__ import annotations

from colo.messages import QoSClass

KUBEPODS = "kubepods"
BURSTABLE = "kubepods/burstable"
BESTEFFORT = "kubepods/besteffort"
QOS_DIRS: tuple[str, ...] = (KUBEPODS, BURSTABLE, BESTEFFORT)


def qos_dir(qos: QoSClass) -> str:
    """The QoS-level directory of a pod of class ``qos``."""
    if qos == "BE":
        return BESTEFFORT
    if qos in ("LSR", "LSE"):
        return KUBEPODS
    return BURSTABLE


def pod_dir(qos: QoSClass, uid: str) -> str:
    """The pod-level cgroup of pod ``uid`` (``kubepods/besteffort/pod<uid>`` ...)."""
    return f"{qos_dir(qos)}/pod{uid}"
