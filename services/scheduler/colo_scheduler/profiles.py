"""The scheduling profile checked with the settings: every problem of ``settings.profile`` (unknown
plugins, missing extension points, bad weights, bad plugin arguments) found by building the profile
from the in-tree registry, as the scheduler will, and listed with the other settings problems.

:mod:`colo_scheduler.settings` stays plain data and imports nothing of the framework or the plugins;
this module sits above both (the import layers in pyproject.toml, ``[tool.importlinter]``).
"""

from __future__ import annotations

from colo_scheduler.framework.registry import ProfileError, build_profile
from colo_scheduler.plugins import new_in_tree_registry, profile_config
from colo_scheduler.settings import SchedulerSettings


def profile_problems(settings: SchedulerSettings) -> list[str]:
    """Every problem of ``settings.profile``, each prefixed ``profile: `` (empty when it builds):
    :func:`colo_scheduler.framework.registry.build_profile` with :func:`colo_scheduler.plugins.profile_config`
    and the in-tree registry."""
    try:
        build_profile(profile_config(settings), new_in_tree_registry(), settings)
    except ProfileError as exc:
        return [f"profile: {e}" for e in exc.errors]
    return []


class ValidatedSchedulerSettings(SchedulerSettings, kw_only=True, forbid_unknown_fields=True):
    """:class:`SchedulerSettings` whose construction also checks the profile (:func:`profile_problems`):
    raises :class:`colo.settings.SettingsError` listing the field problems and the profile problems
    together. The service loads its settings as this type (``python -m colo_scheduler``), so a bad
    profile stops it at start, exit 2, in one listing with every other problem."""

    def problems(self) -> list[str]:
        """Every problem of the fields (:meth:`SchedulerSettings.problems`) and of the profile."""
        return super().problems() + profile_problems(self)
