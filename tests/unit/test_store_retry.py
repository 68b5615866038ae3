"""The resend policy behind Sentinel: a time window (not a count), copies that share the followed pools."""

from __future__ import annotations

import copy

import pytest
import redis.exceptions as redis_exc

import colo.store_retry
from colo.settings import RuntimeSettings, SettingsError
from colo.store_retry import FailoverRetry, store_retry


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(colo.store_retry, "RECONNECT_BACKOFF_S", (0.001, 0.01))


def _flaky(failures: int) -> tuple[list[int], object]:
    calls: list[int] = []

    async def do() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise redis_exc.ConnectionError("The previous master is now a slave")
        return "ok"

    return calls, do


async def _no_op(error: Exception) -> None:
    return None


async def test_resends_past_the_count_of_a_single_server_within_the_window() -> None:
    calls, do = _flaky(12)  # more failures than RECONNECT_RETRIES (8) allows
    assert await FailoverRetry(window_s=60.0).call_with_retry(do, _no_op) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 13


async def test_raises_the_last_error_once_the_window_has_passed() -> None:
    calls, do = _flaky(10_000)
    with pytest.raises(redis_exc.ConnectionError):
        await FailoverRetry(window_s=0.2).call_with_retry(do, _no_op)  # type: ignore[arg-type]
    assert 1 <= len(calls) < 10_000


def test_copies_share_the_followed_pools() -> None:
    retry = FailoverRetry(window_s=5.0)
    copied = copy.deepcopy(retry)
    sentinel_pool = object()
    retry.follow(sentinel_pool)  # type: ignore[arg-type]
    assert copied._pools == [sentinel_pool] and copied.window_s == 5.0


@pytest.mark.parametrize(("settings", "expected"), [
    pytest.param(RuntimeSettings(), False, id="single-server"),
    pytest.param(RuntimeSettings(redis_sentinels="127.0.0.1:26379"), True, id="sentinel"),
])
def test_policy_follows_the_settings(settings: RuntimeSettings, expected: bool) -> None:
    assert isinstance(store_retry(settings, 8), FailoverRetry) is expected


def test_window_must_be_positive() -> None:
    with pytest.raises(SettingsError, match="redis_failover_window_s"):
        RuntimeSettings(redis_failover_window_s=0)
