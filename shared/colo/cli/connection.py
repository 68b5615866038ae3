"""Where a ``colo`` command connects (docs/cli.md "Connecting").

Connection settings come from the common runtime settings (``COLO_NATS_URL``, ``COLO_REDIS_URL``,
``COLO_STORE_PREFIX``), see :mod:`colo.settings`. While ``colo up`` runs it records its servers in
:func:`endpoints_path`; the other commands use them when those variables are not set. Every command that
connects names the server it uses on stderr, and warns when it falls back to the standard ports on 127.0.0.1
because neither is set nor a ``colo up`` runs (:func:`connection`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from colo.cli.output import err_console
from colo.settings import RuntimeSettings, load_runtime_settings

CONNECT_ATTEMPTS = 3
"""Tries of an unreachable NATS server (0.5 s apart, 5 s connect timeout each) before a command gives up."""


def endpoints_path() -> Path:
    """Where a running ``colo up`` records its servers: ``$COLO_STATE_DIR`` or ``~/.cache/colo``, ``up.json``."""
    base = os.environ.get("COLO_STATE_DIR") or str(Path.home() / ".cache" / "colo")
    return Path(base) / "up.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _up_state() -> tuple[dict[str, object], bool]:
    """The record of ``colo up`` (``{}`` when none or unreadable) and whether its process still runs."""
    try:
        state = json.loads(endpoints_path().read_text())
        if not isinstance(state, dict):
            return {}, False
        return state, _alive(int(state["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return {}, False


def _up_field(state: dict[str, object], alive: bool, key: str) -> dict[str, str]:
    value = state.get(key)
    if not alive or not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def running_up_env() -> dict[str, str]:
    """The ``COLO_*`` connection variables of a running ``colo up``, or {} when none runs."""
    return _up_field(*_up_state(), "env")


def running_up_services() -> dict[str, str]:
    """Service name → HTTP base URL of a running ``colo up``, or {} when none runs."""
    return _up_field(*_up_state(), "services")


@dataclass(frozen=True)
class Connection:
    """Where a command connects and why.

    ``source`` is ``env`` (``COLO_NATS_URL`` or ``COLO_REDIS_URL`` set: neither is taken from
    ``colo up``), ``up`` (the servers a running ``colo up`` recorded) or ``default`` (nothing set,
    no ``colo up``: the standard ports on 127.0.0.1 of :class:`colo.settings.RuntimeSettings`).
    ``notices`` are the lines :func:`connection` prints on stderr; ``scheduler_url`` is
    ``$COLO_SCHEDULER_URL``, else the scheduler of the ``colo up`` whose servers are used, else "".
    """

    settings: RuntimeSettings
    source: str
    notices: tuple[str, ...]
    scheduler_url: str = ""


def resolve_connection(uses: tuple[str, ...], environ: dict[str, str] | None = None) -> Connection:
    """The settings for a command that talks to ``uses`` (``"nats"`` and/or ``"redis"``) and the
    notices naming each server and where its address came from.

    Raises SettingsError for invalid ``COLO_*`` values (as :func:`colo.settings.load_runtime_settings`).
    """
    env = dict(os.environ if environ is None else environ)
    explicit = [k for k in ("COLO_NATS_URL", "COLO_REDIS_URL") if env.get(k)]
    state, alive = _up_state()
    up_env = {} if explicit else _up_field(state, alive, "env")
    source = "env" if explicit else "up" if up_env else "default"
    if up_env:
        env.update(up_env)
    settings = load_runtime_settings(env)
    pid = state.get("pid")
    notices: list[str] = []
    for what in uses:
        var = "COLO_NATS_URL" if what == "nats" else "COLO_REDIS_URL"
        if what == "nats":
            shown = f"NATS {settings.nats_url}"
        else:
            shown = f"Redis {settings.redis_url} (key prefix {settings.store_prefix!r})"
        if source == "up":
            notices.append(f"using {shown}: the servers of colo up (pid {pid})")
        elif var in explicit:
            notices.append(f"using {shown} from {var}")
        elif source == "env":
            notices.append(f"warning: {var} is not set (only {', '.join(explicit)} is): using the default {shown}")
        else:
            stale = (f"the colo up recorded in {endpoints_path()} (pid {pid}) has stopped"
                     if state and not alive else "no colo up is running")
            notices.append(f"warning: {stale} and {var} is not set: falling back to the default {shown}, "
                           f"whatever server listens there (start `colo up`, or set {var})")
    up_scheduler = _up_field(state, alive, "services").get("scheduler", "") if source == "up" else ""
    return Connection(settings, source, tuple(notices), env.get("COLO_SCHEDULER_URL", "") or up_scheduler)


def connection(*uses: str) -> Connection:
    """:func:`resolve_connection` for this process, its notices printed on stderr."""
    conn = resolve_connection(uses)
    for line in conn.notices:
        style = "yellow" if line.startswith("warning") else "dim"
        err_console.print(f"[{style}]{escape(line)}[/]", highlight=False, soft_wrap=True)
    return conn


def _settings() -> RuntimeSettings:
    """The connection settings alone (no notices)."""
    return resolve_connection(()).settings
