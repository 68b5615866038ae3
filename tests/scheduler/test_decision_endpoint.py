"""``GET /debug/pods/{uid}/decision`` on a running scheduler service and ``colo explain`` reading it."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from rich.console import Console
from sched_helpers import GI, node, pod

from colo import subjects
from colo.cli.explain import ExplainError, fetch_decision, render
from colo.clock import VirtualClock
from colo.messages import PodAdmitted, Taint
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


async def test_decision_endpoint_and_cli(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(1000.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    ctx = service_context(bus, store, clock)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(ctx)
    await bus.start_consumers()
    app = web.Application()
    for method, path, handler in ctx.routes:
        app.router.add_route(method, path, handler)
    server = TestServer(app)
    await server.start_server()
    base = str(server.make_url("")).rstrip("/")
    try:
        tester = await bus_factory("tester")
        specs = [node("small", cpu=1000, memory=GI), node("big", cpu=64_000, memory=128 * GI),
                 node("gpu", taints=[Taint(key="gpu", value="1", effect="NoSchedule")]),
                 node("mid", cpu=32_000, memory=64 * GI)]
        for spec in specs:
            await store.put_node(spec)
            await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("web-1", 4000, 4 * GI), at=1000.0))
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("huge", 500_000, GI), at=1000.0))
        await bus.settle()
        with pytest.raises(ExplainError, match="no decision recorded"):
            await fetch_decision(base, "nobody")
        dry = await fetch_decision(base, "web-1")  # queued, not attempted yet: a dry run
        assert dry["source"] == "dry-run" and dry["node"] == "big"
        await svc.tick(1000.0)
        d = await fetch_decision(base, "web-1")
        assert d["source"] == "recorded" and d["status"] == "Success"
        assert d["node"] == "big" and d["runner_up"] == "mid"
        assert d["rejected_nodes"]["gpu"]["plugin"] == "TaintToleration"
        assert d["rejected_nodes"]["small"]["plugin"] == "NodeResourcesFit"
        assert set(d["scores"]) == {"big", "mid"}
        assert d["scores"]["big"]["total"] >= d["scores"]["mid"]["total"]
        failed = await fetch_decision(base, "huge")
        assert failed["status"] == "Unschedulable" and failed["node"] is None
        assert failed["message"].startswith("0/4 nodes are available")
        console = Console(record=True, width=200)
        render(d, console)
        text = console.export_text()
        for part in ("web-1", "big", "TaintToleration", "NodeResourcesFit", "runner-up mid", "total"):
            assert part in text
    finally:
        await server.close()
        await svc.stop()


def test_explain_rendering_of_an_unschedulable_pod_and_namespace_refs() -> None:
    from colo.cli.explain import pod_uid

    assert pod_uid("shop/web-0") == "shop-web-0" and pod_uid("shop-web-0") == "shop-web-0"
    decision = {"uid": "batch-etl-0", "attempt": 1, "at": 1796015539.8, "source": "recorded",
                "status": "Unschedulable", "message": "0/2 nodes are available: 2 Insufficient batch-cpu.",
                "node": None, "runner_up": None, "feasible": 0, "nodes": 2, "decision_ms": 0.2,
                "filters": {"NodeResourcesFit": {"rejected": 2, "reasons": {"Insufficient batch-cpu": 2}}},
                "rejected_nodes": {"a": {"plugin": "NodeResourcesFit", "reason": "Insufficient batch-cpu"},
                                   "b": {"plugin": "NodeResourcesFit", "reason": "Insufficient batch-cpu"}},
                "scores": {}}
    console = Console(record=True, width=200)
    render(decision, console)
    text = console.export_text()
    assert "None" not in text and "node -" in text and "2026-" in text and "UTC" in text
    assert "Insufficient batch-cpu" in text
