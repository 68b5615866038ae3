"""Descheduler settings from the environment: defaults (REFERENCE.md §6), overrides, every error listed."""

from __future__ import annotations

import pytest

from colo.settings import SettingsError, load_settings
from colo_descheduler.settings import ENV_PREFIX, DeschedulerSettings


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({}, "high_thresholds", (75, 80)),
        ({}, "low_thresholds", (45, 55)),
        ({"COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU": "70"}, "high_thresholds", (70, 80)),
        ({"COLO_DESCHEDULER_LOW_THRESHOLDS__MEMORY": "40"}, "low_thresholds", (45, 40)),
        ({"COLO_DESCHEDULER_ENABLED": "0"}, "enabled", False),
        ({"COLO_DESCHEDULER_INTERVAL_S": "0"}, "interval_s", 0.0),
    ],
    ids=["default-high", "default-low", "high-cpu-only", "low-memory-only", "disabled", "every-tick"],
)
def test_settings(env: dict[str, str], field: str, value: object) -> None:
    s = load_settings(DeschedulerSettings, ENV_PREFIX, env=env)
    got = getattr(s, field)
    if isinstance(value, tuple):
        got = (got.cpu, got.memory)
    assert got == value


def test_every_error_listed() -> None:
    env = {"COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU": "150", "COLO_DESCHEDULER_EVICTION_RATE_PER_S": "0",
           "COLO_DESCHEDULER_TYPO": "1"}
    with pytest.raises(SettingsError) as err:
        load_settings(DeschedulerSettings, ENV_PREFIX, env=env)
    text = str(err.value)
    for part in ("high_thresholds.cpu", "eviction_rate_per_s", "typo"):
        assert part in text
