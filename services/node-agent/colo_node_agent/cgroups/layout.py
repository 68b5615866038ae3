"""Where pods live in the cgroup tree: the kubelet's ``cgroupfs`` or ``systemd`` layout, under an optional parent.

Guaranteed pods (LSR/LSE) sit directly under the kubepods group, Burstable (LS) under its burstable group and
BestEffort (BE) under its besteffort group; the QoS-level directories are where the agent's QoS-wide settings go
(BE suppress cpuset/quota, ``cpu.idle``, the BE memory limit, I/O throttles).

========  ===========================  ==================================================================
driver    QoS directory (BE)           pod directory (BE pod ``1a-2b``)
========  ===========================  ==================================================================
cgroupfs  ``kubepods/besteffort``      ``kubepods/besteffort/pod1a-2b``
systemd   ``kubepods.slice/            ``kubepods.slice/kubepods-besteffort.slice/
          kubepods-besteffort.slice``  kubepods-besteffort-pod1a_2b.slice``
========  ===========================  ==================================================================

The names are the kubelet's (``pkg/kubelet/cm/cgroup_manager_linux.go``: systemd slices escape ``-`` in the
pod uid as ``_``). ``parent`` roots the whole layout lower in the tree (``colo-test`` in tests, so that real
cgroups made by tests never touch the host's own ``kubepods``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from colo.messages import QoSClass

KUBEPODS = "kubepods"
BURSTABLE = "kubepods/burstable"
BESTEFFORT = "kubepods/besteffort"
QOS_DIRS: tuple[str, ...] = (KUBEPODS, BURSTABLE, BESTEFFORT)

Driver = Literal["cgroupfs", "systemd"]


@dataclass(frozen=True)
class Layout:
    """A cgroup layout: ``driver`` ``cgroupfs`` or ``systemd``, rooted at relative dir ``parent`` ("" = root)."""

    driver: Driver = "cgroupfs"
    parent: str = ""

    def _join(self, *parts: str) -> str:
        return "/".join(p.strip("/") for p in (self.parent, *parts) if p.strip("/"))

    @cached_property
    def kubepods(self) -> str:
        """The top pod group (Guaranteed pods live directly in it)."""
        return self._join("kubepods.slice" if self.driver == "systemd" else "kubepods")

    @cached_property
    def burstable(self) -> str:
        """The Burstable (LS) QoS group."""
        if self.driver == "systemd":
            return self._join("kubepods.slice", "kubepods-burstable.slice")
        return self._join("kubepods", "burstable")

    @cached_property
    def besteffort(self) -> str:
        """The BestEffort (BE) QoS group."""
        if self.driver == "systemd":
            return self._join("kubepods.slice", "kubepods-besteffort.slice")
        return self._join("kubepods", "besteffort")

    @cached_property
    def qos_dirs(self) -> tuple[str, str, str]:
        """The three QoS-level groups, parents first: kubepods, burstable, besteffort."""
        return (self.kubepods, self.burstable, self.besteffort)

    def qos_dir(self, qos: QoSClass) -> str:
        """The QoS-level group of a pod of class ``qos`` (BE → besteffort, LSR/LSE → kubepods, else burstable)."""
        if qos == "BE":
            return self.besteffort
        if qos in ("LSR", "LSE"):
            return self.kubepods
        return self.burstable

    def pod_dir(self, qos: QoSClass, uid: str) -> str:
        """The pod-level group of pod ``uid``."""
        if self.driver == "cgroupfs":
            return f"{self.qos_dir(qos)}/pod{uid}"
        escaped = uid.replace("-", "_")
        if qos == "BE":
            return f"{self.besteffort}/kubepods-besteffort-pod{escaped}.slice"
        if qos in ("LSR", "LSE"):
            return f"{self.kubepods}/kubepods-pod{escaped}.slice"
        return f"{self.burstable}/kubepods-burstable-pod{escaped}.slice"


CGROUPFS = Layout()
"""The default layout: cgroupfs driver at the root (what the ``sim`` backend uses)."""


def qos_dir(qos: QoSClass) -> str:
    """The QoS-level directory of a pod of class ``qos`` in the default layout."""
    return CGROUPFS.qos_dir(qos)


def pod_dir(qos: QoSClass, uid: str) -> str:
    """The pod-level cgroup of pod ``uid`` in the default layout (``kubepods/besteffort/pod<uid>`` ...)."""
    return CGROUPFS.pod_dir(qos, uid)
