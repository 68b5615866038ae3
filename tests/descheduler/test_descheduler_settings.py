"""Descheduler settings from the environment: defaults (REFERENCE.md §6), overrides, every error listed."""

from __future__ import annotations

import pytest

from colo.settings import SettingsError, load_settings
from colo_descheduler.settings import ENV_PREFIX, DeschedulerSettings, WindowLimit


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({}, "high_thresholds", (75, 80)),
        ({}, "low_thresholds", (45, 55)),
        ({"COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU": "70"}, "high_thresholds", (70, 80)),
        ({"COLO_DESCHEDULER_LOW_THRESHOLDS__MEMORY": "40"}, "low_thresholds", (45, 40)),
        ({"COLO_DESCHEDULER_ENABLED": "0"}, "enabled", False),
        ({"COLO_DESCHEDULER_INTERVAL_S": "0"}, "interval_s", 0.0),
        ({}, "high_thresholds.pods", None),
        ({"COLO_DESCHEDULER_HIGH_THRESHOLDS__PODS": "50", "COLO_DESCHEDULER_LOW_THRESHOLDS__PODS": "30"},
         "high_thresholds.pods", 50),
        ({}, "node_window_limit", (2, 300.0)),
        ({}, "namespace_window_limit", (0, 300.0)),
        ({}, "global_window_limit", (0, 60.0)),
        ({"COLO_DESCHEDULER_NAMESPACE_WINDOW_LIMIT__MAX_MIGRATIONS": "5"}, "namespace_window_limit", (5, 300.0)),
        ({}, "workload_window_s", 300.0),
        ({}, "booking_ttl_s", 900.0),
        ({}, "evict_local_storage_pods", False),
        ({"COLO_DESCHEDULER_EVICT_LOCAL_STORAGE_PODS": "1"}, "evict_local_storage_pods", True),
        ({"COLO_DESCHEDULER_CONSECUTIVE_HIGH_ROUNDS": "1"}, "consecutive_high_rounds", 1),
    ],
    ids=["default-high", "default-low", "high-cpu-only", "low-memory-only", "disabled", "every-tick",
         "pods-off-by-default", "pods-threshold", "node-window-default", "namespace-window-off",
         "global-window-off", "namespace-window-set", "workload-window-default", "booking-ttl-default",
         "local-storage-kept-default", "local-storage-evicted", "n-1-first-detection"],
)
def test_settings(env: dict[str, str], field: str, value: object) -> None:
    s = load_settings(DeschedulerSettings, ENV_PREFIX, env=env)
    got: object = s
    for part in field.split("."):
        got = getattr(got, part)
    if isinstance(got, WindowLimit):
        got = (got.max_migrations, got.window_s)
    elif isinstance(value, tuple):
        got = (got.cpu, got.memory)  # type: ignore[attr-defined]
    assert got == value


def test_every_error_listed() -> None:
    env = {"COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU": "150", "COLO_DESCHEDULER_EVICTION_RATE_PER_S": "0",
           "COLO_DESCHEDULER_TYPO": "1", "COLO_DESCHEDULER_CONSECUTIVE_HIGH_ROUNDS": "0",
           "COLO_DESCHEDULER_NODE_WINDOW_LIMIT__WINDOW_S": "0", "COLO_DESCHEDULER_LOW_THRESHOLDS__PODS": "101"}
    with pytest.raises(SettingsError) as err:
        load_settings(DeschedulerSettings, ENV_PREFIX, env=env)
    text = str(err.value)
    for part in ("high_thresholds.cpu", "eviction_rate_per_s", "typo", "consecutive_high_rounds",
                 "node_window_limit.window_s", "low_thresholds.pods"):
        assert part in text


@pytest.mark.parametrize(
    ("env", "parts"),
    [
        ({"COLO_DESCHEDULER_LOW_THRESHOLDS__CPU": "80"}, ["low_thresholds.cpu (80) exceeds high_thresholds.cpu (75)"]),
        ({"COLO_DESCHEDULER_LOW_THRESHOLDS__MEMORY": "90", "COLO_DESCHEDULER_LOW_THRESHOLDS__CPU": "76"},
         ["low_thresholds.cpu (76)", "low_thresholds.memory (90)"]),
        ({"COLO_DESCHEDULER_HIGH_THRESHOLDS__PODS": "50"}, ["both be set or both be unset"]),
        ({"COLO_DESCHEDULER_HIGH_THRESHOLDS__PODS": "50", "COLO_DESCHEDULER_LOW_THRESHOLDS__PODS": "60"},
         ["low_thresholds.pods (60) exceeds high_thresholds.pods (50)"]),
    ],
    ids=["cpu-low-above-high", "both-listed", "pods-on-one-side", "pods-low-above-high"],
)
def test_threshold_consistency(env: dict[str, str], parts: list[str]) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(DeschedulerSettings, ENV_PREFIX, env=env)
    for part in parts:
        assert part in str(err.value)
