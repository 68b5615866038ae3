"""The runtime quota calculator (REFERENCE.md §8; Koordinator
``pkg/scheduler/plugins/elasticquota/core/runtime_quota_calculator.go``): how much of a parent's amount
of one resource each child quota may use now.

Pure integer arithmetic on one resource at a time (milli-cores, bytes or a count). Among siblings, a quota
whose request is at most its min gets its request when it lends (``allow_lent``), else its min; every other
quota starts at its min, and the leftover is shared among them in proportion to their shared weights by
largest-remainder rounding (ties by name), each capped at its request; what a capped quota does not need
goes round again until the leftover is gone or no quota with weight wants more. Requests are capped at max
first. Over a tree the parent's runtime is what its children share (:func:`tree_runtimes`).

Guarantees (tests/scheduler/test_quota_runtime.py, hypothesis): every runtime ≤ max, ≤ request when the
quota lends, ≥ min whenever Σ min ≤ the total (no quota is ever rounded below its min: shares of the
leftover only add), and Σ runtimes ≤ the total. When Σ min exceeds the total (the cluster shrank below the
guarantees), the total is split in proportion to each quota's starting amount, again by largest remainder,
so that the sum still fits (the reference lets the sum exceed the total there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

UNLIMITED = 1 << 62
"""A max that no request reaches (an absent max in :class:`colo.messages.ElasticQuota`)."""


@dataclass(frozen=True, slots=True)
class Demand:
    """One quota among its siblings for one resource: ``min``, ``max``, shared ``weight`` (≥ 0), the
    ``request`` (used + pending demand, any unit) and whether it lends its idle min (``allow_lent``)."""

    name: str
    min: int
    max: int
    weight: int
    request: int
    allow_lent: bool = True


def largest_remainder(total: int, weights: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Split ``total`` (≥ 0) among named weights (≥ 0) in proportion: floor(total × w / Σ w) each, then one
    more to the largest remainders, ties by name (Hamilton's method). Σ result = total when Σ w > 0; all 0
    otherwise. A weight of 0 never receives anything."""
    wsum = sum(w for _, w in weights)
    if wsum <= 0 or total <= 0:
        return {name: 0 for name, _ in weights}
    out: dict[str, int] = {}
    rema: list[tuple[int, str]] = []
    for name, w in weights:
        q, r = divmod(total * w, wsum)
        out[name] = q
        rema.append((-r, name))
    left = total - sum(out.values())
    rema.sort()
    for _, name in rema[:left]:
        out[name] += 1
    return out


def sibling_runtimes(total: int, quotas: Sequence[Demand]) -> dict[str, int]:
    """Runtime of each of ``quotas`` (siblings) sharing ``total`` of one resource (REFERENCE.md §8, oracle
    O15): name → runtime. Requires min ≤ max (the tree's validation); ``total`` ≥ 0."""
    runtime: dict[str, int] = {}
    request: dict[str, int] = {}
    weight: dict[str, int] = {}
    adjust: list[str] = []
    for q in sorted(quotas, key=lambda q: q.name):
        req = min(max(q.request, 0), q.max)
        request[q.name], weight[q.name] = req, max(q.weight, 0)
        if req > q.min:
            runtime[q.name] = q.min
            adjust.append(q.name)
        else:
            runtime[q.name] = req if q.allow_lent else q.min
    base = sum(runtime.values())
    if base > total:  # the guarantees do not fit: share the total by what each would start with
        return largest_remainder(max(total, 0), list(runtime.items()))
    left = total - base
    while left > 0 and adjust:
        shares = largest_remainder(left, [(n, weight[n]) for n in adjust])
        if not any(shares.values()):
            break  # only quotas of weight 0 want more
        left = 0
        still: list[str] = []
        for n in adjust:
            r = runtime[n] + shares[n]
            if r >= request[n]:
                left += r - request[n]
                r = request[n]
            else:
                still.append(n)
            runtime[n] = r
        adjust = still
    return runtime


@dataclass(frozen=True, slots=True)
class TreeQuota:
    """One quota of a tree for one resource: its ``parent`` ("" for a child of the root), ``min``, ``max``,
    ``weight``, ``allow_lent`` and, for a leaf, its own ``request`` (a parent's request is Σ of its
    children's requests, each capped at its max, then capped at its own max)."""

    name: str
    parent: str
    min: int
    max: int
    weight: int
    request: int = 0
    allow_lent: bool = True


def tree_runtimes(total: int, quotas: Sequence[TreeQuota]) -> dict[str, int]:
    """Runtime of every quota of a tree for one resource: the root's children share ``total``, every
    other quota's children share their parent's runtime (:func:`sibling_runtimes`). ``quotas`` must form a
    tree (every parent listed or "", no cycles: :mod:`.tree` validates); name → runtime."""
    children: dict[str, list[TreeQuota]] = {}
    for q in quotas:
        children.setdefault(q.parent, []).append(q)
    requests: dict[str, int] = {}
    # children before parents, without recursion: a tree may be deeper than Python's recursion limit
    order: list[TreeQuota] = []
    stack = list(children.get("", []))
    while stack:
        q = stack.pop()
        order.append(q)
        stack.extend(children.get(q.name, ()))
    for q in reversed(order):
        kids = children.get(q.name)
        own = sum(requests[k.name] for k in kids) if kids else q.request
        requests[q.name] = min(max(own, 0), q.max)
    out: dict[str, int] = {}
    todo: list[tuple[str, int]] = [("", total)]
    while todo:
        parent, amount = todo.pop()
        kids = children.get(parent, [])
        got = sibling_runtimes(amount, [Demand(k.name, k.min, k.max, k.weight, requests[k.name], k.allow_lent)
                                        for k in kids])
        out.update(got)
        todo.extend((k.name, got[k.name]) for k in kids if k.name in children)
    return out


def runtimes_by_resource(totals: Mapping[str, int], quotas: Mapping[str, Sequence[TreeQuota]]
                         ) -> dict[str, dict[str, int]]:
    """:func:`tree_runtimes` per resource: resource → quota → runtime, for the resources of ``quotas``."""
    return {res: tree_runtimes(totals.get(res, 0), qs) for res, qs in quotas.items()}
