"""The invariants the chaos soak checks after every tick (docs/operations.md "Chaos soak").

- **No pod bound on two nodes**, in the store (a uid in the pod sets of two nodes) and on the bus (a
  ``PodBound`` naming another node than the pod's previous one with no release in between, counted in
  stream order so the order in which bind and status consumers run does not matter).
- **No node over-committed**: the store's allocations against allocatable and the batch/mid offers
  (:class:`colo.sim.invariants.AllocationWatch`).
- **No pod lost**: every submitted pod is in the store in some state, or rejected by admission (a visible
  reason). A pod may be missing for a moment while its admission is being redelivered after a kill; one
  missing at the end, after the last settle, is lost (its dead letter's reason is kept when there is one).
- **No bind unannounced**: a pod in a node's pod set of the store has had a ``PodBound`` (else its node agent
  never starts it: a bind whose reply was lost, retried, and refused as "already bound to" its own node).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from colo.messages import DeadLetter, PodBound, PodUnschedulable
from colo.sim.invariants import AllocationWatch
from colo.sim.metrics import RunMetrics
from colo.store import Store


def _text(raw: object) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


@dataclass
class ChaosMetrics(RunMetrics):
    """:class:`RunMetrics` that also keeps, per pod, the nodes of its ``PodBound`` messages in stream order
    and the wall time (``time.monotonic()``) each arrived."""

    bind_nodes: dict[str, list[str]] = field(default_factory=dict)
    published_wall: dict[str, float] = field(default_factory=dict)
    """uid of a pod or workload → when the coordinator published it (``time.monotonic()``)."""
    first_bound_wall: dict[str, float] = field(default_factory=dict)
    """uid → when its first ``PodBound`` arrived (``time.monotonic()``)."""
    waited_for_room: set[str] = field(default_factory=set)
    """Pods reported unschedulable at least once before their first bind."""

    def on_bound(self, msg: PodBound) -> None:
        """Record the bind's node and arrival time, then as :meth:`RunMetrics.on_bound`."""
        self.bind_nodes.setdefault(msg.spec.uid, []).append(msg.node)
        if msg.spec.uid not in self.first_bound_wall:
            self.first_bound_wall[msg.spec.uid] = time.monotonic()
        super().on_bound(msg)

    def on_unschedulable(self, msg: PodUnschedulable) -> None:
        """Remember the pod waited for room, then as :meth:`RunMetrics.on_unschedulable`."""
        self.waited_for_room.add(msg.uid)
        super().on_unschedulable(msg)

    def bind_delays(self) -> list[tuple[float, float, str]]:
        """(published, seconds from publishing to the first ``PodBound``, uid) of every bound pod whose
        publishing (its own, or its workload's) was seen and that never waited for room (no
        ``PodUnschedulable`` before its bind: its delay is the services', not the cluster's), in publishing
        order."""
        out = []
        for uid, bound in self.first_bound_wall.items():
            at = self.published_wall.get(uid, self.published_wall.get(self.owner_of.get(uid, ""), -1.0))
            if at >= 0 and uid not in self.waited_for_room:
                out.append((at, bound - at, uid))
        return sorted(out)

    def moved_binds(self) -> dict[str, list[str]]:
        """Pods whose binds changed node more often than they were released (Failed): bound on two nodes."""
        out = {}
        for uid, nodes in self.bind_nodes.items():
            moves = sum(1 for a, b in zip(nodes, nodes[1:]) if a != b)
            if moves > self.releases.get(uid, 0):
                out[uid] = nodes
        return out

    def repeated_binds(self) -> int:
        """``PodBound`` messages repeating the pod's previous node (a redelivered or retried bind; harmless)."""
        return sum(1 for nodes in self.bind_nodes.values() for a, b in zip(nodes, nodes[1:]) if a == b)


@dataclass
class ChaosChecks:
    """The per-tick checks of one soak; ``violations`` accumulates ``t=<virtual s> <what>`` messages.

    ``grace_checks`` is how many consecutive checks a submitted pod may be missing from the store before it
    is reported as missing (it is lost only when still missing at :meth:`final`).
    """

    metrics: ChaosMetrics
    watch: AllocationWatch
    grace_checks: int = 3
    violations: list[str] = field(default_factory=list)
    checks: int = 0
    missing_seen: dict[str, int] = field(default_factory=dict)
    """uid → consecutive checks it was missing from the store."""
    missing_reported: set[str] = field(default_factory=set)
    double_bound_store: set[str] = field(default_factory=set)
    unannounced_seen: dict[str, int] = field(default_factory=dict)
    """uid → checks it was bound in the store with no PodBound seen."""
    unannounced: set[str] = field(default_factory=set)
    over_commits: int = 0
    dead_letters: list[DeadLetter] = field(default_factory=list)

    async def on_dead_letter(self, msg: DeadLetter) -> None:
        """A ``dlq.<service>`` message: kept for the summary and for the reasons of lost pods."""
        self.dead_letters.append(msg)

    async def check(self, store: Store, now: float) -> list[str]:
        """Every invariant against the store at virtual time ``now``; returns the new violations. Raises
        redis errors as the store does (the caller retries while Redis fails over)."""
        new = [v for v in await self.watch.check(store, now)]
        self.over_commits += len(new)
        bound = await self._store_binds(store)
        for uid in sorted(set(bound) - set(self.metrics.bind_nodes)):
            self.unannounced_seen[uid] = self.unannounced_seen.get(uid, 0) + 1
            if self.unannounced_seen[uid] == self.grace_checks:
                self.unannounced.add(uid)
                new.append(f"t={now:.0f}s pod {uid} bound on {sorted(bound[uid])} in the store, never announced")
        for uid, nodes in sorted((u, n) for u, n in bound.items() if len(n) > 1):
            if uid not in self.double_bound_store:
                self.double_bound_store.add(uid)
                new.append(f"t={now:.0f}s pod {uid} in the pod sets of {sorted(nodes)}")
        stored = {_text(u) for u in await store.redis.smembers(store.keys.pods)}
        missing = set(self.metrics.submitted_at) - set(self.metrics.rejected) - stored
        self.missing_seen = {uid: self.missing_seen.get(uid, 0) + 1 for uid in missing}
        for uid in sorted(missing):
            if self.missing_seen[uid] >= self.grace_checks and uid not in self.missing_reported:
                self.missing_reported.add(uid)
                new.append(f"t={now:.0f}s pod {uid} missing from the store for {self.grace_checks} ticks")
        self.checks += 1
        self.violations.extend(new)
        return new

    async def _store_binds(self, store: Store) -> dict[str, set[str]]:
        """uid → the nodes whose pod set (``node_pods``) holds it."""
        names = sorted(_text(n) for n in await store.redis.smembers(store.keys.nodes))
        if not names:
            return {}
        pipe = store.redis.pipeline(transaction=False)
        for n in names:
            pipe.smembers(store.keys.node_pods(n))
        seen: dict[str, set[str]] = {}
        for name, uids in zip(names, await pipe.execute()):
            for uid in uids:
                seen.setdefault(_text(uid), set()).add(name)
        return seen

    async def final(self, store: Store) -> dict[str, str]:
        """The lost pods at the end (services settled): uid → the reason a dead letter gave, else ``""``."""
        stored = {_text(u) for u in await store.redis.smembers(store.keys.pods)}
        lost = sorted(set(self.metrics.submitted_at) - set(self.metrics.rejected) - stored)
        reasons = {}
        for uid in lost:
            dl = next((d for d in self.dead_letters if uid in d.data), None)
            reasons[uid] = f"dead-lettered by {dl.service} ({dl.subject}): {dl.reason}" if dl else ""
        return reasons
