"""The scheduler service's introspection: :meth:`SchedulerIntrospection.debug` (the runtime's ``/debug``) and
the route ``GET /debug/pods/{uid}/decision`` (a pod's recorded decision, or a dry run). Part of
:class:`colo_scheduler.service.SchedulerService`, which sets the state below at construction, registers the
route at start and provides ``_now``.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from colo_scheduler.core import Scheduler
from colo_scheduler.heap import HeapFreezer
from colo_scheduler.lease import LeaderElector
from colo_scheduler.replicas import Replica
from colo_scheduler.reservations_intake import ReservationIntake
from colo_scheduler.settings import SchedulerSettings

LIVE_VALUES = frozenset({"1", "true", "yes", "on"})
"""Values of ``?live=`` that ask for a dry run (any other value, ``0`` or ``false`` say, asks for the record)."""


class SchedulerIntrospection:
    """The debug part of :class:`colo_scheduler.service.SchedulerService`."""

    settings: SchedulerSettings
    core: Scheduler
    elector: LeaderElector | None
    totals: dict[str, int]
    replica: Replica
    heap: HeapFreezer
    reservation_intake: ReservationIntake
    _now: Callable[[], float]

    def debug(self) -> dict[str, object]:
        """Queue sizes, node count (``retired_nodes``: rows of deleted nodes, not counted), totals, the reasons
        of up to 50 unschedulable pods, this replica (``index``, ``replicas``, ``instance``), ``leader``: whether
        it schedules, and with leader election the lease, holder, fencing token, transitions and election time,
        ``heap``: :meth:`colo_scheduler.heap.HeapFreezer.stats`, and ``reservations``:
        :meth:`colo_scheduler.reservations_intake.ReservationIntake.status`."""
        unsched = list(self.core.queue.unschedulable.values())[:50]
        leader: dict[str, object] = ({"leader": True, "election": False} if self.elector is None
                                     else {**self.elector.status(), "election": True})
        return {
            "queue": self.core.queue.lengths(),
            "nodes": self.core.table.n - len(self.core.table.retired),
            "retired_nodes": len(self.core.table.retired),
            "placed": len(self.core.framework.placed),
            "totals": dict(self.totals),
            "unschedulable": {u.pod.uid: u.reasons for u in unsched},
            "replica": {"index": self.replica.index, "replicas": self.replica.replicas,
                        "instance": self.replica.instance},
            "leader": leader,
            "heap": self.heap.stats(),
            "reservations": self.reservation_intake.status(),
        }

    async def _decision_route(self, request: web.Request) -> web.Response:
        """The pod's recorded decision (``?live=1``, also ``true``/``yes``/``on``: a dry run now, for a
        queued pod) as JSON; 404 naming what is known when there is none."""
        uid = request.match_info["uid"]
        names = self.core.table.names
        live = request.query.get("live", "").strip().lower() in LIVE_VALUES
        rec = None if live else self.core.decision(uid)
        source = "recorded"
        if rec is None:
            rec = self.core.explain(uid, self._now())
            source = "dry-run"
        if rec is None:
            placed = self.core.framework.placed.get(uid)
            if placed is not None:
                where = f"placed on {names[placed[1]]}"
                if live:  # only a queued pod has a dry run; its record is another question
                    recorded = "; ask without ?live=1 for its recorded decision" if self.core.decision(uid) else ""
                    return web.json_response({"error": f"pod {uid} is {where}: a dry run (?live=1) needs a "
                                              f"queued pod{recorded}"}, status=404)
            else:
                where = "unknown to this scheduler"
            return web.json_response({"error": f"no decision recorded for pod {uid} ({where}); records keep "
                                      f"the last {self.settings.decision_records} pods"}, status=404)
        body = rec.to_json(names)
        body["source"] = source
        return web.json_response(body)
