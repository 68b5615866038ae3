"""The API service's Prometheus metrics (docs/metrics.md "API"), defined at import time.

Every route the service registers is wrapped by :func:`instrumented` with its route *template* (the aiohttp path
as registered, e.g. ``/v1/pods/{namespace}/{name}``), never the concrete path: the ``route`` label is bounded by
the route table (:data:`colo_api.handlers.ROUTES` plus the OpenAPI, catch-all and dashboard routes). ``method``
is one of :data:`METHODS` and ``status_class`` one of :data:`STATUS_CLASSES`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from colo import telemetry

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other")
"""``method`` values: the HTTP methods, anything else ``other``."""
STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
"""``status_class`` values: the first digit of the status code."""
DURATION_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Request duration buckets, seconds: store reads take about a millisecond (bench/api_reads.py), a submission
that waits for admission up to its timeout; an event stream (``/v1/events``) counts once, when it ends."""

REQUESTS = telemetry.counter(
    "colo_api_requests_total", "HTTP requests answered, by route template, method and status class",
    ("route", "method", "status_class"))
REQUEST_DURATION = telemetry.histogram(
    "colo_api_request_duration_seconds", "HTTP request duration in seconds, by route template and method",
    ("route", "method"), buckets=DURATION_BUCKETS_S)


def status_class(status: int) -> str:
    """``"2xx"`` for 200..299 and so on; ``"5xx"`` for anything outside 100..599."""
    return f"{status // 100}xx" if 100 <= status < 600 else "5xx"


ZEROED_CLASSES = ("2xx", "4xx", "5xx")
"""Status classes exported at 0 for every route and its method from registration (1xx and 3xx are not
answered by the API's own routes)."""


def instrumented(route: str, handler: Handler, method: str = "") -> Handler:
    """``handler`` counted under ``route`` (the registered template): an HTTPException raised counts with its
    status, any other exception as 5xx (and is re-raised). With ``method`` (the route's, one of :data:`METHODS`)
    its :data:`ZEROED_CLASSES` series exist at 0 from now on, before the first request."""
    if method in METHODS:
        for cls in ZEROED_CLASSES:
            REQUESTS.labels(route, method, cls)

    async def timed(request: web.Request) -> web.StreamResponse:
        method = request.method if request.method in METHODS else "other"
        t0 = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            REQUESTS.labels(route, method, status_class(status)).inc()
            REQUEST_DURATION.labels(route, method).observe(time.perf_counter() - t0)

    timed.__name__ = getattr(handler, "__name__", "handler")
    return timed
