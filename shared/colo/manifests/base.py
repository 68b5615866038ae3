"""What every manifest kind shares: the error list with field paths, typed field readers, quantities and
durations. Kubernetes conventions: names are lowercase DNS names, quantities ``"500m"``/``"2Gi"``."""

from __future__ import annotations

import re
from typing import Any

from colo.messages import KUBERNETES_RESOURCE_NAMES
from colo.quantity import QuantityError, parse_cpu, parse_memory

NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A Kubernetes object name (DNS subdomain)."""
LABEL_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""A DNS label: an object whose name is also a subject token (no ``.``), e.g. an ElasticQuota."""
MAX_QUANTITY = 2**50
"""Largest accepted resource amount (milli-cores, bytes, count), as admission and the scheduler bound it."""
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")
KNOWN_RESOURCES = ", ".join(KUBERNETES_RESOURCE_NAMES)


class ManifestError(ValueError):
    """A manifest with problems; ``errors`` lists each as ``"<field path>: <problem>"``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def join(path: str, key: str | int) -> str:
    """``path`` extended by a mapping key (``a.b``) or a list index (``a[3]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Ctx:
    """The problems found so far in one file, and readers that record a problem instead of raising."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def err(self, path: str, msg: str) -> None:
        """Record ``msg`` at ``path`` (``<root>`` when empty)."""
        self.errors.append(f"{path or '<root>'}: {msg}")

    def mapping(self, obj: Any, path: str, required: bool = False) -> dict[str, Any]:
        """``obj`` when a mapping; {} (and a problem unless absent and optional) otherwise."""
        if obj is None:
            if required:
                self.err(path, "required")
            return {}
        if not isinstance(obj, dict):
            self.err(path, f"expected a mapping, got {type(obj).__name__}")
            return {}
        return obj

    def str_map(self, obj: Any, path: str) -> dict[str, str]:
        """A mapping of strings (numbers are turned into strings, as YAML users write ``app: 1``)."""
        out: dict[str, str] = {}
        for k, v in self.mapping(obj, path).items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                self.err(join(path, str(k)), f"expected a string, got {type(v).__name__}")
                continue
            out[str(k)] = str(v)
        return out

    def integer(self, obj: Any, path: str, default: int, minimum: int) -> int:
        """An integer ≥ ``minimum`` (a numeric string is accepted: annotations are strings); ``default`` when
        absent."""
        if obj is None:
            return default
        value: int | None = None
        if isinstance(obj, int) and not isinstance(obj, bool):
            value = obj
        elif isinstance(obj, str) and re.fullmatch(r"[+-]?\d+", obj.strip()):
            value = int(obj)
        if value is None:
            self.err(path, f"expected an integer, got {obj!r}")
            return default
        if value < minimum:
            self.err(path, f"must be ≥ {minimum}, got {value}")
            return default
        return value

    def boolean(self, obj: Any, path: str, default: bool) -> bool:
        """A bool, or the strings ``"true"``/``"false"`` (annotations and labels)."""
        if obj is None:
            return default
        if isinstance(obj, bool):
            return obj
        if isinstance(obj, str) and obj.lower() in ("true", "false"):
            return obj.lower() == "true"
        self.err(path, f"expected true or false, got {obj!r}")
        return default

    def name(self, meta: dict[str, Any], path: str, pattern: re.Pattern[str] = NAME) -> str:
        """``metadata.name``, checked against ``pattern``; "" after recording a problem."""
        value = meta.get("name")
        if not isinstance(value, str) or not pattern.match(value):
            self.err(join(path, "name"), "required: a lowercase DNS name" if value is None
                     else f"not a valid name: {value!r}")
            return ""
        return value

    def str_list(self, obj: Any, path: str) -> list[str]:
        """A list of strings; [] when absent."""
        if obj is None:
            return []
        if not isinstance(obj, list) or not all(isinstance(x, str) for x in obj):
            self.err(path, "expected a list of strings")
            return []
        return list(obj)


def duration_s(ctx: Ctx, obj: Any, path: str, default: float) -> float:
    """A positive duration in seconds: a number, or a Go duration string ``"90s"``, ``"10m"``, ``"1h30m"``.
    Any positive length is accepted (no cap: REFERENCE.md §11); ``default`` when absent."""
    if obj is None:
        return default
    value: float | None = None
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        value = float(obj)
    elif isinstance(obj, str):
        text = obj.strip()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            value = float(text)
        else:
            m = _DURATION.fullmatch(text)
            if text and m:
                h, mi, s = (float(g) if g else 0.0 for g in m.groups())
                value = h * 3600 + mi * 60 + s
    if value is None:
        ctx.err(path, f"expected seconds or a duration like '90s', '10m', '1h30m', got {obj!r}")
        return default
    if not value > 0 or value == float("inf"):
        ctx.err(path, f"must be > 0 seconds, got {obj!r}")
        return default
    return value


def resource_list(ctx: Ctx, obj: Any, path: str, allow_pods: bool = False) -> dict[str, int]:
    """A Kubernetes resource list → :class:`colo.messages.Resources` field → amount (milli-cores for cpu
    kinds, bytes for memory kinds, a count for pods). ``kubernetes.io/batch-cpu`` and ``mid-cpu`` are
    integer milli-cores as Koordinator writes them (REFERENCE.md §1); the others are quantities."""
    out: dict[str, int] = {}
    for name, value in ctx.mapping(obj, path).items():
        p = join(path, str(name))
        field = KUBERNETES_RESOURCE_NAMES.get(str(name))
        if field is None or (field == "pods" and not allow_pods):
            known = KNOWN_RESOURCES if allow_pods else KNOWN_RESOURCES.replace(", pods", "")
            ctx.err(p, f"unknown resource {name!r} (known: {known})")
            continue
        try:
            amount = parse_cpu(value) if field == "cpu" else parse_memory(value)
        except QuantityError as exc:
            ctx.err(p, str(exc))
            continue
        if amount > MAX_QUANTITY:
            ctx.err(p, f"must not exceed {MAX_QUANTITY}, got {amount}")
            continue
        out[field] = amount
    return out
