"""Migration limits over time windows: per source node, namespace, workload and cluster-wide.

The reference's object limiters (Koordinator's migration controller ``objectLimiters``: at most M migrations of
one workload within a duration, default 5 min) generalised to the four scopes. A migration counts in a scope's
window from its start while it runs and until ``window_s`` after it finished, so a limit holds across rounds,
not only within one. :meth:`MigrationLimiter.refuse` answers for one candidate (plus evictions already
planned in the current round); :meth:`MigrationLimiter.record` / :meth:`MigrationLimiter.finish` keep the
history. Defaults and their sources are on :class:`colo_descheduler.settings.DeschedulerSettings`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from colo_descheduler.settings import DeschedulerSettings, WindowLimit


@dataclass(frozen=True)
class LimitKey:
    """What a limit counts a migration by: its source node, namespace and workload (``namespace/app``, "")."""

    node: str
    namespace: str
    workload: str


@dataclass
class LimitEntry:
    """One migration in the history: its key, start and (once known) finish time, seconds."""

    key: LimitKey
    started_at: float
    finished_at: float | None = None

    def counts(self, now: float, window_s: float) -> bool:
        """Running, or finished less than ``window_s`` before ``now``."""
        return self.finished_at is None or self.finished_at > now - window_s


class MigrationLimiter:
    """Counts migrations per scope over each scope's window; see the module docstring.

    ``max_unavailable`` maps a workload's replica count to its limit (REFERENCE.md §6's max unavailable).
    """

    def __init__(self, settings: DeschedulerSettings, max_unavailable: Callable[[int], int]) -> None:
        self.settings = settings
        self.max_unavailable = max_unavailable
        self.entries: dict[tuple[str, int], LimitEntry] = {}
        """(pod uid, its n-th migration) → entry: a pod migrated again within a window counts again (an
        evicted pod comes back with its uid)."""
        self._seq: dict[str, int] = {}
        """Pod uid → the n of its latest entry."""
        self.pod_history: dict[str, list[LimitEntry]] = {}
        """uid → every migration of that pod still inside ``pod_window_limit``."""

    def record(self, uid: str, key: LimitKey, now: float) -> None:
        """A migration of pod ``uid`` started at ``now``. While the pod's latest migration still runs this
        replaces it (the same migration booked again, e.g. a resumed job); after it finished it is a new one."""
        n = self._seq.get(uid, 0)
        latest = self.entries.get((uid, n))
        if latest is not None and latest.finished_at is not None:
            n += 1
            latest = None
        self._seq[uid] = n
        entry = self.entries[(uid, n)] = LimitEntry(key, now)
        history = self.pod_history.setdefault(uid, [])
        same = [i for i, e in enumerate(history) if e is latest]
        if same:
            history[same[0]] = entry
        else:
            history.append(entry)

    def finish(self, uid: str, now: float) -> None:
        """The migration of ``uid`` ended at ``now`` (its window starts counting down)."""
        entry = self.entries.get((uid, self._seq.get(uid, 0)))
        if entry is not None and entry.finished_at is None:
            entry.finished_at = now

    def prune(self, now: float) -> None:
        """Forget finished migrations outside every window."""
        longest = max(self.settings.node_window_limit.window_s, self.settings.namespace_window_limit.window_s,
                      self.settings.global_window_limit.window_s, self.settings.workload_window_s)
        for k in [k for k, e in self.entries.items() if not e.counts(now, longest)]:
            del self.entries[k]
            if self._seq.get(k[0]) == k[1]:
                del self._seq[k[0]]
        window = self.settings.pod_window_limit.window_s
        for uid in list(self.pod_history):
            kept = [e for e in self.pod_history[uid] if e.counts(now, window)]
            if kept:
                self.pod_history[uid] = kept
            else:
                del self.pod_history[uid]

    def refuse(self, key: LimitKey, now: float, replicas: Mapping[str, int] | None = None,
               planned: Sequence[LimitKey] = ()) -> str:
        """Why a migration of ``key`` may not start at ``now`` ("" when it may).

        ``replicas`` gives the workload's known replicas (for its limit); ``planned`` are migrations decided
        in this round but not recorded yet (they count as running).
        """
        s = self.settings
        scopes: list[tuple[str, WindowLimit, Callable[[LimitKey], bool]]] = [
            (f"node {key.node}", s.node_window_limit, lambda k: k.node == key.node),
            (f"namespace {key.namespace}", s.namespace_window_limit, lambda k: k.namespace == key.namespace),
            ("cluster", s.global_window_limit, lambda k: True),
        ]
        if key.workload and s.workload_window_s > 0:
            allowed = self.max_unavailable((replicas or {}).get(key.workload, 1))
            scopes.append((f"workload {key.workload}", WindowLimit(max_migrations=allowed,
                                                                    window_s=s.workload_window_s),
                           lambda k: k.workload == key.workload))
        for name, limit, match in scopes:
            if limit.max_migrations <= 0:
                continue
            n = sum(1 for e in self.entries.values() if match(e.key) and e.counts(now, limit.window_s))
            n += sum(1 for k in planned if match(k))
            if n >= limit.max_migrations:
                return f"{name} had {n} migrations within {limit.window_s:g} s (limit {limit.max_migrations})"
        return ""

    def refuse_pod(self, uid: str, now: float) -> str:
        """Why pod ``uid`` may not be migrated again at ``now`` by ``pod_window_limit`` ("" when it may)."""
        limit = self.settings.pod_window_limit
        if limit.max_migrations <= 0:
            return ""
        n = sum(1 for e in self.pod_history.get(uid, ()) if e.counts(now, limit.window_s))
        if n >= limit.max_migrations:
            return f"pod {uid} had {n} migrations within {limit.window_s:g} s (limit {limit.max_migrations})"
        return ""
