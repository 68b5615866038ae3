"""API service settings (environment prefix ``COLO_API``); every default is this project's choice."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

ENV_PREFIX = "COLO_API"
"""Environment prefix of the API service's own settings."""


class ApiSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings of the API service.

    Auth: requests to ``/v1/*`` need ``Authorization: Bearer <token>`` when a token is set (``token`` or the
    first line of ``token_file``); with neither, the API is open (a warning is logged at start). ``/healthz``,
    ``/readyz``, ``/metrics`` and the dashboard's static files are always open (the page asks for the token).
    """

    token: str = ""
    """The bearer token (``COLO_API_TOKEN``); "" = none (see ``token_file``)."""
    token_file: str = ""
    """A file whose first line is the bearer token (``COLO_API_TOKEN_FILE``); read at start. Setting both
    ``token`` and ``token_file`` is an error."""
    scheduler_url: str = ""
    """Base URL of the scheduler whose decisions ``/v1/explain`` reads (``GET /debug/pods/{uid}/decision``);
    "" = ``$COLO_SCHEDULER_URL``; neither = explain answers 503."""
    explain_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=120)] = 10.0
    """Timeout of one decision request to the scheduler, seconds."""
    sse_heartbeat_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 15.0
    """Period of the SSE comment line sent when no event came, seconds (keeps proxies from closing idle
    streams)."""
    sse_queue: Annotated[int, msgspec.Meta(ge=16, le=1_000_000)] = 4096
    """Events buffered per SSE client; a client further behind loses the oldest and gets a ``dropped`` event
    with the count (a slow browser never holds the bus)."""
    admission_wait_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 5.0
    """How long ``POST /v1/submit`` waits for admission's answers by default, seconds (``colo submit``'s
    default, :data:`colo.submission.DEFAULT_WAIT_S`); 0 = answer once published."""
    tick_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """Period of tick() under the wall clock, seconds (the service has no periodic work)."""
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 * 1024 * 1024)] = 4 * 1024 * 1024
    """Largest manifest ``POST /v1/submit`` accepts, bytes (4 MiB)."""

    def __post_init__(self) -> None:
        if self.token and self.token_file:
            raise ValueError("set token or token_file, not both")


def resolve_token(settings: ApiSettings) -> str:
    """The bearer token in force: ``token``, else the first line of ``token_file`` (stripped), else "".

    Raises ValueError when the token file cannot be read or its first line is empty."""
    if settings.token:
        return settings.token
    if not settings.token_file:
        return ""
    try:
        lines = Path(settings.token_file).read_text().splitlines()
    except OSError as exc:
        raise ValueError(f"token_file {settings.token_file}: cannot read: {exc.strerror or exc}") from exc
    token = lines[0].strip() if lines else ""
    if not token:
        raise ValueError(f"token_file {settings.token_file}: the first line is empty")
    return token
