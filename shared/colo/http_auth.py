"""Bearer-token auth (RFC 6750) of a service's HTTP endpoints: ``Authorization: Bearer <token>``, compared in
constant time; the token comes from the file named by ``COLO_HTTP_TOKEN_FILE`` (docs/security.md).

A missing or wrong token gets 401 with ``WWW-Authenticate: Bearer realm="colo"`` and a JSON body
``{"error": "..."}`` saying which of the two it was.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class TokenFileError(ValueError):
    """The token file cannot be read or is empty (the message names the file)."""


def read_token(path: str) -> str:
    """The first line of ``path`` stripped ("" when ``path`` is ""). Raises TokenFileError when the file
    cannot be read or holds no token."""
    if not path:
        return ""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise TokenFileError(f"http_token_file: cannot read {path}: {exc.strerror or exc}") from exc
    token = lines[0].strip() if lines else ""
    if not token:
        raise TokenFileError(f"http_token_file: {path} is empty")
    return token


def problem(request: web.Request, token: str, where: str = "COLO_HTTP_TOKEN_FILE") -> str:
    """Why ``request`` is not authorized by ``token`` ("" when it is, or when ``token`` is "")."""
    if not token:
        return ""
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if not header:
        return (f"missing bearer token: send the header 'Authorization: Bearer <token>' (the token the service "
                f"was started with: {where})")
    if scheme.lower() != "bearer" or not given.strip():
        return "the Authorization header is not 'Bearer <token>'"
    # a header value aiohttp could not decode as UTF-8 holds surrogates: encoded back the same way, not a 500
    if not hmac.compare_digest(given.strip().encode("utf-8", "surrogateescape"), token.encode()):
        return "invalid bearer token"
    return ""


def unauthorized(error: str) -> web.Response:
    """The 401 answer with ``error`` as its JSON body."""
    return web.json_response({"error": error}, status=401, headers={"WWW-Authenticate": 'Bearer realm="colo"'})


def middleware(token: str, open_paths: Collection[str]) -> Callable[..., Awaitable[web.StreamResponse]]:
    """An aiohttp middleware requiring ``token`` on every route but those whose path (as registered,
    e.g. ``/static/{file}``) is in ``open_paths``."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        info = request.match_info.route.resource
        path = info.canonical if info is not None else request.path
        if path not in open_paths:
            why = problem(request, token)
            if why:
                return unauthorized(why)
        return await handler(request)

    return check
