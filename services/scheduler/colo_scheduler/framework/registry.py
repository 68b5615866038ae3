"""Plugin registry and profiles: which plugins run at which extension point, with which weights
and typed arguments (Kubernetes KubeSchedulerProfile / PluginConfig)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from colo_scheduler.framework.interface import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from colo_scheduler.settings import SchedulerSettings

MAX_NODE_SCORE = 100
"""Highest score a Score plugin gives a node (Kubernetes framework.MaxNodeScore)."""

MAX_TOTAL_SCORE = 2**63 - 1
"""Highest weighted total over all Score plugins: the totals are int64 (Kubernetes framework.MaxTotalScore,
math.MaxInt64; its framework refuses a profile whose weights could overflow it)."""

class ProfileError(ValueError):
    """An invalid profile; ``errors`` lists every problem, the message joins them."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__("invalid scheduler profile: " + "; ".join(self.errors))


PluginFactory = Callable[[Any, SchedulerSettings], Plugin]
"""Builds a plugin from its typed arguments (an instance of the registered args type, or None
when the plugin takes none) and the scheduler settings."""


@dataclass(frozen=True, slots=True)
class _Entry:
    factory: PluginFactory
    args_type: type[msgspec.Struct] | None
    default_args: Callable[[SchedulerSettings], msgspec.Struct] | None


class Registry:
    """Plugin name → factory and argument type. :meth:`register` refuses duplicates (ValueError)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def register(self, name: str, factory: PluginFactory, args_type: type[msgspec.Struct] | None = None,
                 default_args: Callable[[SchedulerSettings], msgspec.Struct] | None = None) -> None:
        """Add a factory. ``args_type`` is a msgspec Struct (fields with defaults; an optional
        ``problems() -> list[str]`` method adds checks); ``default_args(settings)`` gives the
        arguments when the profile names none (else ``args_type()``).
        Raises ValueError if ``name`` is already registered."""
        if name in self._entries:
            raise ValueError(f"plugin {name!r} is already registered")
        self._entries[name] = _Entry(factory, args_type, default_args)

    def names(self) -> list[str]:
        """Registered plugin names, in registration order."""
        return list(self._entries)

    def args_type(self, name: str) -> type[msgspec.Struct] | None:
        """The argument type of plugin ``name`` (None when it takes none); KeyError when unknown."""
        return self._entries[name].args_type

    def build(self, name: str, settings: SchedulerSettings, args: object = None) -> Plugin:
        """Instantiate plugin ``name`` with ``args`` (a mapping, an args instance or None for defaults).

        Raises KeyError naming the known plugins when unknown, ValueError listing every
        problem of the arguments."""
        try:
            entry = self._entries[name]
        except KeyError:
            raise KeyError(f"unknown plugin {name!r}; known: {', '.join(self._entries)}") from None
        typed = self._typed_args(name, entry, settings, args)
        plugin = entry.factory(typed, settings)
        if plugin.name != name:
            raise ValueError(f"factory for {name!r} built a plugin named {plugin.name!r}")
        return plugin

    @staticmethod
    def _typed_args(name: str, entry: _Entry, settings: SchedulerSettings, args: object) -> object:
        if entry.args_type is None:
            if args is not None:
                raise ValueError(f"plugin {name!r} takes no arguments")
            return None
        if args is None:
            typed = entry.default_args(settings) if entry.default_args else entry.args_type()
        elif isinstance(args, entry.args_type):
            typed = args
        elif isinstance(args, Mapping):
            base = msgspec.to_builtins(entry.default_args(settings)) if entry.default_args else {}
            try:
                typed = msgspec.convert({**base, **args}, entry.args_type)
            except msgspec.ValidationError as exc:
                raise ValueError(f"arguments of plugin {name!r}: {exc}") from None
        else:
            raise ValueError(f"arguments of plugin {name!r} must be a mapping, got {type(args).__name__}")
        problems = getattr(typed, "problems", None)
        found: list[str] = problems() if callable(problems) else []
        if found:
            raise ValueError(f"arguments of plugin {name!r}: " + "; ".join(found))
        return typed


@dataclass(frozen=True)
class ProfileConfig:
    """Enabled plugins per extension point (names), score weights (name → weight ≥ 0) and per-plugin
    arguments (name → mapping or args instance; Kubernetes ``pluginConfig``).

    ``percentage_of_nodes_to_score`` (1..100): look for feasible nodes in a rotating window of
    that share of the nodes (at least ``min_feasible_nodes_to_find`` feasible ones, else all
    nodes), as the Kubernetes scheduler's percentageOfNodesToScore; 100 = every node
    (the default: a vectorised pass over all nodes costs little, bench/scheduler_scaling.py).
    """

    queue_sort: str = "PrioritySort"
    pre_filter: tuple[str, ...] = ()
    filter: tuple[str, ...] = ()
    post_filter: tuple[str, ...] = ()
    pre_score: tuple[str, ...] = ()
    score: dict[str, int] = field(default_factory=dict)
    reserve: tuple[str, ...] = ()
    permit: tuple[str, ...] = ()
    pre_bind: tuple[str, ...] = ()
    bind: str = ""
    plugin_args: dict[str, object] = field(default_factory=dict)
    percentage_of_nodes_to_score: int = 100
    min_feasible_nodes_to_find: int = 100


@dataclass
class Profile:
    """Instantiated plugins per extension point; one instance per plugin name is shared by its points."""

    queue_sort: QueueSortPlugin
    pre_filter: list[PreFilterPlugin]
    filter: list[FilterPlugin]
    score: list[tuple[ScorePlugin, int]]
    reserve: list[ReservePlugin]
    plugins: dict[str, Plugin]
    post_filter: list[PostFilterPlugin] = field(default_factory=list)
    pre_score: list[PreScorePlugin] = field(default_factory=list)
    permit: list[PermitPlugin] = field(default_factory=list)
    pre_bind: list[PreBindPlugin] = field(default_factory=list)
    bind: BindPlugin | None = None
    percentage_of_nodes_to_score: int = 100
    min_feasible_nodes_to_find: int = 100


def build_profile(config: ProfileConfig, registry: Registry, settings: SchedulerSettings) -> Profile:
    """Instantiate every plugin named in ``config`` once, with its validated arguments, and check it
    implements its extension points.

    Raises :class:`ProfileError` (a ValueError) listing every problem (unknown plugin, bad arguments, arguments for a
    plugin not enabled, missing extension point, negative weight, weights whose Σ × 100 overflows
    int64, percentage out of range).
    """
    errors: list[str] = []
    plugins: dict[str, Plugin] = {}
    broken: set[str] = set()  # named at some point but not buildable: reported once

    def get(name: str, proto: type, point: str) -> Any:
        if name in broken:
            return None
        if name not in plugins:
            try:
                plugins[name] = registry.build(name, settings, config.plugin_args.get(name))
            except (KeyError, ValueError) as exc:
                errors.append(str(exc).strip('"'))
                broken.add(name)
                return None
        p = plugins[name]
        if not isinstance(p, proto):
            errors.append(f"plugin {name!r} does not implement {point}")
            return None
        return p

    qs = get(config.queue_sort, QueueSortPlugin, "QueueSort")
    pre = [p for n in config.pre_filter if (p := get(n, PreFilterPlugin, "PreFilter"))]
    flt = [p for n in config.filter if (p := get(n, FilterPlugin, "Filter"))]
    post = [p for n in config.post_filter if (p := get(n, PostFilterPlugin, "PostFilter"))]
    pre_score = [p for n in config.pre_score if (p := get(n, PreScorePlugin, "PreScore"))]
    scr: list[tuple[ScorePlugin, int]] = []
    for n, w in config.score.items():
        if w < 0:
            errors.append(f"score weight of {n!r} must be >= 0, got {w}")
        if (p := get(n, ScorePlugin, "Score")) is not None:
            scr.append((p, w))
    if sum(max(w, 0) for w in config.score.values()) * MAX_NODE_SCORE > MAX_TOTAL_SCORE:
        errors.append(f"score weights sum to {sum(config.score.values())}: the total score of Score plugins could "
                      f"overflow int64 (Σ weight × {MAX_NODE_SCORE} must be <= {MAX_TOTAL_SCORE})")
    res = [p for n in config.reserve if (p := get(n, ReservePlugin, "Reserve"))]
    permit = [p for n in config.permit if (p := get(n, PermitPlugin, "Permit"))]
    pre_bind = [p for n in config.pre_bind if (p := get(n, PreBindPlugin, "PreBind"))]
    bind = get(config.bind, BindPlugin, "Bind") if config.bind else None
    for name in config.plugin_args:
        if name in broken:
            continue
        if name not in plugins and name in registry.names():
            errors.append(f"arguments given for plugin {name!r}, which no extension point enables")
        elif name not in registry.names():
            errors.append(f"arguments given for unknown plugin {name!r}")
    if not 1 <= config.percentage_of_nodes_to_score <= 100:
        errors.append("percentage_of_nodes_to_score must be within 1..100")
    if config.min_feasible_nodes_to_find < 1:
        errors.append("min_feasible_nodes_to_find must be >= 1")
    if errors or qs is None:
        raise ProfileError(errors)
    return Profile(qs, pre, flt, scr, res, plugins, post, pre_score, permit, pre_bind, bind,
                   config.percentage_of_nodes_to_score, config.min_feasible_nodes_to_find)
