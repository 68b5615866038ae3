"""ElasticQuota (PreFilter, Reserve, preemption rules): pods of a quota are placed only within its runtime
quota and max and those of every ancestor (REFERENCE.md §8; Koordinator ``elasticquota`` plugin).

The state is a :class:`~.book.QuotaBook`; the scheduler core feeds it the queue's pods
(:meth:`ElasticQuota.add_pending` / :meth:`ElasticQuota.drop_pending`), the quotas
(:meth:`ElasticQuota.apply`) and, once a cycle, the cluster's totals (:meth:`ElasticQuota.refresh`), and
takes the pods to evict for reclaimed quota (:meth:`ElasticQuota.reclaim`). Pods of no quota pass without
any work beyond one label and one namespace lookup.
"""

from __future__ import annotations

from collections.abc import Sequence

from colo.messages import ElasticQuota as ElasticQuotaSpec
from colo.messages import QuotaStatus
from colo_scheduler.framework.interface import POD_DELETE, UNSCHEDULABLE, CycleState, Status
from colo_scheduler.plugins.elasticquota.book import QuotaBook
from colo_scheduler.plugins.elasticquota.reclaim import Reclaim, preemptible, reclaim
from colo_scheduler.plugins.elasticquota.tree import ZERO, Vector
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import NodeTable

QUOTA_CHANGE = "QuotaChange"
"""A quota was added, changed or removed, or a runtime quota changed: pods its check refused may pass now."""


class ElasticQuota:
    """The plugin; one instance per profile holds the quota book (``book``)."""

    name = "ElasticQuota"
    events = frozenset({POD_DELETE, QUOTA_CHANGE})

    def __init__(self) -> None:
        self.book = QuotaBook()

    # ------------------------------------------------------------------ extension points

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """UNSCHEDULABLE with the reason of :meth:`QuotaBook.check` when the pod's quota (or an ancestor)
        has no room for it; None otherwise."""
        if not self.book.active:
            return None
        reason = self.book.check(pod)
        return Status(UNSCHEDULABLE, reason) if reason else None

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Count the pod in its quota's used."""
        if self.book.active:
            self.book.reserve(pod, node, now)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Undo :meth:`reserve`."""
        if self.book.active:
            self.book.unreserve(pod)

    def victim_allowed(self, state: CycleState, preemptor: PodInfo, victim: PodInfo) -> bool:
        """May ``preemptor`` take ``victim``'s room (asked by preemption's PostFilter)? Never a
        non-preemptible pod; never when the preemptor's quota (or an ancestor) has no runtime room for it;
        never a pod of another quota while that quota is within its min (used ≤ min in every constrained
        resource), nor one whose eviction would take that quota, or an ancestor of it that is not the
        preemptor's, below its min in a constrained resource the victim requests, pods a reclaim ordered out
        counted as gone (as :mod:`.reclaim` never does). Pods of no quota follow the priority rules alone. One node's victims together:
        :meth:`victims_allowed`.

        "Over its runtime": used > runtime in some constrained resource of the preemptor's quota or an
        ancestor (:meth:`QuotaBook.over_runtime`)."""
        if not preemptible(victim):
            return False
        book = self.book
        if not book.active:
            return True
        if book.over_runtime(book.quota_of(preemptor)):
            return False
        theirs, mine = book.quota_of(victim), book.quota_of(preemptor)
        if not theirs or theirs == mine or theirs not in book.tree.nodes:
            return True
        q = book.tree.nodes[theirs]
        used = book.used.get(theirs, ZERO)
        within = all(used[i] <= q.min[i] for i, c in enumerate(q.constrained) if c)
        if within:
            return False
        # nor one whose eviction takes its quota, or an ancestor not shared with the preemptor, below its min
        # in a resource it requests (the rule reclaim keeps: a quota over its min by 2 cores keeps a 6-core pod)
        return self._keeps_min(mine, [victim])

    def victims_allowed(self, state: CycleState, preemptor: PodInfo, victims: Sequence[PodInfo]) -> bool:
        """May ``preemptor`` take all of ``victims`` (one node's set) at once? Each was allowed alone
        (:meth:`victim_allowed`); together they must not take any quota below its min either."""
        book = self.book
        return not book.active or self._keeps_min(book.quota_of(preemptor), victims)

    def _keeps_min(self, mine: str, victims: Sequence[PodInfo]) -> bool:
        """Whether evicting ``victims`` leaves every quota of their chains that is not in the chain of quota
        ``mine`` at or above its min in each constrained resource they request, the pods a reclaim ordered out
        counted as gone (as in :mod:`.reclaim`)."""
        book = self.book
        tree = book.tree
        shared = set(tree.chain(mine))
        taken: dict[str, list[int]] = {}
        for v in victims:
            theirs = book.quota_of(v)
            for name in tree.chain(theirs) if theirs in tree.nodes else ():
                if name in shared:
                    break
                acc = taken.setdefault(name, [0] * len(v.request_ints))
                for i, r in enumerate(v.request_ints):
                    acc[i] += r
        if not taken:
            return True
        leaving = [m for m in (book.members.get(u) for u in book.evicting) if m is not None]
        for name, request in taken.items():
            node, used = tree.nodes[name], list(book.used.get(name, ZERO))
            for m in leaving:
                if name in tree.chain(m.leaf):
                    used = [u - r for u, r in zip(used, m.request, strict=True)]
            if any(c and request[i] > 0 and used[i] - request[i] < node.min[i] for i, c in enumerate(node.constrained)):
                return False
        return True

    # ------------------------------------------------------------------ driven by the core

    def apply(self, spec: ElasticQuotaSpec) -> list[str]:
        """Add, change or delete a quota; the problems when refused (:meth:`QuotaBook.apply`)."""
        return self.book.apply(spec)

    def add_pending(self, pod: PodInfo) -> None:
        """A pod entered the queue."""
        if self.book.active:
            self.book.add_pending(pod)

    def drop_pending(self, uid: str) -> None:
        """A pod left the queue unplaced, or a placed pod finished."""
        if self.book.active:
            self.book.drop_pending(uid)

    def refresh(self, totals: Vector) -> bool:
        """Recompute runtimes when anything changed (:meth:`QuotaBook.refresh`); True when one changed."""
        return self.book.refresh(totals)

    def reclaim(self) -> list[Reclaim]:
        """Pods to evict for lent quota now needed back (:func:`.reclaim.reclaim`)."""
        return reclaim(self.book)

    def statuses(self, now: float) -> list[QuotaStatus]:
        """Changed quota statuses since the last call (:meth:`QuotaBook.statuses`)."""
        return self.book.statuses(now) if self.book.active else []

    def chain_of(self, pod: PodInfo) -> tuple[str, ...]:
        """The placed pod's leaf quota and ancestors, leaf first; () for none."""
        return self.book.chain_of(pod) if self.book.active else ()
