"""The API service (``python -m colo_api``): the ``/v1`` REST routes of :mod:`colo_api.handlers` behind the
bearer token of :mod:`colo_api.auth`, the OpenAPI document at ``/v1/openapi.json`` and the web dashboard at
``/`` (static files of ``colo_api/static``), on the runtime's HTTP server next to ``/healthz``, ``/readyz``,
``/metrics`` and ``/debug/state``. It holds no state of its own: every answer is read from the store and the
bus when asked; it subscribes to no durable consumer (the event stream uses core-NATS subscriptions, one per
client)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from colo import http_auth
from colo.runtime import ServiceContext
from colo.settings import RuntimeSettings
from colo_api import auth, openapi
from colo_api.handlers import ROUTES, Handlers, checked
from colo_api.metrics import instrumented
from colo_api.settings import ApiSettings, resolve_token

STATIC = Path(__file__).parent / "static"
"""The dashboard's files (HTML, JS, CSS; no build step, nothing fetched from elsewhere)."""

_CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


class ApiService:
    """The API service; see module docstring."""

    name = "api"

    def __init__(self, settings: ApiSettings | None = None) -> None:
        self.settings = settings or ApiSettings()
        self.tick_interval_s = self.settings.tick_interval_s
        self.token = resolve_token(self.settings)  # ValueError → exit 2 (colo.runtime.main)
        self.handlers: Handlers | None = None
        self._document = openapi.render().encode()

    def runtime_problems(self, runtime: RuntimeSettings) -> list[str]:
        """No settings depend on the shared ones."""
        return []

    async def start(self, ctx: ServiceContext) -> None:
        """Register the routes (no subscriptions)."""
        self.handlers = h = Handlers(self.settings, ctx.store, ctx.bus)
        # the services' common token (COLO_HTTP_TOKEN_FILE) guards /v1 too unless the API has its own
        h.scheduler_token = http_auth.read_token(ctx.settings.http_token_file)  # the scheduler's /debug asks it
        self.token = self.token or h.scheduler_token
        if not self.token:
            ctx.log.warning("api: no token set (COLO_API_TOKEN / COLO_API_TOKEN_FILE / COLO_HTTP_TOKEN_FILE): /v1 "
                            "is open to anyone who reaches %s", ctx.settings.http_host)
        # public=True: the guard answers with the API's own 401 body (or the route holds no data)
        routes = [(method, path, auth.guarded(checked(getattr(h, attr), query), self.token), True)
                  for method, path, attr, query in ROUTES]
        routes += [("GET", "/v1/openapi.json", self.openapi, True), ("*", "/v1/{tail:.*}", h.not_found, False),
                   ("GET", "/", self.index, True), ("GET", "/static/{file}", self.static, True)]
        for method, path, handler, public in routes:
            ctx.add_route(method, path, instrumented(path, handler, method), public=public)

    async def openapi(self, _: web.Request) -> web.Response:
        """The OpenAPI document (open: it holds no data)."""
        return web.Response(body=self._document, content_type="application/json")

    async def index(self, _: web.Request) -> web.Response:
        """The dashboard page."""
        return web.Response(body=(STATIC / "index.html").read_bytes(), content_type="text/html")

    async def static(self, request: web.Request) -> web.Response:
        """One file of the dashboard (names of ``colo_api/static`` only)."""
        name = request.match_info["file"]
        path = STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file() or path.suffix not in _CONTENT_TYPES:
            raise web.HTTPNotFound()
        return web.Response(body=path.read_bytes(), content_type=_CONTENT_TYPES[path.suffix],
                            headers={"Cache-Control": "no-cache"})

    async def tick(self, now: float) -> dict[str, float]:
        """Nothing periodic."""
        return {}

    async def stop(self) -> None:
        """End the open event streams (before the runtime closes the bus and the HTTP server)."""
        if self.handlers is not None:
            self.handlers.streams.close()

    def ready(self) -> bool:
        """Ready once the routes are in place."""
        return self.handlers is not None

    def debug(self) -> dict[str, object]:
        """Settings in force (the token is never shown, only whether one is set)."""
        return {"auth": bool(self.token), "scheduler_url": self.handlers.scheduler_url() if self.handlers else "",
                "routes": [f"{m} {p}" for m, p, _, _ in ROUTES]}
