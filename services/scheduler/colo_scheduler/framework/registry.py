"""Plugin registry and profile: which plugins run at which extension point, with which weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from colo_scheduler.framework.interface import (
    FilterPlugin,
    Plugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from colo_scheduler.settings import SchedulerSettings

PluginFactory = Callable[[SchedulerSettings], Plugin]
"""Builds a plugin from the scheduler settings."""


class Registry:
    """Plugin name → factory. :meth:`register` refuses duplicates (ValueError)."""

    def __init__(self) -> None:
        self._factories: dict[str, PluginFactory] = {}

    def register(self, name: str, factory: PluginFactory) -> None:
        """Add a factory; raises ValueError if ``name`` is already registered."""
        if name in self._factories:
            raise ValueError(f"plugin {name!r} is already registered")
        self._factories[name] = factory

    def names(self) -> list[str]:
        """Registered plugin names, in registration order."""
        return list(self._factories)

    def build(self, name: str, settings: SchedulerSettings) -> Plugin:
        """Instantiate plugin ``name``; raises KeyError naming the known plugins when unknown."""
        try:
            factory = self._factories[name]
        except KeyError:
            raise KeyError(f"unknown plugin {name!r}; known: {', '.join(self._factories)}") from None
        plugin = factory(settings)
        if plugin.name != name:
            raise ValueError(f"factory for {name!r} built a plugin named {plugin.name!r}")
        return plugin


@dataclass(frozen=True)
class ProfileConfig:
    """Enabled plugins per extension point (names), and score weights (name → weight ≥ 0)."""

    queue_sort: str = "PrioritySort"
    pre_filter: tuple[str, ...] = ()
    filter: tuple[str, ...] = ()
    score: dict[str, int] = field(default_factory=dict)
    reserve: tuple[str, ...] = ()


@dataclass
class Profile:
    """Instantiated plugins per extension point; one instance per plugin name is shared by its points."""

    queue_sort: QueueSortPlugin
    pre_filter: list[PreFilterPlugin]
    filter: list[FilterPlugin]
    score: list[tuple[ScorePlugin, int]]
    reserve: list[ReservePlugin]
    plugins: dict[str, Plugin]


def build_profile(config: ProfileConfig, registry: Registry, settings: SchedulerSettings) -> Profile:
    """Instantiate every plugin named in ``config`` once and check it implements its extension points.

    Raises ValueError listing every problem (unknown plugin, missing extension point, negative weight).
    """
    errors: list[str] = []
    plugins: dict[str, Plugin] = {}

    def get(name: str, proto: type, point: str) -> Plugin | None:
        if name not in plugins:
            try:
                plugins[name] = registry.build(name, settings)
            except (KeyError, ValueError) as exc:
                errors.append(str(exc))
                return None
        p = plugins[name]
        if not isinstance(p, proto):
            errors.append(f"plugin {name!r} does not implement {point}")
            return None
        return p

    qs = get(config.queue_sort, QueueSortPlugin, "QueueSort")
    pre = [p for n in config.pre_filter if (p := get(n, PreFilterPlugin, "PreFilter"))]
    flt = [p for n in config.filter if (p := get(n, FilterPlugin, "Filter"))]
    scr: list[tuple[Plugin, int]] = []
    for n, w in config.score.items():
        if w < 0:
            errors.append(f"score weight of {n!r} must be >= 0, got {w}")
        if (p := get(n, ScorePlugin, "Score")) is not None:
            scr.append((p, w))
    res = [p for n in config.reserve if (p := get(n, ReservePlugin, "Reserve"))]
    if errors or qs is None:
        raise ValueError("invalid scheduler profile: " + "; ".join(errors))
    return Profile(qs, pre, flt, scr, res, plugins)  # type: ignore[arg-type]
