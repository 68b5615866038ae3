"""``colo get workloads`` and ``colo get podgroups``: admission's records joined with the pods in the store."""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from colo.messages import GangMode, PodGroupSpec, PodRecord
from colo.workloads import WorkloadRecord


def workloads_table(records: list[WorkloadRecord], pods: list[PodRecord]) -> Table:
    """One row per admitted workload, sorted by namespace, kind and name: ``pods`` created so far, how many of
    them are ``running`` (bound: Running or Pending on a node) and ``pending`` (waiting for a node) in the
    store, ``succeeded`` (a Job's, against its completions), the ``gang`` key and the ``status``
    (Complete, Stopped: <why>, Active)."""
    phase = {p.spec.uid: (p.phase, p.node) for p in pods}
    t = Table(title=f"{len(records)} workloads")
    for col in ("namespace", "kind", "name", "pods", "running", "pending", "succeeded", "gang", "status"):
        t.add_column(col, overflow="fold")
    for r in sorted(records, key=lambda r: (r.spec.namespace, r.spec.kind, r.spec.name)):
        w = r.spec
        states = [phase.get(uid) for uid in r.pods]
        running = sum(1 for s in states if s is not None and s[0] in ("Running", "Pending") and s[1])
        pending = sum(1 for s in states if s is not None and s[0] == "Pending" and not s[1])
        succeeded = f"{r.succeeded}/{w.completions}" if w.kind == "Job" else "-"
        status = "Complete" if r.complete else f"Stopped: {r.stopped}" if r.stopped else "Active"
        t.add_row(w.namespace, w.kind, w.name, str(len(r.pods)), str(running), str(pending), succeeded,
                  r.gang.name if r.gang else "-", status)
    return t


def podgroups_table(groups: dict[str, PodGroupSpec], pods: list[PodRecord]) -> Table:
    """One row per PodGroup (admitted ones and the gangs workloads embed, as pods carry them), sorted by key:
    min member, mode, timeout (s), gang group, and its ``members`` in the store of which ``bound``."""
    members: Counter[str] = Counter()
    bound: Counter[str] = Counter()
    embedded: dict[str, tuple[int, GangMode, float, list[str]]] = {}
    for p in pods:
        g = p.spec.gang
        if g is None:
            continue
        members[g.name] += 1
        bound[g.name] += bool(p.node)
        embedded.setdefault(g.name, (g.min_member, g.mode, g.timeout_s, g.groups))
    rows = {key: (g.min_member, g.mode, g.timeout_s, g.groups) for key, g in groups.items()}
    for key, row in embedded.items():
        rows.setdefault(key, row)
    t = Table(title=f"{len(rows)} pod groups")
    for col in ("pod group", "min", "mode", "timeout s", "groups", "members", "bound"):
        t.add_column(col, overflow="fold")
    for key in sorted(rows):
        min_member, mode, timeout_s, gang_groups = rows[key]
        t.add_row(key, str(min_member), mode, f"{timeout_s:g}", ", ".join(gang_groups) or "-", str(members[key]),
                  str(bound[key]))
    return t


