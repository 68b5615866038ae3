"""Composing the slo-manager's configuration from its layers, and what a change means. Pure (no NATS).

Layers, lowest first: defaults, the YAML file (``COLO_SLO_MANAGER_CONFIG``), the
``COLO_SLO_MANAGER_*`` environment variables — together the *base*, exactly what
:func:`colo.settings.load_settings` gives at start — and on top the key-value configuration
(YAML or JSON of the same shape). Mappings merge field by field (a KV value of
``{batch: {cpu_policy: maxUsageRequest}}`` keeps every other batch field of the base); lists
(``profiles``, ``node_pools``) replace whole. The result is validated as a whole and every
problem listed (:class:`colo.settings.SettingsError`).

``tick_interval_s`` and ``config_reload`` are not reloadable: a new configuration keeps the
running values and names the differing fields in ``restart_required``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import yaml

from colo.settings import SettingsError, build_settings, deep_merge, load_settings, non_string_keys
from colo_slo_manager.settings import ENV_PREFIX, SloManagerSettings

MAX_VALUES = 200_000
"""Most values (mappings, lists, scalars, keys) a configuration may hold after YAML aliases are
expanded; a 1 MB value (NATS's default max payload) of plain YAML holds about 100,000."""

NOT_RELOADABLE = ("tick_interval_s", "config_reload")
"""Settings read once at start: the tick loop's period and the configuration sources themselves."""


@dataclass(frozen=True)
class Composed:
    """A validated configuration: ``settings`` to put in force, its ``version``, and the not-reloadable
    fields whose new value waits for a restart."""

    settings: SloManagerSettings
    version: str
    restart_required: tuple[str, ...] = ()


def version_of(settings: SloManagerSettings) -> str:
    """First 16 hex digits of the sha256 of ``settings`` as sorted JSON: equal settings, equal version."""
    encoded = msgspec.json.encode(msgspec.to_builtins(settings), order="sorted")
    return hashlib.sha256(encoded).hexdigest()[:16]


def parse_overlay(text: bytes | str, where: str) -> dict[str, Any]:
    """The mapping in ``text`` (YAML, so JSON too); empty text is an empty mapping.

    Raises SettingsError (one entry) when it does not parse or is not a mapping.
    """
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SettingsError([f"{where}: invalid YAML/JSON: {exc}"], what=f"configuration ({where})") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise SettingsError([f"{where}: top level must be a mapping, got {type(loaded).__name__}"],
                            what=f"configuration ({where})")
    size = _expanded_size(loaded, {})
    if size > MAX_VALUES:
        raise SettingsError([f"{where}: {size} values after expanding YAML aliases, at most {MAX_VALUES}"],
                            what=f"configuration ({where})")
    bad = non_string_keys(loaded)
    if bad:
        raise SettingsError([f"{where}: {b}" for b in bad], what=f"configuration ({where})")
    return loaded


def _expanded_size(value: Any, seen: dict[int, int]) -> int:
    """How many values ``value`` holds once YAML aliases are expanded (shared objects counted per
    reference, each computed once: a few hundred bytes of nested aliases can stand for 10⁹ values)."""
    if not isinstance(value, (dict, list)):
        return 1
    known = seen.get(id(value))
    if known is None:
        items = value.values() if isinstance(value, dict) else value
        known = 1 + len(value) + sum(_expanded_size(v, seen) for v in items)
        seen[id(value)] = known
    return known


def load_base(path: str | None, env: Mapping[str, str]) -> SloManagerSettings:
    """Defaults, the YAML file at ``path`` (none when None), then ``COLO_SLO_MANAGER_*`` from ``env``.

    Raises SettingsError listing every problem, each prefixed by the file path when there is one.
    A file that is not UTF-8 or has a non-string key is one problem (checked here first: the
    generic loader reads text and expects string keys).
    """
    env = {k: v for k, v in env.items() if k != f"{ENV_PREFIX}_CONFIG"}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                parse_overlay(fh.read(), path)
        except OSError:
            pass  # reported, with the other problems, by load_settings
    try:
        return load_settings(SloManagerSettings, ENV_PREFIX, env=env, yaml_path=path)
    except SettingsError as exc:
        errors = exc.errors if path is None else [e if e.startswith(path) else f"{path}: {e}" for e in exc.errors]
        raise SettingsError(errors, what=f"configuration ({path or 'environment'})") from exc


def overlay(base: SloManagerSettings, data: Mapping[str, Any], where: str) -> SloManagerSettings:
    """``base`` with the mapping ``data`` merged over it, validated as a whole.

    Raises SettingsError listing every problem, each prefixed by ``where``.
    """
    if not data:
        return base
    merged = deep_merge(msgspec.to_builtins(base), data)
    try:
        return build_settings(SloManagerSettings, merged, what=f"configuration ({where})")
    except SettingsError as exc:
        raise SettingsError([f"{where}: {e}" for e in exc.errors], what=f"configuration ({where})") from exc


def keep_running(new: SloManagerSettings, running: SloManagerSettings) -> Composed:
    """``new`` with the :data:`NOT_RELOADABLE` fields of ``running``, its version and which of those
    fields ``new`` wanted to change."""
    waiting = tuple(f for f in NOT_RELOADABLE if getattr(new, f) != getattr(running, f))
    kept = msgspec.structs.replace(new, **{f: getattr(running, f) for f in NOT_RELOADABLE})
    return Composed(settings=kept, version=version_of(kept), restart_required=waiting)


def compose(base: SloManagerSettings, kv_text: bytes | None, kv_where: str,
            running: SloManagerSettings) -> Composed:
    """The configuration to put in force: ``base`` (see :func:`load_base`) with the key-value text
    ``kv_text`` over it (None = no key-value configuration), not-reloadable fields kept from
    ``running``.

    Raises SettingsError listing every problem of the key-value layer, each prefixed by ``kv_where``.
    """
    settings = base
    if kv_text is not None:
        settings = overlay(base, parse_overlay(kv_text, kv_where), kv_where)
    return keep_running(settings, running)
