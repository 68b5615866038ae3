"""Bearer-token auth (RFC 6750) of the ``/v1`` routes: ``Authorization: Bearer <token>``, compared in constant
time. A missing or wrong token gets 401 with ``WWW-Authenticate: Bearer realm="colo"`` and a JSON
:class:`~colo_api.views.ErrorBody` saying which of the two it was and how to send one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec
from aiohttp import web

from colo import http_auth
from colo_api.views import ErrorBody

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def unauthorized(error: str) -> web.Response:
    """The 401 answer."""
    return web.Response(status=401, body=msgspec.json.encode(ErrorBody(error=error)),
                        content_type="application/json",
                        headers={"WWW-Authenticate": 'Bearer realm="colo"'})


def problem(request: web.Request, token: str) -> str:
    """Why ``request`` is not authorized ("" when it is, or when no token is set): :func:`colo.http_auth.problem`."""
    return http_auth.problem(request, token, where="COLO_API_TOKEN or COLO_API_TOKEN_FILE")


def guarded(handler: Handler, token: str) -> Handler:
    """``handler`` behind the token check."""

    async def check(request: web.Request) -> web.StreamResponse:
        why = problem(request, token)
        if why:
            return unauthorized(why)
        return await handler(request)

    check.__name__ = getattr(handler, "__name__", "handler")
    return check
