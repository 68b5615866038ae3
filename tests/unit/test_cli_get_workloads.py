"""``colo get workloads`` / ``colo get podgroups`` tables from admission's records and the stored pods."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from colo.cli.get_workloads import podgroups_table, workloads_table
from colo.messages import PodGroupSpec, PodRecord, PodSpec, WorkloadSpec
from colo.workloads import WorkloadRecord, expand, gang_of


def _rows(table: Table) -> list[list[str]]:
    console = Console(width=400, record=True)
    cells = [list(c.cells) for c in table.columns]
    console.print(table)
    return [[str(cells[c][r]) for c in range(len(cells))] for r in range(table.row_count)]


JOB = WorkloadSpec(kind="Job", uid="ml-train", name="train", namespace="ml", parallelism=2, completions=5,
                   template=PodSpec(uid="", name=""),
                   pod_group=PodGroupSpec(uid="g", name="train", namespace="ml", min_member=2))
PODS = expand(JOB, range(3))


def test_workloads_table() -> None:
    records = [WorkloadRecord(spec=JOB, gang=gang_of(JOB.pod_group, 2), pods=[p.uid for p in PODS],  # type: ignore[arg-type]
                              active=["ml-train-1", "ml-train-2"], succeeded=1, next_index=3),
               WorkloadRecord(spec=WorkloadSpec(kind="Deployment", uid="w", name="web", replicas=1,
                                              template=PodSpec(uid="", name="")), pods=["w-x"])]
    store = [PodRecord(spec=PODS[0], phase="Succeeded", node="n1"), PodRecord(spec=PODS[1], phase="Running", node="n1"),
             PodRecord(spec=PODS[2])]
    assert _rows(workloads_table(records, store)) == [
        ["default", "Deployment", "web", "1", "0", "0", "-", "-", "Active"],
        ["ml", "Job", "train", "3", "1", "1", "1/5", "ml/train", "Active"],
    ]


def test_podgroups_table_lists_admitted_and_embedded_gangs() -> None:
    groups = {"ml/ps": PodGroupSpec(uid="ps", name="ps", namespace="ml", min_member=3, mode="NonStrict",
                                    timeout_s=1800.0, groups=["ml/ps", "ml/worker"])}
    store = [PodRecord(spec=PODS[0], node="n1"), PodRecord(spec=PODS[1])]
    assert _rows(podgroups_table(groups, store)) == [
        ["ml/ps", "3", "NonStrict", "1800", "ml/ps, ml/worker", "0", "0"],
        ["ml/train", "2", "Strict", "600", "-", "2", "1"],
    ]
