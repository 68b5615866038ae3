"""colo.transient.is_transient: which errors mean a dependency is unavailable (one row per case)."""

from __future__ import annotations

import nats.errors
import nats.js.errors
import pytest
import redis.exceptions

from colo.bus import BusError, BusUnavailableError
from colo.codec import DecodeError
from colo.transient import is_transient


def _chained(outer: Exception, cause: Exception, *, context_only: bool = False, suppress: bool = False) -> Exception:
    try:
        try:
            raise cause
        except Exception as inner:
            if context_only:
                raise outer  # noqa: B904 — the implicit context is the point here
            raise outer from (None if suppress else inner)
    except Exception as exc:
        return exc


CASES = [
    ("redis connection refused", redis.exceptions.ConnectionError("Error 111 connecting"), True),
    ("redis closed by server", redis.exceptions.ConnectionError("Connection closed by server."), True),
    ("redis loading its data", redis.exceptions.BusyLoadingError("LOADING"), True),
    ("redis timeout", redis.exceptions.TimeoutError("Timeout reading"), True),
    ("redis read-only replica (failover)", redis.exceptions.ReadOnlyError("READONLY"), True),
    ("redis script error", redis.exceptions.ResponseError("ERR bad script"), False),
    ("nats timeout", nats.errors.TimeoutError(), True),
    ("nats no servers", nats.errors.NoServersError(), True),
    ("nats no responders", nats.errors.NoRespondersError(), True),
    ("jetstream no response", nats.js.errors.NoStreamResponseError(), True),
    ("jetstream 503 publish", BusUnavailableError("publish refused: status 503"), True),
    ("jetstream refusal", BusError("publish refused: maximum payload exceeded"), False),
    ("bus error from a timeout", _chained(BusError("3 of 3 publishes not acked"), TimeoutError()), True),
    ("error while handling an outage", _chained(RuntimeError("x"), redis.exceptions.ConnectionError(),
                                                context_only=True), True),
    ("raised from None", _chained(RuntimeError("x"), redis.exceptions.ConnectionError(), suppress=True), False),
    ("os connection reset", ConnectionResetError(104, "reset"), True),
    ("bad input", ValueError("cpu must be >= 0"), False),
    ("decode error", DecodeError("$.spec.uid: expected str"), False),
    ("a bug", KeyError("n1"), False),
]


@pytest.mark.parametrize(("exc", "transient"), [(e, t) for _, e, t in CASES], ids=[n for n, _, _ in CASES])
def test_is_transient(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_a_cycle_of_causes_ends() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert is_transient(a) is False
