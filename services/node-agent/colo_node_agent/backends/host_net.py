"""Network QoS on the host (docs/node-agent.md "Network QoS"): the HTB tree on the NodeSLO's interface
(:mod:`.host_tc`) and each pod group's ``net_cls.classid`` (:func:`~colo_node_agent.strategies.net_qos.net_classid`).

Needs cgroup v1 with ``net_cls`` mounted at ``<cgroup_root>/net_cls`` when the agent starts (the agent then
makes its groups there like in the other hierarchies, and pods join them); without it the strategy reports
one problem and writes nothing. The tree is installed when the policy changes, retried every
:data:`RETRY_S` seconds after a failure, and removed (only when it is the agent's) when switched off. The
kernel updates the class id of a group's existing sockets when ``net_cls.classid`` is written.
"""

from __future__ import annotations

from colo.messages import NetQoSStrategy, QoSClass
from colo_node_agent.backends import host_tc
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.layout import BESTEFFORT, BURSTABLE, KUBEPODS
from colo_node_agent.strategies.net_qos import htb_classes, net_classid

RETRY_S = 10.0
"""Seconds between attempts to install a tree that ``tc`` refused."""
RESOURCE = "net_cls.classid"


class NetQoS:
    """The network QoS state of one host node: what is installed and the last problem."""

    def __init__(self, tree: CgroupTree) -> None:
        self.available = tree.version == "v1" and "net_cls" in tree.controllers
        self.installed: NetQoSStrategy | None = None
        """The policy whose tree is on the interface (None: nothing installed by this agent)."""
        self.problem = ""
        self._failed: tuple[NetQoSStrategy, float] | None = None

    def sync(self, policy: NetQoSStrategy, now: float) -> str:
        """Bring the interface's tree in line with ``policy``; the problem ("" none)."""
        if not policy.enabled and self.installed is None:
            self.problem = ""
            return ""
        if not self.available and policy.enabled:
            self.problem = ("net_qos: cgroup v1 net_cls is not mounted under the cgroup root when the agent "
                            "started (mount -t cgroup -o net_cls net_cls <root>/net_cls): not applied")
            return self.problem
        if policy == self.installed:
            return self.problem
        if self._failed is not None and self._failed[0] == policy and now < self._failed[1] + RETRY_S:
            return self.problem
        try:
            old = self.installed
            if old is not None and old.enabled and (
                    not policy.enabled or (old.interface, old.netns) != (policy.interface, policy.netns)):
                host_tc.remove(old.interface, old.netns)
            if policy.enabled:
                host_tc.install(policy.interface, htb_classes(policy), policy.netns)
            self.installed = policy if policy.enabled else None
            self.problem, self._failed = "", None
        except host_tc.TCError as exc:
            self.problem, self._failed = f"net_qos: {exc}", (policy, now)
        return self.problem

    def writes(self, pods: list[tuple[str, QoSClass]], policy: NetQoSStrategy) -> list[CgroupWrite]:
        """``net_cls.classid`` of the QoS-class groups and of ``pods`` (cgroup, class); 0 when off (the
        executor skips values in place); none where ``net_cls`` is not mounted."""
        if not self.available:
            return []
        reason = "NodeSLO net_qos" if policy.enabled else "net_qos off"
        groups: list[tuple[str, QoSClass]] = [(KUBEPODS, "LSR"), (BURSTABLE, "LS"), (BESTEFFORT, "BE"), *pods]
        return [CgroupWrite(cg, RESOURCE, net_classid(qos, policy), reason) for cg, qos in groups]
