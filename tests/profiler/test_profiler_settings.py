"""Profiler settings from the environment: defaults (REFERENCE.md §7), overrides, every error listed."""

from __future__ import annotations

import pytest

from colo.settings import SettingsError, load_settings
from colo_profiler.settings import ENV_PREFIX, ProfilerSettings


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({}, "cpu_half_life_s", 43200.0),
        ({}, "memory_half_life_s", 86400.0),
        ({}, "cold_start_s", 86400.0),
        ({}, "expiry_s", 1800.0),
        ({"COLO_PROFILER_MARGIN_PERCENT": "15"}, "margin_percent", 15),
        ({"COLO_PROFILER_CPU_PERCENTILE": "0.9"}, "cpu_percentile", 0.9),
    ],
    ids=["cpu-half-life-12h", "memory-half-life-24h", "cold-start-24h", "expiry-30min", "margin", "percentile"],
)
def test_settings(env: dict[str, str], field: str, value: object) -> None:
    assert getattr(load_settings(ProfilerSettings, ENV_PREFIX, env=env), field) == value


def test_every_error_listed() -> None:
    env = {"COLO_PROFILER_CPU_PERCENTILE": "1.5", "COLO_PROFILER_EXPIRY_S": "-1", "COLO_PROFILER_TYPO": "x"}
    with pytest.raises(SettingsError) as err:
        load_settings(ProfilerSettings, ENV_PREFIX, env=env)
    text = str(err.value)
    for part in ("cpu_percentile", "expiry_s", "typo"):
        assert part in text
