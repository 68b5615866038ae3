"""The scheduler's quota book: which pods belong to which quota, their used and pending amounts, and the
runtime quotas computed from them (REFERENCE.md §8).

``used`` counts placed pods (reserved, waiting at Permit or bound), ``pending`` the pods the scheduler knows
and has not placed (its queue); both per quota and summed up the tree (a parent holds its subtree). The
runtime is recomputed only when something changed since the last computation (:meth:`QuotaBook.refresh`,
at most once a cycle: the calculator costs O(quotas × resources), not O(pods)); pod bookkeeping costs
O(depth × resources) per event. With no quota defined every method returns at its first test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from colo.messages import RESOURCE_NAMES, ElasticQuota, QuotaStatus
from colo_scheduler.plugins.elasticquota.runtime import UNLIMITED, TreeQuota, tree_runtimes
from colo_scheduler.plugins.elasticquota.tree import ZERO, QuotaTree, QuotaTreeError, Vector
from colo_scheduler.podinfo import PodInfo

N = len(RESOURCE_NAMES)


@dataclass(slots=True)
class Member:
    """A placed pod of a quota: its ``pod``, node ``row``, ``leaf`` quota, ``request`` vector and the clock
    time it was placed (``at``, seconds; the bind time for pods loaded from the store)."""

    pod: PodInfo
    row: int
    leaf: str
    request: Vector
    at: float


def _add(acc: dict[str, list[int]], chain: tuple[str, ...], pod: PodInfo, sign: int) -> None:
    """Add ``sign`` × the pod's request to every quota of ``chain`` (its non-zero columns only)."""
    req, cols = pod.request_ints, pod.request_col_ints
    for q in chain:
        v = acc.get(q)
        if v is None:
            v = acc[q] = [0] * N
        for i in cols:
            v[i] += sign * req[i]


class QuotaBook:
    """Quota state of one scheduler. ``specs`` the accepted :class:`ElasticQuota` by name, ``tree`` their
    :class:`QuotaTree`; ``used`` / ``pending`` quota → vector (the subtree's sums); ``runtime`` quota →
    vector; ``members`` uid → :class:`Member`; ``evicting`` uids ordered out by a reclaim and not yet
    released (no longer counted when deciding further reclaims)."""

    def __init__(self) -> None:
        self.specs: dict[str, ElasticQuota] = {}
        self.deferred: dict[str, ElasticQuota] = {}
        """Quotas whose parent has not arrived yet (a stream replays the latest message per quota by sequence, so a
        child may come before its parent's latest version): applied as soon as the tree accepts them."""
        self.tree = QuotaTree({})
        self.used: dict[str, list[int]] = {}
        self.pending: dict[str, list[int]] = {}
        self.pods: dict[str, int] = {}
        self.pending_pods: dict[str, int] = {}
        self.runtime: dict[str, Vector] = {}
        self.request: dict[str, Vector] = {}
        self.members: dict[str, Member] = {}
        self.waiting: dict[str, tuple[PodInfo, str]] = {}
        """Pending pods: uid → (pod, leaf); only pods of a quota."""
        self.evicting: set[str] = set()
        self._dirty = True
        self._totals: Vector = ZERO
        self._published: dict[str, tuple[object, ...]] = {}

    @property
    def active(self) -> bool:
        """True when at least one quota is defined."""
        return bool(self.tree.nodes)

    # ------------------------------------------------------------------ quotas

    def apply(self, spec: ElasticQuota) -> list[str]:
        """Add, replace or delete (``deleted``) one quota. Returns the problems of the resulting tree (the
        change is then not applied), else [] and the book is rebuilt for the new tree. A quota whose only
        problem is a parent not known yet is kept aside and applied when the parent arrives ([] too)."""
        specs = dict(self.specs)
        if spec.deleted:
            specs.pop(spec.name, None)
            self.deferred.pop(spec.name, None)
        else:  # the changed quota goes last: a clash with the quotas in force is reported on it
            specs.pop(spec.name, None)
            specs[spec.name] = spec
        try:
            tree = QuotaTree.build(specs.values())
        except QuotaTreeError as exc:
            if not spec.deleted and all(p.startswith("quota ") and ": parent: quota " in p and p.endswith("not found")
                                        for p in exc.problems):
                self.deferred[spec.name] = spec
                return []
            return exc.problems
        self.deferred.pop(spec.name, None)
        self._set(specs, tree)
        for name, waiting in list(self.deferred.items()):  # a parent may have arrived
            if name in self.deferred:
                self.deferred.pop(name)
                self.apply(waiting)
        return []

    def _set(self, specs: dict[str, ElasticQuota], tree: QuotaTree) -> None:
        self.specs, self.tree = specs, tree
        self.rebuild([(m.pod, m.row) for m in self.members.values()], [p for p, _ in self.waiting.values()])
        self.runtime = {k: v for k, v in self.runtime.items() if k in tree.nodes}

    def rebuild(self, placed: Iterable[tuple[PodInfo, int]], queued: Iterable[PodInfo]) -> None:
        """Recount every pod for the current tree: ``placed`` (pod, node row) and ``queued`` pods (the
        scheduler's, after a quota change; pods placed before any quota existed were not recorded). A pod
        keeps the placement time it was recorded with, else its last attempt (its bind time when loaded)."""
        at = {uid: m.at for uid, m in self.members.items()}
        self.used, self.pending, self.pods, self.pending_pods = {}, {}, {}, {}
        self.members, self.waiting = {}, {}
        for pod, row in placed:
            self.reserve(pod, row, at.get(pod.uid, max(pod.last_attempt_at, pod.queued_at)))
        for pod in queued:
            self.add_pending(pod)
        self._dirty = True

    def quota_of(self, pod: PodInfo) -> str:
        """The pod's quota name ("" for none; see :meth:`QuotaTree.quota_of`)."""
        return self.tree.quota_of(pod.spec) if self.tree.nodes else ""

    # ------------------------------------------------------------------ pods

    def add_pending(self, pod: PodInfo) -> None:
        """Count a queued pod's request as its quota's pending demand (no-op for pods of no valid leaf)."""
        if not self.tree.nodes or pod.uid in self.waiting or pod.uid in self.members:
            return
        leaf = self.quota_of(pod)
        node = self.tree.nodes.get(leaf)
        if node is None or not node.leaf:
            return
        self.waiting[pod.uid] = (pod, leaf)
        chain = self.tree.chain(leaf)
        _add(self.pending, chain, pod, 1)
        for q in chain:
            self.pending_pods[q] = self.pending_pods.get(q, 0) + 1
        self._dirty = True

    def drop_pending(self, uid: str) -> None:
        """The pod left the queue without being placed (deleted, finished, another replica bound it)."""
        entry = self.waiting.pop(uid, None)
        if entry is None:
            return
        pod, leaf = entry
        chain = self.tree.chain(leaf)
        _add(self.pending, chain, pod, -1)
        for q in chain:
            self.pending_pods[q] -= 1
        self._dirty = True

    def reserve(self, pod: PodInfo, row: int, at: float) -> None:
        """Count a placed pod in its quota's used (and out of its pending)."""
        if not self.tree.nodes or pod.uid in self.members:
            return
        entry = self.waiting.pop(pod.uid, None)
        if entry is not None:  # the usual case: from the queue, its leaf known
            leaf = entry[1]
            chain = self.tree.chain(leaf)
            _add(self.pending, chain, pod, -1)
            for q in chain:
                self.pending_pods[q] -= 1
        else:
            leaf = self.quota_of(pod)
            node = self.tree.nodes.get(leaf)
            if node is None or not node.leaf:
                return
            chain = self.tree.chain(leaf)
        self.members[pod.uid] = Member(pod, row, leaf, pod.request_ints, at)
        _add(self.used, chain, pod, 1)
        pods = self.pods
        for q in chain:
            pods[q] = pods.get(q, 0) + 1
        self._dirty = True

    def unreserve(self, pod: PodInfo) -> None:
        """Undo :meth:`reserve`; the pod counts as pending again (it goes back to the queue, or its release
        drops it right after: :meth:`drop_pending`)."""
        m = self.members.pop(pod.uid, None)
        if m is None:
            return
        self.evicting.discard(pod.uid)
        chain = self.tree.chain(m.leaf)
        _add(self.used, chain, m.pod, -1)
        for q in chain:
            self.pods[q] -= 1
        self._dirty = True
        self.add_pending(pod)

    # ------------------------------------------------------------------ runtime

    def refresh(self, totals: Vector) -> bool:
        """Recompute every runtime quota from the cluster's ``totals`` (allocatable Σ per column) when any
        amount changed since the last call; True when a runtime changed."""
        if not self.tree.nodes or (not self._dirty and totals == self._totals):
            return False
        self._dirty, self._totals = False, totals
        nodes = self.tree.nodes
        before = self.runtime
        per_res: list[dict[str, int]] = []
        requests: list[dict[str, int]] = []
        for i in range(N):
            qs = []
            for name in self.tree.order:
                q = nodes[name]
                own = 0
                if q.leaf:
                    own = self.used.get(name, ZERO)[i] + self.pending.get(name, ZERO)[i]
                qs.append(TreeQuota(name, "" if q.parent not in nodes else q.parent, q.min[i], q.max[i],
                                    q.weight[i], own, q.allow_lent))
            per_res.append(tree_runtimes(totals[i], qs))
            requests.append(self._requests(i))
        self.runtime = {name: tuple(per_res[i][name] for i in range(N)) for name in nodes}
        self.request = {name: tuple(requests[i][name] for i in range(N)) for name in nodes}
        return self.runtime != before

    def _requests(self, i: int) -> dict[str, int]:
        """used + pending of column ``i`` per quota, capped at max (parents: Σ of the capped children)."""
        nodes, out = self.tree.nodes, dict[str, int]()
        for name in reversed(self.tree.order):
            q = nodes[name]
            own = (sum(out[c] for c in q.children) if q.children
                   else self.used.get(name, ZERO)[i] + self.pending.get(name, ZERO)[i])
            out[name] = min(own, q.max[i])
        return out

    def check(self, pod: PodInfo) -> str:
        """"" when the pod fits its quota and every ancestor (used + request ≤ max and ≤ runtime in every
        constrained resource it requests), else the reason naming the quota and the amounts."""
        if not self.tree.nodes:
            return ""
        entry = self.waiting.get(pod.uid)
        if entry is not None:  # queued: its (valid leaf) quota is known
            leaf = entry[1]
        else:
            leaf = self.quota_of(pod)
            if not leaf:
                return ""
            node = self.tree.nodes.get(leaf)
            if node is None:
                return f"quota {leaf}: not found"
            if not node.leaf:
                return f"quota {leaf}: has child quotas; pods belong to leaf quotas"
        req, cols, nodes = pod.request_ints, pod.request_col_ints, self.tree.nodes
        for q in self.tree.chain(leaf):
            constrained = nodes[q].constrained
            used = self.used.get(q, ZERO)
            runtime = self.runtime.get(q, ZERO)
            for c in cols:
                if not constrained[c]:
                    continue
                need = used[c] + req[c]
                qn = nodes[q]
                if need > qn.max[c]:
                    return (f"quota {q}: exceeds max quota {RESOURCE_NAMES[c]} "
                            f"(used {used[c]} + {req[c]} > max {qn.max[c]})")
                if need > runtime[c]:
                    return (f"quota {q}: insufficient runtime quota {RESOURCE_NAMES[c]} "
                            f"(used {used[c]} + {req[c]} > runtime {runtime[c]})")
        return ""

    def over_runtime(self, leaf: str) -> bool:
        """True when quota ``leaf`` or an ancestor uses more than its runtime in a constrained resource."""
        for q in self.tree.chain(leaf):
            qn, used, runtime = self.tree.nodes[q], self.used.get(q, ZERO), self.runtime.get(q, ZERO)
            if any(c and used[i] > runtime[i] for i, c in enumerate(qn.constrained)):
                return True
        return False

    # ------------------------------------------------------------------ status

    def statuses(self, now: float) -> list[QuotaStatus]:
        """A :class:`QuotaStatus` for every quota whose used, request, runtime or pod counts changed since the
        last call, or whose spec was submitted again (resources: the constrained ones; an unlimited max is left
        out; ``spec_created_at`` the ``created_at`` of the spec in force)."""
        out: list[QuotaStatus] = []
        for name in self.tree.order:
            q = self.tree.nodes[name]
            used = self.used.get(name, ZERO)
            created = q.spec.created_at if q.spec is not None else 0.0
            key = (tuple(used), self.request.get(name), self.runtime.get(name), self.pods.get(name, 0),
                   self.pending_pods.get(name, 0), q, created)  # a resubmission is answered even when unchanged
            if self._published.get(name) == key:
                continue
            self._published[name] = key
            cols = [i for i in range(N) if q.constrained[i]]
            out.append(QuotaStatus(
                name=name, parent=q.parent,
                min={RESOURCE_NAMES[i]: q.min[i] for i in cols},
                max={RESOURCE_NAMES[i]: q.max[i] for i in cols if q.max[i] < UNLIMITED},
                used={RESOURCE_NAMES[i]: used[i] for i in cols},
                request={RESOURCE_NAMES[i]: self.request.get(name, ZERO)[i] for i in cols},
                runtime={RESOURCE_NAMES[i]: self.runtime.get(name, ZERO)[i] for i in cols},
                pods=self.pods.get(name, 0), pending=self.pending_pods.get(name, 0), at=now,
                spec_created_at=created))
        for gone in set(self._published) - set(self.tree.nodes):
            del self._published[gone]
        return out

    def chain_of(self, pod: PodInfo) -> tuple[str, ...]:
        """The pod's leaf quota and its ancestors (for the store's atomic max check); () for none."""
        m = self.members.get(pod.uid)
        return self.tree.chain(m.leaf) if m is not None else ()
