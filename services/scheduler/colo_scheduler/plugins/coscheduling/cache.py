"""The gang cache of :mod:`.plugin`: per gang, the members seen, the ones reserved (waiting at
Permit, allowed or bound) and the state of the current attempt (Koordinator's PodGroup cache)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from colo.messages import GangSpec


@dataclass(slots=True)
class Gang:
    """One gang ``name`` (``namespace/name``) as its members describe it (``spec``: the latest seen).

    ``members`` every member uid seen (queued or reserved) until it leaves the queue for good;
    ``placed`` the members reserved on a node (waiting at Permit, allowed, or bound); ``waiting``
    those held at Permit; ``batch`` the members in the batch of cycle ``batch_cycle``;
    ``deadline`` the clock time (seconds) at which the current attempt's waiting members are released
    (first member waiting + ``spec.timeout_s``; ``inf`` while none waits); ``sent_back_cycle`` the
    cycle in which a Strict failure sent the gang back (with ``sent_back_reason``); ``short_cycle``
    the cycle in which it had fewer than ``min_member`` members.
    """

    name: str
    spec: GangSpec
    members: set[str] = field(default_factory=set)
    placed: set[str] = field(default_factory=set)
    waiting: set[str] = field(default_factory=set)
    batch: set[str] = field(default_factory=set)
    batch_cycle: int = -1
    deadline: float = math.inf
    sent_back_cycle: int = -1
    sent_back_reason: str = ""
    short_cycle: int = -1

    def known(self, cycle: int) -> int:
        """Members that could be placed in cycle ``cycle``: reserved ones plus those in its batch
        (a member in the batch is never reserved)."""
        return len(self.placed) + (len(self.batch) if self.batch_cycle == cycle else 0)

    @property
    def satisfied(self) -> bool:
        """At least ``min_member`` members are reserved."""
        return len(self.placed) >= self.spec.min_member


def group_of(spec: GangSpec) -> tuple[str, ...]:
    """The gang keys that must be satisfied together with ``spec``'s gang, sorted (itself included)."""
    if not spec.groups:
        return (spec.name,)
    return tuple(sorted({spec.name, *spec.groups}))


def group_key(spec: GangSpec) -> str:
    """One name for a gang's group: the gang's key alone, or the sorted keys joined by ``+``
    (the group a bind of all its members goes by)."""
    return "+".join(group_of(spec))


class GangCache:
    """Gangs by key, created when a member is first seen; a gang with no members left is dropped."""

    def __init__(self) -> None:
        self.gangs: dict[str, Gang] = {}
        self.named_by: dict[str, set[str]] = {}
        """Gang key → the known gangs whose group names it (the reverse of ``spec.groups``)."""

    def get(self, spec: GangSpec) -> Gang:
        """The gang of ``spec`` (created on first sight; its spec refreshed)."""
        g = self.gangs.get(spec.name)
        if g is None:
            g = self.gangs[spec.name] = Gang(spec.name, spec)
            self._name(spec)
        elif g.spec is not spec:
            if g.spec.groups != spec.groups:
                self._unname(g.spec)
                self._name(spec)
            g.spec = spec
        return g

    def _name(self, spec: GangSpec) -> None:
        for k in spec.groups:
            if k != spec.name:
                self.named_by.setdefault(k, set()).add(spec.name)

    def _unname(self, spec: GangSpec) -> None:
        for k in spec.groups:
            names = self.named_by.get(k)
            if names is not None:
                names.discard(spec.name)
                if not names:
                    del self.named_by[k]

    def group_keys(self, spec: GangSpec) -> tuple[str, ...]:
        """The keys of ``spec``'s whole gang group, sorted: every gang connected to it by a group one of them
        names (:func:`group_of` closed both ways over the known gangs). Gangs that name one another
        asymmetrically or in a cycle (``a`` names ``b``, ``b`` names ``c``) are one group: ``a``'s Permit must
        not let ``b`` bind while ``b`` waits for ``c``, nor ``b`` bind with ``c`` while ``a`` waits for ``b``."""
        keys = group_of(spec)
        if len(keys) == 1 and spec.name not in self.named_by:
            return keys
        seen = set(keys)
        todo = list(keys)
        while todo:
            k = todo.pop()
            g = self.gangs.get(k)
            for other in (*(g.spec.groups if g is not None else ()), *self.named_by.get(k, ())):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return keys if len(seen) == len(keys) else tuple(sorted(seen))

    def group(self, spec: GangSpec) -> list[Gang | None]:
        """The gangs of ``spec``'s whole group (:meth:`group_keys`; None for a key no member has shown yet)."""
        return [self.gangs.get(k) for k in self.group_keys(spec)]

    def drop_if_empty(self, g: Gang) -> None:
        """Forget ``g`` once it has no member left."""
        if not g.members and not g.placed and self.gangs.get(g.name) is g:
            del self.gangs[g.name]
            self._unname(g.spec)
