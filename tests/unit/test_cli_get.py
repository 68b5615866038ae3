"""``colo get pods``: uid column, effective QoS class, the scheduler's message for waiting pods."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rich.console import Console

from colo import subjects
from colo.cli import main as cli
from colo.cli.explain import ExplainError
from colo.embedded import free_port
from colo.messages import NodeSpec, PodAdmitted, PodRecord, PodSpec, Resources
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

GI = 1024**3


def _text(table: Any) -> str:
    console = Console(record=True, width=400)
    console.print(table)
    return console.export_text()


def _row(text: str, name: str) -> list[str]:
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 2 and cells[2] == name:
            return cells[1:-1]
    raise AssertionError(f"no row for {name} in\n{text}")


@pytest.mark.parametrize(("spec", "qos"), [
    pytest.param(PodSpec(uid="a", name="a", qos_class="LSR"), "LSR", id="field"),
    pytest.param(PodSpec(uid="a", name="a", labels={"koordinator.sh/qosClass": "BE"}), "BE", id="label"),
    pytest.param(PodSpec(uid="a", name="a", requests=Resources(cpu=1000, memory=GI),
                         limits=Resources(cpu=1000, memory=GI)), "LSR", id="guaranteed"),
    pytest.param(PodSpec(uid="a", name="a", requests=Resources(cpu=500)), "LS", id="burstable"),
    pytest.param(PodSpec(uid="a", name="a"), "BE", id="besteffort"),
])
def test_qos_column_is_the_effective_class(spec: PodSpec, qos: str) -> None:
    row = _row(_text(cli.pods_table([PodRecord(spec=spec)], {})), "a")
    assert row[5] == qos


def test_reason_column() -> None:
    waiting = PodRecord(spec=PodSpec(uid="u-1", name="big"))
    evicted = PodRecord(spec=PodSpec(uid="u-2", name="ev"), phase="Pending", reason="Evicted")
    bound = PodRecord(spec=PodSpec(uid="u-3", name="ok"), phase="Running", node="n1")
    msgs = {"u-1": "0/2 nodes are available: 2 Insufficient cpu.", "u-3": "stale"}
    assert cli.pod_reason(waiting, msgs) == "Unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
    assert cli.pod_reason(evicted, msgs) == "Evicted"
    assert cli.pod_reason(bound, msgs) == "-"  # a message of an earlier attempt does not stick to a bound pod
    assert cli.waiting_pods([waiting, evicted, bound]) == ["u-1", "u-2"]
    gang = PodRecord(spec=PodSpec(uid="u-4", name="w-0"))
    held = "Coscheduling: waiting for gang ml/train: 3 of 8 placed"
    assert cli.pod_reason(gang, {"u-4": held}) == held
    sent_back = "gang ml/train: member train-5 fits no node; the gang was sent back"
    assert cli.pod_reason(gang, {"u-4": sent_back}) == f"Unschedulable: {sent_back}"


async def test_unreachable_scheduler_raises_once() -> None:
    with pytest.raises(ExplainError, match="unreachable"):
        await cli.unschedulable_messages(f"http://127.0.0.1:{free_port()}", ["a", "b"], timeout_s=2)


def _node(name: str, cpu: int, memory: int) -> NodeSpec:
    r = Resources(cpu=cpu, memory=memory, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r)


@pytest.mark.integration
async def test_get_pods_against_a_running_scheduler(nats_url: str, redis_url: str, store: Store,
                                                    bus_factory: Any) -> None:
    settings = RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix=store.keys.prefix, sim=True)
    runner = ServiceRunner(SchedulerService(SchedulerSettings(seed=1)), settings)
    await runner.start()
    try:
        tester = await bus_factory("tester")
        for spec in (_node("n1", 8000, 16 * GI), _node("n2", 4000, 8 * GI)):
            await store.put_node(spec)
            await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
        web = PodSpec(uid="shop-web-0", name="web-0", namespace="shop",
                      requests=Resources(cpu=2000, memory=2 * GI), limits=Resources(cpu=2000, memory=2 * GI))
        huge = PodSpec(uid="shop-huge", name="huge", namespace="shop", requests=Resources(cpu=64_000, memory=GI))
        for p in (web, huge):
            await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=p, at=1000.0))
        for _ in range(100):  # the scheduler stores admitted pods as Pending
            if len(await store.list_pods()) == 2:
                break
            await asyncio.sleep(0.05)
        await runner.service.tick(1000.0)
        url = f"http://127.0.0.1:{runner.http_port}"
        conn = cli.Connection(settings, "env", (), url)
        text = _text(await cli._get("pods", conn))
        web_row, huge_row = _row(text, "web-0"), _row(text, "huge")
        assert web_row[:6] == ["shop", "web-0", "shop-web-0", "Pending", web_row[4], "LSR"]
        assert web_row[4] in ("n1", "n2") and web_row[-1] == "-"
        assert huge_row[2] == "shop-huge" and huge_row[4] == "-" and huge_row[5] == "LS"
        assert huge_row[-1] == "Unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
        without = _text(await cli._get("pods", cli.Connection(settings, "env", (), "")))
        assert _row(without, "huge")[-1] == "-"  # no scheduler known: the store's reason (none yet)
    finally:
        await runner.stop()
