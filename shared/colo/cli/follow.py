"""Follow a NATS subject from the command line: one written line per message until a count or Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

from colo.cli.connection import CONNECT_ATTEMPTS
from colo.connections import nats_options, nats_servers
from colo.settings import RuntimeSettings


async def follow_subject(nats_url: str, subject: str, count: int, line_of: Callable[[Any, int], str],
                         write: Callable[[str], None], quiet: bool = False,
                         settings: RuntimeSettings | None = None,
                         on_subscribed: Callable[[], None] | None = None) -> int:
    """Subscribe to ``subject`` and ``write(line_of(msg, n))`` for the n-th message (1-based) until ``count``
    messages (0 = until SIGINT/SIGTERM); later messages are not written. ``quiet`` silences the client's
    connection-error callbacks (the caller reports a final failure once); ``settings`` gives the link's
    credentials and TLS (:func:`colo.connections.nats_options`); ``on_subscribed`` is called once the
    subscription is in place (``colo events`` says it is waiting). Returns the number written.

    Raises what ``nats.connect`` raises when the server cannot be reached."""
    import nats

    async def no_report(exc: Exception) -> None:
        pass

    options: dict[str, Any] = {"reconnect_time_wait": 0.5, "error_cb": no_report} if quiet else {}
    nc = await nats.connect(servers=nats_servers(nats_url), connect_timeout=5, max_reconnect_attempts=CONNECT_ATTEMPTS,
                            **options, **nats_options(settings))
    done = asyncio.Event()
    seen = 0

    async def on_msg(msg: Any) -> None:
        nonlocal seen
        if count and seen >= count:
            return
        seen += 1
        write(line_of(msg, seen))
        if count and seen >= count:
            done.set()

    sub = await nc.subscribe(subject, cb=on_msg)
    if on_subscribed is not None:
        await nc.flush()  # the server has the subscription: a message published from now on is seen
        on_subscribed()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, done.set)
    try:
        await done.wait()
        await sub.unsubscribe()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await nc.drain()
    return seen
