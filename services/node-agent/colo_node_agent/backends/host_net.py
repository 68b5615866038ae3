"""Network QoS on the host (docs/node-agent.md "Network QoS"): the HTB tree on the NodeSLO's interface
(:mod:`.host_tc`) and each group's ``net_prio.ifpriomap`` (:func:`~colo_node_agent.strategies.net_qos.net_priority`).

Needs cgroup v1 with ``net_prio`` mounted at ``<cgroup_root>/net_prio`` when the agent starts (the agent then
makes its groups there like in the other hierarchies, and pods join them); without it the strategy reports
one problem and changes nothing. The tree is installed when the policy changes, retried every
:data:`RETRY_S` seconds after a failure, and removed (only when it is the agent's) when switched off.

``ifpriomap`` is keyed by interface (``"<ifname> <priority>"`` per line, devices of the initial network
namespace only: the kernel looks the name up there), a shape the executor's value kinds do not have, so its
writes are made here, each once per (group, interface) and value. The kernel reads the map at every packet:
a write applies to the group's existing sockets at once.
"""

from __future__ import annotations

import errno

from colo.messages import NetQoSStrategy, QoSClass
from colo_node_agent.backends import host_tc
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.cgroups.layout import BESTEFFORT, BURSTABLE, KUBEPODS
from colo_node_agent.strategies.net_qos import htb_classes, net_priority

RETRY_S = 10.0
"""Seconds between attempts to install a tree that ``tc`` refused."""
PRIOMAP = "net_prio.ifpriomap"
QOS_GROUPS: tuple[tuple[str, QoSClass], ...] = ((KUBEPODS, "LSR"), (BURSTABLE, "LS"), (BESTEFFORT, "BE"))
"""The QoS-class groups: their map is what a new pod group inherits."""


class NetQoS:
    """The network QoS state of one host node: the tree installed, the maps written, the last problem."""

    def __init__(self, tree: CgroupTree) -> None:
        self.tree = tree
        self.available = tree.version == "v1" and "net_prio" in tree.controllers
        self.installed: NetQoSStrategy | None = None
        """The policy whose tree is on the interface (None: nothing installed by this agent)."""
        self.problem = ""
        self._failed: tuple[NetQoSStrategy, float] | None = None
        self._maps: dict[tuple[str, str], int] = {}
        """(group, interface) → the priority written there."""

    def sync(self, policy: NetQoSStrategy, now: float) -> str:
        """Bring the interface's tree in line with ``policy``; the problem ("" none)."""
        if not policy.enabled and self.installed is None:
            self.problem = ""
            return ""
        if not self.available and policy.enabled:
            self.problem = ("net_qos: cgroup v1 net_prio is not mounted under the cgroup root when the agent "
                            "started (mount -t cgroup -o net_prio net_prio <root>/net_prio): not applied")
            return self.problem
        if policy == self.installed:
            return self.problem
        if self._failed is not None and self._failed[0] == policy and now < self._failed[1] + RETRY_S:
            return self.problem
        try:
            old = self.installed
            if old is not None and (not policy.enabled or old.interface != policy.interface):
                host_tc.remove(old.interface)
            if policy.enabled:
                host_tc.install(policy.interface, htb_classes(policy))
            self.installed = policy if policy.enabled else None
            self.problem, self._failed = "", None
        except host_tc.TCError as exc:
            self.problem, self._failed = f"net_qos: {exc}", (policy, now)
        return self.problem

    def remove(self) -> None:
        """Take the installed tree off its interface (tests and benchmarks leave nothing behind)."""
        if self.installed is not None:
            try:
                host_tc.remove(self.installed.interface)
            except host_tc.TCError as exc:
                self.problem = f"net_qos: {exc}"
            self.installed = None

    def classify(self, pods: list[tuple[str, QoSClass]], policy: NetQoSStrategy, prune: bool = True) -> None:
        """Write the priority of the QoS-class groups and of ``pods`` (group, class) for the policy's
        interface; interfaces used before get 0 (the default class). ``prune`` forgets groups not listed.
        A refused write is kept in :attr:`problem`."""
        if not self.available:
            return
        groups = [*QOS_GROUPS, *pods]
        used: dict[str, list[str]] = {}
        for g, ifname in self._maps:
            used.setdefault(g, []).append(ifname)
        wanted: dict[tuple[str, str], int] = {}
        for cg, qos in groups:
            for ifname in used.get(cg, ()):
                wanted[(cg, ifname)] = 0
            if policy.enabled:
                wanted[(cg, policy.interface)] = net_priority(qos, policy)
        for (cg, ifname), prio in wanted.items():
            if self._maps.get((cg, ifname)) == prio:
                continue
            try:
                self.tree.fs.write(f"net_prio/{cg}/{PRIOMAP}", f"{ifname} {prio}")
            except OSError as exc:
                if exc.errno != errno.ENOENT or cg in dict(QOS_GROUPS):
                    self.problem = f"net_qos: {PRIOMAP} of {cg or '/'} = {ifname} {prio}: {exc.strerror}"
                continue
            self._maps[(cg, ifname)] = prio
        if prune:
            keep = {cg for cg, _ in groups}
            self._maps = {k: v for k, v in self._maps.items() if k[0] in keep and (v != 0 or policy.enabled)}
