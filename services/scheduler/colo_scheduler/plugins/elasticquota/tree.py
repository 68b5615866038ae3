"""The elastic quota tree built from :class:`colo.messages.ElasticQuota` messages: validation and the
pod → leaf quota lookup (REFERENCE.md §8; Koordinator ``ElasticQuota`` / ``quota.scheduling.koordinator.sh``).

Amounts are vectors in :data:`colo.messages.RESOURCE_NAMES` order (milli-cores, bytes, a pod count). A
quota *constrains* the resources named in its ``min`` or ``max``; an absent max is unlimited
(:data:`.runtime.UNLIMITED`), an absent min 0, an absent shared weight the max (the min when max is
unlimited; Koordinator's default weight is the max).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from colo.messages import QUOTA_NAME_LABEL, RESOURCE_NAMES, ROOT_QUOTA, ElasticQuota, PodSpec
from colo_scheduler.plugins.elasticquota.runtime import UNLIMITED

Vector = tuple[int, ...]
"""One amount per :data:`RESOURCE_NAMES` column."""

ZERO: Vector = (0,) * len(RESOURCE_NAMES)


class QuotaTreeError(ValueError):
    """An invalid set of quotas; ``problems`` lists every one (``quota <name>: <field path>: <problem>``)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid elastic quotas: " + "; ".join(problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class QuotaNode:
    """A validated quota: ``parent`` (:data:`ROOT_QUOTA` for a child of the root), vectors ``min``, ``max``,
    ``weight``, ``constrained`` (bool per column), its selectors and ``children`` (names, sorted)."""

    name: str
    parent: str
    min: Vector
    max: Vector
    weight: Vector
    constrained: tuple[bool, ...]
    allow_lent: bool
    namespaces: tuple[str, ...]
    match_labels: tuple[tuple[str, str], ...]
    children: tuple[str, ...] = ()
    spec: ElasticQuota | None = field(default=None, compare=False)

    @property
    def leaf(self) -> bool:
        """True for a quota without children (the only kind pods belong to)."""
        return not self.children


def _vector(name: str, key: str, values: Mapping[str, int], default: Vector, problems: list[str]) -> Vector:
    out = list(default)
    for res, v in values.items():
        if res not in RESOURCE_NAMES:
            problems.append(f"quota {name}: {key}.{res}: unknown resource (one of {', '.join(RESOURCE_NAMES)})")
        elif not isinstance(v, int) or v < 0:
            problems.append(f"quota {name}: {key}.{res}: must be an integer >= 0, got {v!r}")
        else:
            out[RESOURCE_NAMES.index(res)] = v
    return tuple(out)


def _node(q: ElasticQuota, problems: list[str]) -> QuotaNode:
    n = q.name
    mn = _vector(n, "min", q.min, ZERO, problems)
    mx = _vector(n, "max", q.max, (UNLIMITED,) * len(RESOURCE_NAMES), problems)
    default_w = tuple(m if m < UNLIMITED else lo for m, lo in zip(mx, mn))
    w = _vector(n, "shared_weight", q.shared_weight, default_w, problems)
    for i, res in enumerate(RESOURCE_NAMES):
        if mn[i] > mx[i]:
            problems.append(f"quota {n}: min.{res}: {mn[i]} exceeds max.{res} {mx[i]}")
    constrained = tuple(res in q.min or res in q.max for res in RESOURCE_NAMES)
    parent = q.parent or ROOT_QUOTA
    return QuotaNode(n, parent, mn, mx, w, constrained, q.allow_lent, tuple(q.namespaces),
                     tuple(sorted(q.match_labels.items())), spec=q)


class QuotaTree:
    """A validated quota tree; build with :meth:`build` (raises :class:`QuotaTreeError`).

    ``nodes`` name → :class:`QuotaNode`; ``order`` names parents before children; ``chain(name)`` the
    quota and its ancestors (leaf first, the root left out)."""

    def __init__(self, nodes: dict[str, QuotaNode]) -> None:
        self.nodes = nodes
        self.order: list[str] = []
        todo = sorted(n for n, q in nodes.items() if q.parent == ROOT_QUOTA)
        while todo:
            name = todo.pop(0)
            self.order.append(name)
            todo.extend(nodes[name].children)
        self._chains: dict[str, tuple[str, ...]] = {}
        for name in self.order:
            p = nodes[name].parent
            self._chains[name] = (name,) + (self._chains[p] if p != ROOT_QUOTA else ())
        self._by_namespace = {ns: q.name for q in nodes.values() if q.leaf for ns in q.namespaces}
        self._by_labels = sorted(((q.match_labels, q.name) for q in nodes.values() if q.leaf and q.match_labels),
                                 key=lambda t: (-len(t[0]), t[1]))

    @staticmethod
    def problems(specs: Iterable[ElasticQuota]) -> list[str]:
        """Every problem of ``specs`` as one tree (empty when valid): names, resources and amounts, min ≤ max,
        parents that exist, no cycles, Σ children's min ≤ the parent's min, selectors only on leaves, one
        leaf per namespace."""
        try:
            QuotaTree.build(specs)
        except QuotaTreeError as exc:
            return exc.problems
        return []

    @classmethod
    def build(cls, specs: Iterable[ElasticQuota]) -> QuotaTree:
        """The tree of ``specs`` (deleted ones left out); raises :class:`QuotaTreeError` listing every problem.
        A namespace selected by two quotas is reported on the later one of ``specs`` (the one refused)."""
        problems: list[str] = []
        nodes: dict[str, QuotaNode] = {}
        for spec in specs:
            if spec.deleted:
                continue
            if not spec.name or spec.name == ROOT_QUOTA:
                problems.append(f"quota {spec.name!r}: name: must be non-empty and not {ROOT_QUOTA!r}")
                continue
            if spec.name in nodes:
                problems.append(f"quota {spec.name}: name: given twice")
                continue
            nodes[spec.name] = _node(spec, problems)
        for q in nodes.values():
            if q.parent != ROOT_QUOTA and q.parent not in nodes:
                problems.append(f"quota {q.name}: parent: quota {q.parent!r} not found")
        rooted: set[str] = set()  # quotas whose chain reaches the root: each walk stops at one (O(n) in all)
        for q in nodes.values():  # cycles: walk up at most len(nodes) steps
            seen, path, p = {q.name}, [q.name], q.parent
            while p in nodes and p not in rooted:
                if p in seen:
                    problems.append(f"quota {q.name}: parent: cycle through {p!r}")
                    break
                seen.add(p)
                path.append(p)
                p = nodes[p].parent
            else:
                rooted.update(path)
        if problems:
            raise QuotaTreeError(problems)
        kids: dict[str, list[str]] = {}
        for q in nodes.values():
            kids.setdefault(q.parent, []).append(q.name)
        for parent, names in kids.items():
            if parent == ROOT_QUOTA:
                continue
            pq = nodes[parent]
            for i, res in enumerate(RESOURCE_NAMES):
                total = sum(nodes[c].min[i] for c in names)
                if total > pq.min[i]:
                    problems.append(f"quota {parent}: min.{res}: {pq.min[i]} is less than its children's "
                                    f"Σ min {total} ({', '.join(sorted(names))})")
            if pq.namespaces or pq.match_labels:
                problems.append(f"quota {parent}: namespaces/match_labels: a quota with children selects no pods")
        owner: dict[str, str] = {}
        for q in nodes.values():  # in the order given: a quota in force owns its namespaces before a newcomer
            for ns in dict.fromkeys(q.namespaces):  # a namespace listed twice is one selection, one problem
                if ns in owner and owner[ns] != q.name:
                    problems.append(f"quota {q.name}: namespaces: {ns!r} is already selected by quota {owner[ns]}")
                owner.setdefault(ns, q.name)
        if problems:
            raise QuotaTreeError(problems)
        done = {n: QuotaNode(q.name, q.parent, q.min, q.max, q.weight, q.constrained, q.allow_lent, q.namespaces,
                             q.match_labels, tuple(sorted(kids.get(n, []))), q.spec) for n, q in nodes.items()}
        return cls(done)

    def chain(self, name: str) -> tuple[str, ...]:
        """``name`` and its ancestors, leaf first (the root left out); () for an unknown quota."""
        return self._chains.get(name, ())

    def quota_of(self, spec: PodSpec) -> str:
        """The quota a pod belongs to: its :data:`QUOTA_NAME_LABEL` label (as given: it may name an unknown
        or non-leaf quota, which the plugin refuses), else the leaf whose ``match_labels`` all match (most
        labels first, ties by name), else the leaf selecting its namespace; "" for none."""
        named = spec.labels.get(QUOTA_NAME_LABEL)
        if named:
            return named
        labels = spec.labels
        for sel, name in self._by_labels:
            if all(labels.get(k) == v for k, v in sel):
                return name
        return self._by_namespace.get(spec.namespace, "")
