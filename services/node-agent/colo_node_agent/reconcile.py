"""Reconciliation: make the store agree with what this agent's nodes really run (docs/operations.md "Recovery").

The node agent is the one service that *knows* what runs on its nodes, as the kubelet is in Kubernetes; the
store only records what was decided. After a store loss (an empty Redis) or a rollback (an AOF cut back by
``appendfsync everysec``, a restored snapshot) the two disagree. Every ``reconcile_interval_s`` the agent
compares them, node by node, and fixes each difference, one kind each (counted in
``colo_reconcile_fixes_total{kind}``, logged one by one at INFO and per pass at WARNING):

* ``node_registered``: a node of ours is missing from the store (without it every bind there is refused
  "unknown node"): its NodeSpec is stored again and ``node.registered`` published, as at start;
* ``binding_restored``: a pod runs here with no binding: the binding, the node's allocation and the pod's
  record are written back (:meth:`colo.store.Store.restore_binding`), so the pod is never bound a second time
  and the node is not seen emptier than it is;
* ``ended_stopped``: a pod runs here with no binding but the store records it as ended (``Succeeded``/``Failed``:
  released, e.g. by ``colo delete node --force`` before the eviction order reached this agent): it is stopped,
  without a status event (the store has its end), never bound again;
* ``duplicate_stopped``: a pod runs here but the store binds it to another node (it was bound again while
  running here, after a rollback): the store's binding is the one its allocation counts, so the copy here is
  stopped, without a status event (the pod lives on, elsewhere);
* ``allocation_released``: the store binds a pod here that does not run here, for ``reconcile_grace_s`` or
  more (since its bind, or since its end here was reported). A pod that ended here (its release was lost) is released with
  its end phase and reason and its status published again; any other is released as ``Failed``/``Evicted`` (the node lost it) and its status
  published, so the scheduler requeues it, as a ReplicaSet replaces a pod its node lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from colo import subjects, telemetry
from colo.messages import NodeSpec, PodPhase, PodRecord, PodSpec, PodStatus
from colo.store import Store
from colo.store_restore import ENDED
from colo_node_agent.backends.base import NodeBackend, PodEnd

log = logging.getLogger("colo.node-agent")

FIX_KINDS = ("node_registered", "binding_restored", "ended_stopped", "duplicate_stopped", "allocation_released")
"""The ``kind`` label values of ``colo_reconcile_fixes_total``."""

_FIXES = telemetry.counter("colo_reconcile_fixes_total", "Differences between the store and what the nodes run, "
                           "fixed by the node agent's reconciliation", ("kind",))

Item = tuple[Any, Any, str | None, dict[str, str]]
StatusItem = Callable[[PodSpec, str, str, str, str, float], Item]
Problems = Callable[[PodSpec], list[str]]


@dataclass
class Outcome:
    """What one pass did: ``fixes`` per kind, ``items`` to publish, ``stopped`` copies ended here (to remember,
    not to publish)."""

    fixes: dict[str, int] = field(default_factory=dict)
    items: list[Item] = field(default_factory=list)
    stopped: list[PodEnd] = field(default_factory=list)

    def count(self, kind: str, what: str) -> None:
        self.fixes[kind] = self.fixes.get(kind, 0) + 1
        _FIXES.labels(kind=kind).inc()
        log.info("reconcile %s: %s", kind, what)


async def reconcile(store: Store, backend: NodeBackend, nodes: Mapping[str, NodeSpec], now: float, *,
                    bound_at: Mapping[str, float], ended: Mapping[str, tuple[PodEnd, float]], grace_s: float,
                    status_item: StatusItem, problems: Problems) -> Outcome:
    """One pass over ``nodes`` (name → the NodeSpec registered at start) at clock ``now`` (seconds).

    ``bound_at``: bind time of each pod running here; ``ended``: the last end of pods that ended here (uid →
    PodEnd and the clock time its status was published: a pod may end between two ticks, its status goes out at
    the tick); ``status_item`` builds a ``pod.status`` publish item like the agent's own; ``problems`` says why
    a pod cannot run here (such a binding is released as ``Failed``/``CreateContainerConfigError``, never
    requeued). Raises RedisError on I/O failure (the agent tries again next interval)."""
    out = Outcome()
    names = list(nodes)
    for name in await store.missing_nodes(names):
        await store.put_node(nodes[name])
        out.items.append((subjects.NODE_REGISTERED, nodes[name], f"node-registered-{name}-{now:.3f}",
                          {"node": name}))
        out.count("node_registered", f"node {name} was missing from the store: registered again")
    running = {spec.uid: (name, spec) for name in names for spec in backend.running(name)}
    bindings = await store.bound_nodes(list(running))
    for uid, (node, spec) in running.items():
        other = bindings[uid][0] if uid in bindings else await store.restore_binding(
            spec, node, bound_at.get(uid, now), now)
        if uid not in bindings and not other:
            out.count("binding_restored", f"pod {uid} runs on {node} without a binding: restored")
        elif other.startswith(ENDED):
            end = backend.evict_pod(uid, "Ended", f"{other.removeprefix(ENDED)} in the store", now)
            if end is not None:
                out.stopped.append(end)
                out.count("ended_stopped", f"pod {uid} runs on {node} but ended in the store: stopped here")
        elif other != node:
            end = backend.evict_pod(uid, "Duplicate", f"bound to {other}", now)
            if end is not None:
                out.stopped.append(end)
                out.count("duplicate_stopped", f"pod {uid} runs on {node} but is bound to {other}: stopped here")
    await _release_orphans(store, backend, names, now, ended, grace_s, status_item, problems, out)
    return out


async def _release_orphans(store: Store, backend: NodeBackend, names: list[str], now: float,
                           ended: Mapping[str, tuple[PodEnd, float]], grace_s: float, status_item: StatusItem,
                           problems: Problems, out: Outcome) -> None:
    bound = await store.node_pods_many(names)
    orphans = [(uid, node) for node in names for uid in sorted(bound.get(node, ())) if not backend.has_pod(uid)]
    if not orphans:
        return
    bindings = await store.bound_nodes([uid for uid, _ in orphans])
    for uid, node in orphans:
        where = bindings.get(uid)
        if where is None or where[0] != node:
            continue  # released or bound elsewhere meanwhile
        end, reported_at = ended.get(uid, (None, 0.0))
        if end is not None and end.node == node:
            if now - reported_at < grace_s:
                continue  # its status is still on its way to the scheduler, which releases it
            if await store.release(uid, end.phase, end.reason, end.at, node=node):
                item = status_item(end.spec, node, end.phase, end.reason, end.message, end.at)
                out.items.append((item[0], item[1], f"{item[2]}-reconciled-{now:.3f}", item[3]))
                out.count("allocation_released", f"pod {uid} ended on {node} ({end.phase} at "
                                                        f"{end.at:.3f}) but kept its binding (bound at "
                                                        f"{where[1]:.3f})")
            continue
        if now - where[1] < grace_s:
            continue  # its PodBound may still be on its way
        rec = await store.get_pod(uid)
        phase, reason, message = _orphan_end(rec, node, problems)
        if not await store.release(uid, phase, reason, now, node=node):
            continue
        msg_id = f"status-{uid}-{where[1]:.3f}-{phase}-reconciled-{now:.3f}"
        if rec is not None:
            out.items.append((*status_item(rec.spec, node, phase, reason, message, now)[:2], msg_id,
                              {"node": node}))
        else:
            out.items.append((subjects.POD_STATUS, PodStatus(uid=uid, node=node, phase=phase, at=now,
                                                             reason=reason, message=message),
                              msg_id, {"node": node}))
        out.count("allocation_released", f"pod {uid}: {message}")


def _orphan_end(rec: PodRecord | None, node: str, problems: Problems) -> tuple[PodPhase, str, str]:
    """How a pod bound to ``node`` that does not run there ends: as its record says when it finished (a
    restarted agent does not run finished pods again), ``Failed``/``CreateContainerConfigError`` when it cannot
    run here (it must not come back: requeued, bound, refused, for ever), else ``Failed``/``Evicted``."""
    if rec is not None and rec.phase in ("Succeeded", "Failed"):
        return rec.phase, rec.reason, "finished; its binding was kept (reconciled)"
    bad = problems(rec.spec) if rec is not None else []
    if bad:
        return "Failed", "CreateContainerConfigError", "; ".join(bad)
    return "Failed", "Evicted", f"bound to {node} but not running there (reconciled)"
