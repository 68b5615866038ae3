"""Egress network QoS: HTB classes for LS, BE and the rest of the node, and the packet priority of each
pod's traffic (docs/node-agent.md "Network QoS"). Pure.

The node's egress on ``NetQoSStrategy.interface`` gets an HTB tree under root qdisc ``c0:`` (the handle marks
it as the agent's): class ``c0:1`` holds ``total_bps``; under it LS (``c0:10``: rate ``ls_bps``, ceil
``total_bps``), BE (``c0:20``: rate = ceil = ``be_bps``, the BE limit) and everything else (``c0:30``, the
default class: the remaining ``total_bps`` − ``ls_bps`` − ``be_bps``, at least :data:`MIN_RATE_BPS`, ceil
``total_bps``). A packet goes to the class whose id equals its ``skb->priority`` (HTB does this before any
filter), and the pod groups' cgroup v1 ``net_prio.ifpriomap`` sets that priority for the interface on every
packet of the group's sockets. (``net_cls`` class ids would need the ``cls_cgroup`` tc classifier, which
kernels such as this machine's 6.18 build lack; net_prio needs none.) HTB lends unused rate to classes below their ceil, LS before the rest (priority 0 vs 1),
so LS gets at least its rate and BE never more than its limit. Koordinator's ``NetworkQOS`` has the same
shape (egress request/limit per QoS class); this follows its HTB form, not its eBPF one.
"""

from __future__ import annotations

from dataclasses import dataclass

from colo.messages import NetQoSStrategy, QoSClass

QDISC_MAJOR = 0xC0
"""Major number of the agent's root qdisc (``c0:``); classes are ``c0:<minor>``."""
ROOT_MINOR, LS_MINOR, BE_MINOR, DEFAULT_MINOR = 0x1, 0x10, 0x20, 0x30
MIN_RATE_BPS = 8_000
"""The smallest rate given to a class (HTB needs a positive rate): 8 kbit/s."""


@dataclass(frozen=True)
class HTBClass:
    """One HTB class: ``minor`` of ``c0:<minor>``, ``parent`` minor (0 = the qdisc), rates in bits/s,
    ``prio`` (lower borrows first)."""

    minor: int
    parent: int
    rate_bps: int
    ceil_bps: int
    prio: int = 0

    @property
    def classid(self) -> str:
        """``tc`` notation, hex: ``c0:10``."""
        return f"{QDISC_MAJOR:x}:{self.minor:x}"


def htb_classes(policy: NetQoSStrategy) -> list[HTBClass]:
    """The HTB classes of ``policy`` (module doc), parents first; [] when off."""
    if not policy.enabled:
        return []
    total = policy.total_bps
    rest = max(total - policy.ls_bps - policy.be_bps, MIN_RATE_BPS)
    return [
        HTBClass(ROOT_MINOR, 0, total, total),
        HTBClass(LS_MINOR, ROOT_MINOR, max(policy.ls_bps, MIN_RATE_BPS), total, prio=0),
        HTBClass(BE_MINOR, ROOT_MINOR, max(policy.be_bps, MIN_RATE_BPS), max(policy.be_bps, MIN_RATE_BPS), prio=1),
        HTBClass(DEFAULT_MINOR, ROOT_MINOR, rest, total, prio=1),
    ]


def net_priority(qos: QoSClass, policy: NetQoSStrategy) -> int:
    """The packet priority (= HTB class id 0xMMMMmmmm) of a pod of class ``qos``: BE → ``c0:20``, every other
    class → ``c0:10``; 0 (the kernel's default: the default class) when the strategy is off."""
    if not policy.enabled:
        return 0
    return (QDISC_MAJOR << 16) | (BE_MINOR if qos == "BE" else LS_MINOR)
