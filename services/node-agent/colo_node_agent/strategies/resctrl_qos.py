"""LLC ways and memory bandwidth per QoS group through resctrl (REFERENCE.md §5 "LLC / memory bandwidth";
Koordinator ``qosmanager/plugins/resctrl``).

Three groups under ``/sys/fs/resctrl``: ``LSR`` (LSE and LSR pods), ``LS`` and ``BE``. Each gets an L3 line
(``l3_mask`` of its NodeSLO percent range, every cache domain the same) and, where the node has MBA, an MB line
(``mba_percent`` rounded up to the hardware step); the pods' task ids go to their group's ``tasks``. With the
strategy off the groups are restored to every way and 100 % bandwidth. Without resctrl (``info`` None) the plan
is empty: the caller need not know whether the machine has it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.messages import QoSClass, ResctrlClass, ResctrlStrategy
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.resctrl import ResctrlInfo, l3_mask, mba_percent, schemata_value

GROUPS: tuple[str, ...] = ("LSR", "LS", "BE")


def group_of(qos: QoSClass) -> str | None:
    """The resctrl group of a pod class (SYSTEM pods stay in the root group)."""
    return {"LSE": "LSR", "LSR": "LSR", "LS": "LS", "BE": "BE"}.get(qos)


@dataclass(frozen=True)
class ResctrlPlan:
    """Writes (schemata and tasks) and one problem per group whose range is invalid."""

    writes: list[CgroupWrite] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def resctrl_plan(policy: ResctrlStrategy, info: ResctrlInfo | None,
                 pod_tasks: dict[QoSClass, list[int]] | None = None,
                 group_tasks: dict[str, frozenset[int]] | None = None) -> ResctrlPlan:
    """The resctrl plan; ``pod_tasks`` task ids by pod class, moved into their group unless ``group_tasks``
    (the ids each group's ``tasks`` lists now) already has them: new threads start in their parent's group, so
    every round moves the new ones, as Koordinator does."""
    if info is None:
        return ResctrlPlan()
    plan = ResctrlPlan()
    full = ResctrlClass()
    classes = {"LSR": policy.lsr, "LS": policy.ls, "BE": policy.be} if policy.enabled else dict.fromkeys(
        GROUPS, full)
    for group, cfg in classes.items():
        try:
            mask = l3_mask(info.cbm_mask, cfg.l3_start_percent, cfg.l3_end_percent, info.min_cbm_bits)
        except ValueError as exc:
            plan.problems.append(f"resctrl.{group.lower()}: {exc}")
            continue
        why = f"L3 {cfg.l3_start_percent}-{cfg.l3_end_percent} %"
        plan.writes.append(CgroupWrite(group, "resctrl.l3", schemata_value(info.l3_domains, mask, True), why))
        if info.mb_domains:
            try:
                mb = mba_percent(cfg.mba_percent, info.bandwidth_gran, info.min_bandwidth)
            except ValueError as exc:
                plan.problems.append(f"resctrl.{group.lower()}: {exc}")
                continue
            plan.writes.append(CgroupWrite(group, "resctrl.mb", schemata_value(info.mb_domains, mb, False),
                                           f"MBA {cfg.mba_percent} %"))
    if policy.enabled:
        for qos, pids in (pod_tasks or {}).items():
            g = group_of(qos)
            have = (group_tasks or {}).get(g or "", frozenset())
            if g is not None:
                plan.writes.extend(CgroupWrite(g, "resctrl.tasks", pid, f"{qos} task") for pid in pids
                                   if pid not in have)
    return plan
