"""Service lifecycle: connect, start, HTTP endpoints, ticks (wall or virtual), graceful shutdown.

A service implements :class:`Service`; ``python -m colo_<name>`` calls :func:`main`, which
loads settings (exit 2 listing every problem), builds the service and runs it until SIGTERM
or SIGINT (exit 0). In-process (tests) use :class:`ServiceRunner`. See docs/architecture.md
"Service model".

HTTP (aiohttp): ``/healthz`` (process alive), ``/readyz`` (200 when ``service.ready()`` and NATS and Redis
answer, else 503; the body names each dependency and its state: :mod:`colo.readiness`),
``/metrics`` (Prometheus text), ``/debug/state`` (``service.debug()`` as JSON), plus any
route added with :meth:`ServiceContext.add_route` during ``start``. With ``http_token_file`` set every
path but ``/healthz``, ``/readyz`` and the routes a service adds as ``public`` requires
``Authorization: Bearer <token>`` (:mod:`colo.http_auth`, docs/security.md).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec
from aiohttp import web
from opentelemetry import metrics, trace

from colo import health_metrics, http_auth, readiness, telemetry
from colo.bus import Bus, JetStreamNotEnabled
from colo.clock import Clock, VirtualClock, WallClock
from colo.connections import LinkError
from colo.link_files import link_file_problems
from colo.messages import Tick, TickAck
from colo.settings import RuntimeSettings, SettingsError, load_runtime_settings, load_settings
from colo.store import Store

S = TypeVar("S", bound=msgspec.Struct)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Service(Protocol):
    """What the runtime runs (docs/architecture.md "Service model")."""

    name: str
    tick_interval_s: float

    async def start(self, ctx: ServiceContext) -> None:
        """Load state from ``ctx.store`` and subscribe with ``ctx.bus.subscribe``."""
        ...

    async def tick(self, now: float) -> dict[str, float]:
        """Periodic work at clock time ``now`` (seconds); returns stats for the TickAck."""
        ...

    async def stop(self) -> None:
        """Release resources; consumers have already stopped."""
        ...

    def ready(self) -> bool:
        """True when the service can do its job (served at /readyz)."""
        ...

    def debug(self) -> dict[str, object]:
        """State for GET /debug/state (JSON-encodable; unknown values are rendered with str())."""
        ...

    # Optional: ``runtime_problems(runtime: RuntimeSettings) -> list[str]``, the problems of the
    # service's settings together with the shared ``COLO_*`` ones (e.g. an instance name a mode
    # needs); :func:`main` exits 2 listing them before connecting to anything.


class StartRefused(Exception):
    """Raised by a service's ``start`` for a problem its operator must fix (say, another process already
    does this one's job): :func:`main` prints the message and exits 2, without a traceback."""


@dataclass
class ServiceContext:
    """What a service gets in ``start``: settings, bus, store, clock, logger, meter, tracer."""

    settings: RuntimeSettings
    bus: Bus
    store: Store
    clock: Clock
    log: logging.Logger
    meter: metrics.Meter
    tracer: trace.Tracer
    routes: list[tuple[str, str, Handler]] = field(default_factory=list)
    public_paths: set[str] = field(default_factory=set)

    def add_route(self, method: str, path: str, handler: Handler, *, public: bool = False) -> None:
        """Serve ``method path`` (aiohttp handler) on the service's HTTP server; call from ``start``.
        ``public``: open even when ``http_token_file`` is set (a page holding no data, or a route that
        checks a token itself)."""
        self.routes.append((method.upper(), path, handler))
        if public:
            self.public_paths.add(path)


def _json_default(obj: Any) -> Any:
    return str(obj)


class ServiceRunner:
    """Runs one service in the current event loop: ``await start()``, then ``await stop()``.

    ``http_port`` is known after start. ``stopped`` is set once :meth:`stop` finished.
    """

    def __init__(self, service: Service, settings: RuntimeSettings) -> None:
        self.service = service
        self.settings = settings
        self.log = logging.getLogger(f"colo.{service.name}")
        self.clock: Clock = VirtualClock() if settings.sim else WallClock()
        self.ctx: ServiceContext | None = None
        self.http_port = 0
        self._token = ""
        self.ticks = 0
        self._http: web.AppRunner | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.stopped = asyncio.Event()

    async def start(self) -> None:
        """Connect, ensure streams, ``service.start``, start consumers, HTTP and ticks.

        Raises TokenFileError (before connecting) when ``http_token_file`` cannot be read,
        :class:`colo.bus.JetStreamNotEnabled` when the NATS server runs without JetStream, whatever
        connecting or ``service.start`` raises (after cleaning up).
        """
        s = self.settings
        self._token = http_auth.read_token(s.http_token_file)
        telemetry.setup(self.service.name, s.otlp_endpoint)
        client_name = f"{self.service.name}-{s.instance}" if s.instance else self.service.name
        bus = await Bus.connect(s.nats_url, self.service.name, self.clock, autostart=False, name=client_name,
                                settings=s)
        try:
            await bus.ensure_streams()
            store = await Store.connect(s.redis_url, s.store_prefix, settings=s)
        except BaseException:
            await bus.close()
            raise
        self.ctx = ServiceContext(settings=s, bus=bus, store=store, clock=self.clock, log=self.log,
                                  meter=metrics.get_meter(f"colo.{self.service.name}"),
                                  tracer=telemetry.tracer(f"colo.{self.service.name}"))
        try:
            await self.service.start(self.ctx)
            await bus.start_consumers()
            await self._start_http()
            if s.sim:
                await bus.serve_ticks(self._on_tick)
            else:
                self._tick_task = asyncio.create_task(self._tick_loop(), name=f"ticks:{self.service.name}")
        except BaseException:
            await self._teardown()
            raise
        self.log.info("%s started: http://%s:%d (sim=%s)", self.service.name, s.http_host,
                      self.http_port, s.sim)

    async def _start_http(self) -> None:
        assert self.ctx is not None
        health_metrics.started(self.service.name)
        open_paths = {"/healthz", "/readyz", *self.ctx.public_paths}
        app = web.Application(middlewares=[http_auth.middleware(self._token, open_paths)] if self._token else [])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/debug/state", self._debug)
        for method, path, handler in self.ctx.routes:
            app.router.add_route(method, path, handler)
        self._http = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._http.setup()
        site = web.TCPSite(self._http, self.settings.http_host, self.settings.http_port)
        await site.start()
        self.http_port = int(self._http.addresses[0][1])

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "service": self.service.name})

    async def _readyz(self, _: web.Request) -> web.Response:
        try:
            started = bool(self.service.ready())
        except Exception as exc:
            return web.json_response({"ready": False, "service": self.service.name, "error": repr(exc)}, status=503)
        ctx = self.ctx
        status, body = await readiness.report(self.service.name, started, self._stopping.is_set(),
                                              ctx.bus if ctx else None, ctx.store if ctx else None)
        return web.json_response(body, status=status)

    async def _metrics(self, _: web.Request) -> web.Response:
        ctx = self.ctx
        await health_metrics.probe(ctx.bus if ctx else None, ctx.store if ctx else None)
        body, ctype = telemetry.render_metrics()
        return web.Response(body=body, headers={"Content-Type": ctype})

    async def _debug(self, _: web.Request) -> web.Response:
        try:
            body = msgspec.json.encode(self.service.debug(), enc_hook=_json_default)
        except Exception as exc:
            return web.json_response({"error": repr(exc)}, status=500)
        return web.Response(body=body, content_type="application/json")

    async def _run_tick(self, now: float) -> tuple[dict[str, float], str]:
        try:
            stats = await self.service.tick(now) or {}
            self.ticks += 1
            return {str(k): float(v) for k, v in stats.items()}, ""
        except Exception as exc:
            self.log.exception("%s: tick at %.1f failed", self.service.name, now)
            return {}, f"{type(exc).__name__}: {exc}"

    async def _on_tick(self, tick: Tick) -> TickAck:
        assert self.ctx is not None and isinstance(self.clock, VirtualClock)
        if tick.settle_only:
            if tick.now != self.clock.now():
                return TickAck(service=self.service.name, seq=tick.seq,
                               error=f"settle at {tick.now} but the clock is at {self.clock.now()}")
            await self.ctx.bus.settle()
            return TickAck(service=self.service.name, seq=tick.seq)
        try:
            self.clock.advance_to(tick.now)
        except ValueError as exc:
            return TickAck(service=self.service.name, seq=tick.seq, error=str(exc))
        await self.ctx.bus.settle()
        stats, error = await self._run_tick(tick.now)
        await self.ctx.bus.settle()
        return TickAck(service=self.service.name, seq=tick.seq, stats=stats, error=error)

    async def _tick_loop(self) -> None:
        interval = max(0.001, float(self.service.tick_interval_s))
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            started = loop.time()
            await self._run_tick(self.clock.now())
            try:
                await asyncio.wait_for(self._stopping.wait(),
                                       timeout=max(0.0, interval - (loop.time() - started)))
            except TimeoutError:
                pass

    async def stop(self) -> None:
        """Graceful shutdown: stop ticks and intake, finish the running handler, ``service.stop``,
        drain NATS, close Redis and HTTP. Idempotent."""
        if self._stopping.is_set():
            await self.stopped.wait()
            return
        self._stopping.set()
        await self._teardown()
        self.log.info("%s stopped", self.service.name)
        self.stopped.set()

    async def _teardown(self) -> None:
        if self._tick_task is not None:
            await asyncio.gather(self._tick_task, return_exceptions=True)
        if self.ctx is not None:
            await self.ctx.bus.stop_consumers()
            try:
                await self.service.stop()
            except Exception:
                self.log.exception("%s: stop failed", self.service.name)
            await self.ctx.bus.close()
            await self.ctx.store.close()
        if self._http is not None:
            await self._http.cleanup()
            self._http = None


async def run(service: Service, runtime_settings: RuntimeSettings, *,
              stop: asyncio.Event | None = None, install_signals: bool = True) -> None:
    """Run ``service`` until SIGTERM/SIGINT (or ``stop`` is set), then shut down gracefully."""
    stop = stop or asyncio.Event()
    if install_signals:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    runner = ServiceRunner(service, runtime_settings)
    await runner.start()
    try:
        await stop.wait()
    finally:
        await runner.stop()


def main(factory: Callable[[S], Service], settings_cls: type[S], prefix: str) -> None:
    """Entry point of ``python -m colo_<name>``: settings from the environment (``COLO_*`` and
    ``<prefix>_*``), logging, run. Exits 2 printing every settings problem (or the reason of a
    :class:`StartRefused`, or :class:`colo.bus.JetStreamNotEnabled`), 0 after a clean stop.
    """
    errors: list[str] = []
    runtime: RuntimeSettings | None = None
    own: S | None = None
    try:
        runtime = load_runtime_settings()
        errors += link_file_problems(runtime)  # before anything starts: every bad file at once
    except SettingsError as exc:
        errors += exc.errors
    try:
        own = load_settings(settings_cls, prefix)
    except SettingsError as exc:
        errors += exc.errors
    if errors or runtime is None or own is None:
        print(f"{prefix}: {len(errors)} invalid settings:", file=sys.stderr)
        for e in errors:
            print(f"  - {e}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=runtime.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        service = factory(own)
    except ValueError as exc:  # a configuration the settings types alone cannot check (e.g. plugin arguments)
        print(f"{prefix}: invalid configuration: {exc}", file=sys.stderr)
        sys.exit(2)
    check = getattr(service, "runtime_problems", None)  # optional: settings that depend on COLO_* ones
    problems: list[str] = list(check(runtime)) if callable(check) else []
    if problems:  # before connecting: an unreachable server must not hide a configuration problem
        print(f"{prefix}: {len(problems)} invalid settings:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(run(service, runtime))
    except StartRefused as exc:
        print(f"{prefix}: refused to start: {exc}", file=sys.stderr)
        sys.exit(2)
    except JetStreamNotEnabled as exc:
        print(f"{prefix}: cannot start: {exc}", file=sys.stderr)
        sys.exit(2)
    except (http_auth.TokenFileError, LinkError) as exc:  # a file changed after the check above
        print(f"{prefix}: invalid settings: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(0)
