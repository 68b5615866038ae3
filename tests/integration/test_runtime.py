"""Runtime: a tiny service run in-process and as a process against real servers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from colo import subjects
from colo.messages import PodSpec, Tick
from colo.runtime import ServiceContext, ServiceRunner
from colo.settings import RuntimeSettings
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


class Counter:
    """A tiny service: counts submitted pods, fails its tick on demand."""

    name = "counter"
    tick_interval_s = 0.01

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.ticks: list[float] = []
        self.stopped = False
        self.fail_tick = False
        self.ctx: ServiceContext | None = None

    async def start(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        ctx.bus.subscribe(subjects.POD_SUBMITTED, self.on_pod, durable="pods")
        ctx.add_route("GET", "/debug/seen", self.seen_route)

    async def on_pod(self, pod: PodSpec) -> None:
        await asyncio.sleep(0.01)
        self.seen.append(pod.uid)

    async def seen_route(self, _: web.Request) -> web.Response:
        return web.json_response(self.seen)

    async def tick(self, now: float) -> dict[str, float]:
        if self.fail_tick:
            raise RuntimeError("tick exploded")
        self.ticks.append(now)
        return {"seen": len(self.seen)}

    async def stop(self) -> None:
        self.stopped = True

    def ready(self) -> bool:
        return self.ctx is not None

    def debug(self) -> dict[str, object]:
        return {"seen": len(self.seen), "obj": object()}


def settings(nats_url: str, redis_url: str, sim: bool) -> RuntimeSettings:
    return RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=sim, store_prefix="rt-test")


async def test_http_endpoints_and_clean_shutdown(nats_url: str, redis_url: str, bus_factory: BusFactory) -> None:
    svc = Counter()
    runner = ServiceRunner(svc, settings(nats_url, redis_url, sim=False))
    await runner.start()
    try:
        publisher = await bus_factory("cli")
        await publisher.publish(subjects.POD_SUBMITTED, PodSpec(uid="a", name="a"))
        base = f"http://127.0.0.1:{runner.http_port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as r:
                assert r.status == 200
            async with http.get(f"{base}/readyz") as r:
                body = await r.json()
                assert r.status == 200 and body["ready"] is True and body["service"] == "counter"
                assert body["dependencies"] == {"nats": {"state": "up", "error": ""},
                                                "redis": {"state": "up", "error": ""}}
            assert runner.ctx is not None
            await runner.ctx.bus.settle()
            async with http.get(f"{base}/metrics") as r:
                text = await r.text()
                assert r.status == 200
                assert 'colo_bus_consumed_total{service="counter",subject="colo.v1.pod.submitted"}' in text
            async with http.get(f"{base}/debug/state") as r:
                body = await r.json()
                assert body["seen"] == 1 and body["obj"].startswith("<object")
            async with http.get(f"{base}/debug/seen") as r:
                assert await r.json() == ["a"]
        await asyncio.sleep(0.05)
        assert len(svc.ticks) >= 2  # wall-clock tick loop runs
        await publisher.publish(subjects.POD_SUBMITTED, PodSpec(uid="b", name="b"))
        await asyncio.sleep(0.005)  # the handler is likely mid-sleep: stop must let it finish
    finally:
        await runner.stop()
    assert svc.stopped
    assert runner.ctx.bus.nc.is_closed
    assert svc.seen == ["a", "b"]


async def test_sim_ticks_advance_virtual_clock_and_report_errors(
        nats_url: str, redis_url: str, bus_factory: BusFactory) -> None:
    svc = Counter()
    runner = ServiceRunner(svc, settings(nats_url, redis_url, sim=True))
    await runner.start()
    try:
        coordinator = await bus_factory("coordinator")
        await coordinator.publish_many([(subjects.POD_SUBMITTED, PodSpec(uid=f"p{i}", name="p"), None, {})
                                        for i in range(3)])
        ack = await coordinator.request_tick("counter", Tick(seq=1, now=60.0, step_s=60.0))
        assert (ack.seq, ack.stats, ack.error) == (1, {"seen": 3.0}, "")  # settled before tick
        assert runner.clock.now() == 60.0
        await asyncio.sleep(0.05)
        assert svc.ticks == [60.0]  # no wall-clock ticks in sim mode
        svc.fail_tick = True
        ack = await coordinator.request_tick("counter", Tick(seq=2, now=120.0, step_s=60.0))
        assert ack.seq == 2 and "tick exploded" in ack.error
        svc.fail_tick = False
        back = await coordinator.request_tick("counter", Tick(seq=3, now=30.0, step_s=60.0))
        assert "cannot go back" in back.error
        ack = await coordinator.request_tick("counter", Tick(seq=4, now=180.0, step_s=60.0))
        assert ack.error == "" and svc.ticks == [60.0, 180.0]
    finally:
        await runner.stop()


SERVICE_MAIN = textwrap.dedent('''
    import msgspec
    from colo.runtime import main

    class Settings(msgspec.Struct, kw_only=True):
        rate: int = 1
        name: str = "x"

    class Svc:
        name = "proc-svc"
        tick_interval_s = 0.05
        def __init__(self, s): self.s = s
        async def start(self, ctx): pass
        async def tick(self, now): return {}
        async def stop(self): print("STOPPED", flush=True)
        def ready(self): return True
        def debug(self): return {}

    main(Svc, Settings, "COLO_PROC")
''')


def run_proc(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    script = tmp_path / "svc.py"
    script.write_text(SERVICE_MAIN)
    full = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    full.update(env)
    return subprocess.Popen([sys.executable, str(script)], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_settings_error_exits_2_listing_every_problem(tmp_path: Path) -> None:
    proc = run_proc(tmp_path, {"COLO_PROC_RATE": "fast", "COLO_PROC_BOGUS": "1", "COLO_HTTP_PORT": "x"})
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2, out
    assert "rate" in out and "BOGUS" in out and "http_port" in out


def test_sigterm_stops_process_cleanly(tmp_path: Path, nats_url: str, redis_url: str) -> None:
    proc = run_proc(tmp_path, {"COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url,
                               "COLO_STORE_PREFIX": "proc-test"})
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "started" in line:
            break
    assert any("proc-svc started: http://127.0.0.1:" in ln for ln in lines), lines
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "STOPPED" in out


class Stamper:
    """Records the service clock at which its handler reads each submitted pod (after a short await, as a
    handler that publishes or reads the store does)."""

    name = "stamper"
    tick_interval_s = 0.01

    def __init__(self) -> None:
        self.stamps: dict[str, float] = {}
        self.ticks: list[float] = []
        self.ctx: ServiceContext | None = None

    async def start(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        ctx.bus.subscribe(subjects.POD_SUBMITTED, self.on_pod, durable="pods")

    async def on_pod(self, pod: PodSpec) -> None:
        await asyncio.sleep(0.05)
        assert self.ctx is not None
        self.stamps[pod.uid] = self.ctx.clock.now()

    async def tick(self, now: float) -> dict[str, float]:
        self.ticks.append(now)
        return {}

    async def stop(self) -> None:
        pass

    def ready(self) -> bool:
        return self.ctx is not None

    def debug(self) -> dict[str, object]:
        return {}


async def test_sim_settle_tick_handles_a_steps_messages_at_its_time(
        nats_url: str, redis_url: str, bus_factory: BusFactory) -> None:
    """A message published late in step t (the descheduler's eviction, last in the tick order) is handled at t
    once the coordinator sends a settle-only tick for t: the service drains its consumers without ticking or
    moving its clock. Without it, a handler still running when the next tick came read t + step, a quick one
    t: the same run differed from one try to the next."""
    svc = Stamper()
    runner = ServiceRunner(svc, settings(nats_url, redis_url, sim=True))
    await runner.start()
    try:
        coordinator = await bus_factory("coordinator")
        await coordinator.request_tick("stamper", Tick(seq=1, now=60.0, step_s=60.0))
        await coordinator.publish(subjects.POD_SUBMITTED, PodSpec(uid="late", name="late"))
        ack = await coordinator.request_tick("stamper", Tick(seq=1, now=60.0, step_s=60.0, settle_only=True))
        assert ack.error == "" and ack.stats == {}
        ack = await coordinator.request_tick("stamper", Tick(seq=2, now=120.0, step_s=60.0))
        assert ack.error == ""
        assert svc.stamps == {"late": 60.0}
        assert svc.ticks == [60.0, 120.0]  # the settle-only tick runs no tick
        assert runner.clock.now() == 120.0
    finally:
        await runner.stop()


async def test_a_token_file_guards_every_route_but_the_probes(nats_url: str, redis_url: str, tmp_path: Path,
                                                             clean_streams: None) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    svc = Counter()
    runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix="rt-test",
                                                http_token_file=str(token)))
    await runner.start()
    base = f"http://127.0.0.1:{runner.http_port}"
    try:
        async with aiohttp.ClientSession() as http:
            for path, want in (("/healthz", 200), ("/readyz", 200), ("/metrics", 401), ("/debug/state", 401),
                               ("/debug/seen", 401)):
                async with http.get(base + path) as r:
                    assert r.status == want, path
            async with http.get(base + "/debug/seen", headers={"Authorization": "Bearer s3cret"}) as r:
                assert r.status == 200
            async with http.get(base + "/metrics", headers={"Authorization": "Basic s3cret"}) as r:
                assert r.status == 401 and "not 'Bearer <token>'" in (await r.json())["error"]
    finally:
        await runner.stop()


async def test_an_unreadable_token_file_stops_the_start_before_connecting(tmp_path: Path) -> None:
    from colo.http_auth import TokenFileError

    runner = ServiceRunner(Counter(), RuntimeSettings(nats_url="nats://127.0.0.1:1",
                                                      http_token_file=str(tmp_path / "none")))
    with pytest.raises(TokenFileError, match="http_token_file: cannot read"):
        await runner.start()
