"""The base of the slo-manager's settings structs and their shared range check."""

from __future__ import annotations

import msgspec

from colo.settings import SettingsError


class SettingsStruct(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the settings structs: frozen, keyword-only, unknown fields rejected."""

    def problems(self) -> list[str]:
        """Every constraint violation of this struct (empty when valid)."""
        return []

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise SettingsError(problems, what=type(self).__name__)


def percent_problem(problems: list[str], name: str, value: int | None, hi: int = 100) -> None:
    """Append a problem to ``problems`` when ``value`` (not None) is outside 0..``hi``."""
    if value is not None and not 0 <= value <= hi:
        problems.append(f"{name} must be within 0..{hi}, got {value}")
