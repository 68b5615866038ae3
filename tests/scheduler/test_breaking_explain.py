"""``colo explain`` and ``GET /debug/pods/{uid}/decision`` with odd uids, odd answers and odd queries.

* A uid with ``/``, ``?``, ``#``, ``%`` or a space went into the URL unescaped: the CLI asked for
  another path (or cut the uid at ``?``) and showed a JSON parse error of aiohttp's 404 page.
* An HTTP 500 or an HTML page was reported as a JSON parse error, without the status.
* A 200 JSON answer that is not a decision record (another service's URL) crashed ``render`` with a
  KeyError traceback.
* ``?live=0`` ran a dry run (any value counted as true), and ``?live=1`` on a bound pod answered
  "no decision recorded" although its record was there.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from rich.console import Console
from sched_helpers import GI, node, pod

from colo import subjects
from colo.cli.explain import ExplainError, cmd_explain, fetch_decision, fetch_ref, render
from colo.clock import VirtualClock
from colo.messages import PodAdmitted
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

ODD_UIDS = ["team/web-1", "a b", "x?y=1", "x#y", "100%", "%2F", "ünï", "p" * 2000]


async def _serve(app: web.Application) -> tuple[TestServer, str]:
    server = TestServer(app)
    await server.start_server()
    return server, str(server.make_url("")).rstrip("/")


@pytest.fixture
async def odd_server() -> AsyncIterator[str]:
    """A server that answers the decision path with a 500, an HTML page, some other JSON, or an echo."""

    async def route(request: web.Request) -> web.Response:
        uid = request.match_info["uid"]
        if uid == "boom":
            return web.Response(status=500, text="500 Internal Server Error\n\nServer got itself in trouble")
        if uid == "html":
            return web.Response(status=200, text="<html><body>login</body></html>", content_type="text/html")
        if uid == "other":
            return web.json_response({"status": "ok", "version": 3})
        if uid == "list":
            return web.json_response([1, 2])
        return web.json_response({"error": f"unknown {uid}"}, status=404)

    app = web.Application()
    app.router.add_route("GET", "/debug/pods/{uid}/decision", route)
    server, base = await _serve(app)
    try:
        yield base
    finally:
        await server.close()


async def test_http_errors_and_foreign_answers_are_explained(odd_server: str) -> None:
    with pytest.raises(ExplainError, match=r"HTTP 500.*Internal Server Error"):
        await fetch_decision(odd_server, "boom")
    with pytest.raises(ExplainError, match=r"not JSON.*text/html"):
        await fetch_decision(odd_server, "html")
    with pytest.raises(ExplainError, match=r"not a decision record.*missing"):
        await fetch_decision(odd_server, "other")
    with pytest.raises(ExplainError, match=r"not a decision record"):
        await fetch_decision(odd_server, "list")
    with pytest.raises(ExplainError, match="unknown nope"):
        await fetch_decision(odd_server, "nope")


async def test_cli_exits_1_with_a_message_never_a_traceback(odd_server: str) -> None:
    def run(uid: str, url: str) -> tuple[int, str]:  # the CLI runs its own event loop: in a thread
        console = Console(record=True, width=200)
        args = argparse.Namespace(uid=uid, scheduler=url, live=False, json=False, max_nodes=20)
        return cmd_explain(args, console, {}), console.export_text()

    for uid, expected in (("boom", "HTTP 500"), ("html", "not JSON"), ("other", "not a decision record"),
                          ("list", "not a decision record")):
        code, text = await asyncio.to_thread(run, uid, odd_server)
        assert code == 1 and expected in text, (uid, text)
    for url in ("http://127.0.0.1:1", "localhost:8080", "http://[bad"):
        code, text = await asyncio.to_thread(run, "p", url)
        assert code == 1 and "cannot read" in text, (url, text)


async def _scheduler(bus_factory: BusFactory, store: Any) -> tuple[SchedulerService, TestServer, str, Any]:
    clock = VirtualClock(1000.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    ctx = service_context(bus, store, clock)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(ctx)
    await bus.start_consumers()
    app = web.Application()
    for method, path, handler in ctx.routes:
        app.router.add_route(method, path, handler)
    server, base = await _serve(app)
    return svc, server, base, bus


@pytest.mark.integration
async def test_odd_uids_reach_the_scheduler_and_live_is_a_flag(bus_factory: BusFactory, store: Any) -> None:
    svc, server, base, bus = await _scheduler(bus_factory, store)
    try:
        tester = await bus_factory("tester")
        spec = node("big", cpu=64_000, memory=128 * GI)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node="big")
        for uid in ODD_UIDS:
            await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, 100, GI), at=1000.0))
        await bus.settle()
        for uid in ODD_UIDS:  # queued: dry runs
            d = await fetch_decision(base, uid)
            assert d["uid"] == uid and d["source"] == "dry-run" and d["node"] == "big"
        await svc.tick(1000.0)
        for uid in ODD_UIDS:
            d = await fetch_decision(base, uid)
            assert d["uid"] == uid and d["source"] == "recorded" and d["status"] == "Success"
        async with aiohttp.ClientSession() as session:
            for flag in ("0", "false", "no", ""):
                async with session.get(f"{base}/debug/pods/a%20b/decision?live={flag}") as resp:
                    assert resp.status == 200, flag
                    assert (await resp.json())["source"] == "recorded", flag
        with pytest.raises(ExplainError) as err:  # a bound pod has no dry run, but it has a record
            await fetch_decision(base, "a b", live=True)
        assert "placed on big" in str(err.value) and "recorded decision" in str(err.value)
        with pytest.raises(ExplainError, match="unknown to this scheduler"):
            await fetch_decision(base, "never/seen")
        # the CLI reads NAMESPACE/NAME as the uid NAMESPACE-NAME (colo submit's), and falls back to the
        # ref itself, so a uid that holds a '/' can be explained too
        assert (await fetch_ref(base, "team/web-1"))["uid"] == "team/web-1"
        with pytest.raises(ExplainError, match="never-seen"):
            await fetch_ref(base, "never/seen")
    finally:
        await server.close()
        await svc.stop()


def test_render_of_a_record_without_scores_or_rejections() -> None:
    console = Console(record=True, width=200)
    render({"uid": "p", "attempt": 1, "at": 1.0, "status": "Unschedulable", "node": None, "runner_up": None,
            "nodes": 0, "feasible": 0, "message": "0/0 nodes are available.", "detail": "summary",
            "decision_ms": 0.01, "filters": {}, "rejected_nodes": {}, "scores": {}, "source": "recorded"}, console)
    assert "0/0 nodes are available" in console.export_text()


def test_render_lists_the_filters_reasons_for_nodes_recorded_without_one() -> None:
    """A summary record of an unschedulable pod keeps per-node reasons only where the filter has one
    reason; for the others the CLI shows the filter's reasons instead of an empty cell."""
    console = Console(record=True, width=200)
    render({"uid": "p", "attempt": 1, "at": 1.0, "status": "Unschedulable", "node": None, "runner_up": None,
            "nodes": 2, "feasible": 0, "message": "0/2 nodes are available.", "detail": "summary",
            "decision_ms": 0.01, "scores": {}, "source": "recorded",
            "filters": {"NodeResourcesFit": {"rejected": 1, "reasons": {"Insufficient cpu": 1, "Insufficient memory": 1}},
                        "TaintToleration": {"rejected": 1, "reasons": {"node(s) had untolerated taint": 1}}},
            "rejected_nodes": {"a": {"plugin": "NodeResourcesFit"},
                               "b": {"plugin": "TaintToleration", "reason": "node(s) had untolerated taint"}}},
           console)
    text = console.export_text()
    assert "one of: Insufficient cpu, Insufficient memory" in text
    assert "--live" in text


def test_a_dry_run_leaves_the_sampling_window_where_it_was() -> None:
    """With percentage_of_nodes_to_score below 100 every decision moves the rotating start of the window;
    a dry run (``?live=1``, or a queued pod's first look) moved it too, so asking why changed where the
    next pods went (and a simulation stopped being reproducible)."""
    from sched_helpers import node as mk_node
    from sched_helpers import pod as mk_pod

    from colo_scheduler.core import Scheduler
    from colo_scheduler.settings import ProfileSettings

    def run(ask: bool) -> list[str]:
        core = Scheduler(SchedulerSettings(profile=ProfileSettings(percentage_of_nodes_to_score=10,
                                                                   min_feasible_nodes_to_find=3)))
        for i in range(40):
            core.on_node(mk_node(f"n{i:02}"), 0.0)
        placed = []
        for k in range(6):
            core.add_pod(mk_pod(f"p{k}", cpu=100), float(k))
            if ask:
                assert core.explain(f"p{k}", float(k)) is not None
            placed += [p.node for p in core.schedule_cycle(float(k)).placements]
        return placed

    assert run(True) == run(False)


@pytest.mark.integration
async def test_explain_by_name_without_the_namespace(bus_factory: BusFactory, store: Any, nats_url: str,
                                                      redis_url: str) -> None:
    """Issue 14, observation 3: ``colo explain web-0`` said unknown; the name is found in the store (any
    namespace holding the only pod of that name, or ``-n``), whatever the pod's uid."""
    import msgspec

    from colo.cli.connection import Connection
    from colo.settings import load_runtime_settings

    svc, server, base, bus = await _scheduler(bus_factory, store)
    try:
        tester = await bus_factory("tester")
        spec = node("big", cpu=64_000, memory=128 * GI)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node="big")
        web = msgspec.structs.replace(pod("uid-17", 100, GI), name="web-0", namespace="shop")
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=web, at=1000.0))
        await bus.settle()
        await svc.tick(1000.0)
        conn = Connection(load_runtime_settings({"COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url,
                                                 "COLO_STORE_PREFIX": store.keys.prefix}), "env", ())

        def run(ref: str, namespace: str) -> tuple[int, str]:
            console = Console(record=True, width=200)
            args = argparse.Namespace(uid=ref, namespace=namespace, scheduler=base, live=False, json=False,
                                      max_nodes=20)
            return cmd_explain(args, console, {}, lambda: conn), console.export_text()

        for ref, namespace in (("web-0", ""), ("web-0", "shop"), ("shop/web-0", "")):
            code, text = await asyncio.to_thread(run, ref, namespace)
            assert code == 0 and "pod uid-17" in text and "Success" in text, (ref, text)
        code, text = await asyncio.to_thread(run, "web-0", "ml")
        assert code == 1 and "no pod 'web-0' in namespace 'ml'" in " ".join(text.split())
    finally:
        await server.close()
        await svc.stop()
