"""OOM priority: the ``oom_score_adj`` of a pod's processes by QoS class (docs/node-agent.md "OOM priority").

The kernel's OOM killer (``mm/oom_kill.c`` ``oom_badness``) kills the process with the most points: its
resident memory + swap + page tables, in pages, plus ``oom_score_adj`` × total pages / 1000 (total = the
memory of the machine, or of the memory cgroup whose limit was hit). The kubelet's values
(``pkg/kubelet/qos/policy.go``): Guaranteed −997, BestEffort 1000, Burstable 1000 − 1000 × memory request /
node memory within 1000 + (−997) = 3 .. 999.

With those values a Burstable pod above its request can outscore a BestEffort pod, so the kernel may kill
an LS process while BE ones live. Colo keeps BE = 1000 and LSE/LSR = −997 but moves LS into the negative
half (``ls = −1000 × request / memory`` within ``lsr + 1 .. ls_max``, defaults −996..−1): a BE process then
always has ≥ 1000 points, an LS process < 1000 unless it holds all memory, so the BE processes are killed
first; among LS pods the kubelet's order stays (the one furthest above its request goes first).
"""

from __future__ import annotations

from colo.messages import OOMStrategy, QoSClass

OOM_SCORE_ADJ_DEFAULT = 0
"""The kernel's default ``oom_score_adj``: written when the strategy is off."""


def oom_score_adj(qos: QoSClass, memory_request_bytes: int, memory_capacity_bytes: int,
                  policy: OOMStrategy) -> int:
    """The ``oom_score_adj`` (−1000..1000) of every process of a pod of class ``qos`` requesting
    ``memory_request_bytes`` on a node of ``memory_capacity_bytes`` (BE pods: their batch-memory).

    Off: 0. BE: ``be_score_adj``. LSE, LSR, SYSTEM: ``lsr_score_adj``. LS: −(1000 × request // capacity)
    (the kubelet's Burstable value − 1000), clamped to ``lsr_score_adj`` + 1 .. ``ls_max_score_adj``;
    a capacity ≤ 0 counts as no request. Never raises.
    """
    if not policy.enabled:
        return OOM_SCORE_ADJ_DEFAULT
    if qos == "BE":
        return policy.be_score_adj
    if qos != "LS":
        return policy.lsr_score_adj
    share = -((1000 * max(memory_request_bytes, 0)) // memory_capacity_bytes) if memory_capacity_bytes > 0 else 0
    return max(policy.lsr_score_adj + 1, min(share, policy.ls_max_score_adj))
