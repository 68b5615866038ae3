"""Reclaiming lent quota (Koordinator's quota over-used revoke,
``pkg/scheduler/plugins/elasticquota/quota_overuse_revoke.go``): when a quota's runtime drops below what
its pods use — its siblings need their min back — pick pods of it to evict until used ≤ runtime.

Victims: lowest priority first, then the latest placed first (ties by uid); never a pod labelled
``quota.scheduling.koordinator.sh/preemptible: "false"``; never one whose eviction would take any quota
between its leaf and the over-used quota below its min in an over-used resource. A quota below its min in
another resource (a team borrowing memory while under its CPU min) is still over its runtime in the first one
and gives that back: its pods hold both, and guarding every resource they request would protect them all. A pod
that requests none of the over-used resources is left alone. Pods already ordered out count as gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from colo.messages import PREEMPTIBLE_LABEL, RESOURCE_NAMES
from colo_scheduler.plugins.elasticquota.book import Member, QuotaBook
from colo_scheduler.plugins.elasticquota.tree import ZERO
from colo_scheduler.podinfo import PodInfo


def preemptible(pod: PodInfo) -> bool:
    """False for a pod labelled ``quota.scheduling.koordinator.sh/preemptible: "false"``."""
    return pod.spec.labels.get(PREEMPTIBLE_LABEL) != "false"


@dataclass(frozen=True, slots=True)
class Reclaim:
    """One pod to evict: ``member`` (pod, row) and the ``reason`` naming the quota and the resource."""

    member: Member
    reason: str


def _subtree_members(book: QuotaBook, name: str) -> list[Member]:
    leaves: list[str] = []
    todo = [name]
    while todo:
        q = book.tree.nodes[todo.pop()]
        if q.leaf:
            leaves.append(q.name)
        todo.extend(q.children)
    wanted = set(leaves)
    return [m for m in book.members.values() if m.leaf in wanted and m.pod.uid not in book.evicting]


def reclaim(book: QuotaBook) -> list[Reclaim]:
    """The pods to evict now so that every quota's used (pods already evicting left out) is within its
    runtime, deepest quotas first; marks them in ``book.evicting``. Call after :meth:`QuotaBook.refresh`."""
    if not book.tree.nodes or not book.members:
        return []
    eff: dict[str, list[int]] = {q: list(v) for q, v in book.used.items()}
    for uid in book.evicting:
        m = book.members.get(uid)
        if m is not None:
            for a in book.tree.chain(m.leaf):
                for i, v in enumerate(m.request):
                    eff[a][i] -= v
    out: list[Reclaim] = []
    for name in reversed(book.tree.order):
        q = book.tree.nodes[name]
        runtime = book.runtime.get(name, ZERO)
        used = eff.get(name)
        if used is None:
            continue
        over = [i for i, c in enumerate(q.constrained) if c and used[i] > runtime[i]]
        if not over:
            continue
        members = sorted((m for m in _subtree_members(book, name) if preemptible(m.pod)),
                         key=lambda m: (m.pod.priority, -m.at, m.pod.uid))
        for m in members:
            if not any(m.request[i] > 0 and used[i] > runtime[i] for i in over):
                continue
            chain = book.tree.chain(m.leaf)
            upto = chain[: chain.index(name) + 1]
            if any(book.tree.nodes[a].constrained[i] and m.request[i] > 0
                   and eff[a][i] - m.request[i] < book.tree.nodes[a].min[i]
                   for a in upto for i in over):
                continue
            worst = next(i for i in over if m.request[i] > 0 and used[i] > runtime[i])
            res = RESOURCE_NAMES[worst]
            if used[worst] > q.max[worst]:  # its max was lowered below its use
                why = f"quota {name}: over its max {res} (used {used[worst]} > max {q.max[worst]})"
            else:
                why = f"quota {name}: reclaiming lent quota {res} (used {used[worst]} > runtime {runtime[worst]})"
            out.append(Reclaim(m, why))
            book.evicting.add(m.pod.uid)
            for a in chain:
                for i, v in enumerate(m.request):
                    eff[a][i] -= v
            if all(used[i] <= runtime[i] for i in over):
                break
    return out
