"""What counts as a dependency being unavailable: errors retried without limit, never dead-lettered.

A handler that fails because NATS or Redis is down (restarting, loading its data, failing over, unreachable)
did nothing wrong with its message: the bus naks such a message with a growing delay and never counts the
failure toward the dead-letter limit (:mod:`colo.subscription`, docs/library.md "Bus"). Everything else —
a bug, a refusal, bad input — is *permanent* and dead-lettered after the usual deliveries.

The errors of both clients are listed here, and only here, so that every service classifies an outage the
same way. :func:`is_transient` follows ``__cause__`` / ``__context__``: a :class:`colo.bus.BusError` raised
``from`` a NATS timeout is transient; one raised for a refused publish is not.
"""

from __future__ import annotations

import nats.errors
import nats.js.errors
import redis.exceptions as redis_exc

__all__ = ["TRANSIENT_ERRORS", "TRANSIENT_REPLIES", "TransientError", "is_transient"]


class TransientError(Exception):
    """Base (or mixin) of Colo's own errors that mean "a dependency is unavailable, try again later"
    (e.g. a JetStream publish answered with status 503, no responders)."""


TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    TransientError,
    # Redis: unreachable or restarting (incl. BusyLoadingError while it loads its AOF/RDB), a read-only
    # replica or a primary that is down while Sentinel fails over, a cluster slot moving
    redis_exc.ConnectionError,
    redis_exc.TimeoutError,
    redis_exc.ReadOnlyError,
    redis_exc.TryAgainError,
    redis_exc.ClusterDownError,
    # Redis refusing writes for its own state, not the command's: maxmemory reached with noeviction (OOM),
    # a replica cut off from its primary (MASTERDOWN); min-replicas-to-write unmet is TRANSIENT_REPLIES'
    redis_exc.OutOfMemoryError,
    redis_exc.MasterDownError,
    # NATS: disconnected or reconnecting, no server reachable, no JetStream responder (server restarting,
    # stream leader being elected), request or flush timeouts (nats.errors.TimeoutError is an asyncio one)
    nats.errors.NoServersError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
    # the OS: connection refused/reset; asyncio timeouts around a dependency's call
    ConnectionError,
    TimeoutError,
)
"""Exception types that mean a dependency is unavailable (see the module docstring)."""

TRANSIENT_REPLIES: tuple[str, ...] = ("NOREPLICAS",)
"""Error codes of Redis replies (a :class:`redis.exceptions.ResponseError` redis-py has no class for) that mean
the server refuses writes for now: ``NOREPLICAS``, fewer replicas than ``min-replicas-to-write`` (Redis
documentation "Replication", "Allow writes only with N attached replicas"; also raised inside a script)."""

_MAX_CHAIN = 8
"""Causes followed at most (a cycle of causes must not loop)."""


def is_transient(exc: BaseException) -> bool:
    """True when ``exc``, or one of its causes (``__cause__``, else ``__context__``, up to 8 deep), is one of
    :data:`TRANSIENT_ERRORS` or a Redis reply with a code of :data:`TRANSIENT_REPLIES`. Never raises."""
    seen: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if seen is None:
            return False
        if isinstance(seen, TRANSIENT_ERRORS):
            return True
        if isinstance(seen, redis_exc.ResponseError) and str(seen).startswith(TRANSIENT_REPLIES):
            return True
        if seen.__cause__ is not None:
            seen = seen.__cause__
        else:  # an error raised while handling an outage's error, unless raised ``from None``
            seen = None if seen.__suppress_context__ else seen.__context__
    return False
