"""What every manifest kind shares: the error list with field paths, typed field readers, quantities and
durations. Kubernetes conventions: names are lowercase DNS names, quantities ``"500m"``/``"2Gi"``."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from colo.messages import KUBERNETES_RESOURCE_NAMES
from colo.quantity import QuantityError, parse_cpu, parse_memory, parse_quantity
from colo.validation import IDENT
from colo.workloads import MAX_UID_CHARS

NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A Kubernetes object name (DNS subdomain)."""
LABEL_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""A DNS label: an object whose name is also a subject token (no ``.``), e.g. an ElasticQuota."""
MAX_QUANTITY = 2**50
"""Largest accepted resource amount (milli-cores, bytes, count), as admission and the scheduler bound it."""
METADATA_FIELDS = ("name", "namespace", "uid", "labels", "annotations")
"""The ``metadata`` fields Colo reads (of every kind); any other is an error."""
TOP_FIELDS = ("apiVersion", "kind", "metadata", "spec")
"""The fields of a document (of every kind)."""
MILLI_RESOURCES = ("batch_cpu", "mid_cpu")
"""Resources written as integer milli-cores (Koordinator's ``kubernetes.io/batch-cpu: "500"`` is half a core)."""
SMALL_MILLI_WARNING = 100
"""A batch-/mid-cpu amount below this many milli-cores is accepted with a warning: ``"2"`` is 2 milli-cores,
most likely meant as 2 cores (``"2000"``)."""
_SECONDS = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
"""Seconds as a decimal number, in exponent notation too (``"1e9"``: what YAML 1.1 leaves a string)."""
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


def nearest(word: str, names: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the name of ``names`` nearest to ``word``, else `` (known: a, b)``."""
    known = tuple(names)
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"


class Ctx:
    """The problems found so far in one file, and readers that record a problem instead of raising."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def err(self, path: str, msg: str) -> None:
        """Record ``msg`` at ``path`` (``<root>`` when empty)."""
        self.errors.append(f"{path or '<root>'}: {msg}")

    def warn(self, path: str, msg: str) -> None:
        """Record a warning (printed, not fatal) at ``path``."""
        self.warnings.append(f"{path or '<root>'}: {msg}")

    def known(self, obj: dict[str, Any], path: str, fields: Iterable[str]) -> None:
        """Every key of ``obj`` not in ``fields`` is an error at its path, with the nearest known name
        (:func:`difflib.get_close_matches`, cutoff 0.6) or, when none is near, the list of known ones:
        ``spec.containers[0].resoures: unknown field (did you mean 'resources'?)``."""
        names = tuple(fields)
        for key in obj:
            if key not in names:
                self.err(join(path, str(key)), f"unknown field{nearest(str(key), names)}")

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


def identifiers(ctx: Ctx, meta: dict[str, Any], path: str, **values: str) -> None:
    """Each of ``values`` (``uid=…``, ``name=…``, ``namespace=…``) of a workload or PodGroup must be an
    :data:`colo.validation.IDENT` of at most :data:`colo.workloads.MAX_UID_CHARS` characters, as admission
    requires (``colo_slo_manager.expansion``); a problem is reported at ``<path>.<field>``, or at
    ``<path>.name`` for a value derived from the name (a uid ``<namespace>-<name>`` not written)."""
    for field, value in values.items():
        if IDENT.fullmatch(value) and len(value) <= MAX_UID_CHARS:
            continue
        at = join(path, field if field in meta else "name")
        what = f"{field} {value!r}" if field in meta or field == "name" else f"the derived {field} {value!r}"
        ctx.err(at, f"{what} is not a valid identifier (letters, digits, '_', '.', '-'; at most "
                    f"{MAX_UID_CHARS} characters)")


def duration_s(ctx: Ctx, obj: Any, path: str, default: float) -> float:
    """A positive, finite duration in seconds: a number (``1e9`` too, which YAML 1.1 reads as a string), or a Go
    duration string ``"90s"``, ``"10m"``, ``"1h30m"``.
    Any positive length is accepted (no cap: REFERENCE.md §11); ``default`` when absent."""
    if obj is None:
        return default
    value: float | None = None
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        try:
            value = float(obj)
        except OverflowError:  # an integer of hundreds of digits
            value = float("inf") if obj > 0 else float("-inf")
    elif isinstance(obj, str):
        text = obj.strip()
        if _SECONDS.fullmatch(text):  # YAML 1.1 reads 1e9 (no dot) as a string
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
        ctx.err(path, f"must be > 0 seconds and finite, got {obj!r}")
        return default
    return value


PREFIXED_KEYS: dict[str, tuple[str, ...]] = {
    "gang.scheduling.koordinator.sh/": ("name", "min-available", "waiting-time", "mode", "groups"),
    "quota.scheduling.koordinator.sh/": ("name", "parent", "is-parent", "preemptible", "shared-weight",
                                         "allow-lent-resource"),
    "colo.io/": ("max-unavailable", "sim-duration", "sim-cpu", "sim-memory", "gpu-spec"),
}
"""Label and annotation prefixes whose keys Colo reads, and the keys it knows under each (Koordinator's gang and
quota protocols, Colo's own): any other key under one of these prefixes is a typo, reported with the nearest."""


def check_prefixed_keys(ctx: Ctx, obj: Any, path: str) -> None:
    """Every key of the mapping ``obj`` (labels or annotations at ``path``) under a :data:`PREFIXED_KEYS` prefix
    must be a known one: ``…/gang.scheduling.koordinator.sh/min-availabel: unknown key (did you mean …?)``."""
    if not isinstance(obj, dict):
        return
    for key in obj:
        for prefix, names in PREFIXED_KEYS.items():
            if isinstance(key, str) and key.startswith(prefix) and key[len(prefix):] not in names:
                ctx.err(join(path, key), f"unknown key{nearest(key, [prefix + n for n in names])}")


def format_cores(milli: int) -> str:
    """``500`` → ``"0.5 cores"``, ``1000`` → ``"1 core"``."""
    cores = milli / 1000
    return f"{cores:g} core" + ("" if cores == 1 else "s")


def resource_list(ctx: Ctx, obj: Any, path: str, allow_pods: bool = False) -> dict[str, int]:
    """A Kubernetes resource list → :class:`colo.messages.Resources` field → amount (milli-cores for cpu
    kinds, bytes for memory kinds, a count for pods). ``kubernetes.io/batch-cpu`` and ``mid-cpu`` are
    integer milli-cores as Koordinator writes them (REFERENCE.md §1); the others are quantities. An amount
    that is not a whole number of its unit (``kubernetes.io/batch-cpu: 500m`` is half a milli-core,
    ``memory: 0.5``) is an error, never rounded; a batch-/mid-cpu below :data:`SMALL_MILLI_WARNING` is
    a warning. An unknown resource name is an error with the nearest known one."""
    out: dict[str, int] = {}
    for name, value in ctx.mapping(obj, path).items():
        p = join(path, str(name))
        field = KUBERNETES_RESOURCE_NAMES.get(str(name))
        if field is None or (field == "pods" and not allow_pods):
            names = [n for n in KUBERNETES_RESOURCE_NAMES if allow_pods or n != "pods"]
            ctx.err(p, f"unknown resource {name!r}{nearest(str(name), names)}")
            continue
        try:
            exact = parse_quantity(value)
            amount = parse_cpu(value) if field == "cpu" else parse_memory(value)
        except QuantityError as exc:
            ctx.err(p, str(exc))
            continue
        if field != "cpu" and exact != exact.to_integral_value():
            unit = "milli-cores" if field in MILLI_RESOURCES else "a count" if field == "pods" else "bytes"
            hint = (f"; {name} is integer milli-cores (Koordinator): write \"{int(exact * 1000)}\" for "
                    f"{format_cores(int(exact * 1000))}" if field in MILLI_RESOURCES else "")
            ctx.err(p, f"{value!r} is {exact.normalize()} {unit}, not a whole number{hint}")
            continue
        if field in MILLI_RESOURCES and 0 < amount < SMALL_MILLI_WARNING:
            ctx.warn(p, f"{value!r} is {amount} milli-cores ({amount / 1000:g} cores); "
                        f"{name} is integer milli-cores: {amount} cores would be \"{amount * 1000}\"")
        if amount > MAX_QUANTITY:
            ctx.err(p, f"must not exceed {MAX_QUANTITY}, got {amount}")
            continue
        out[field] = amount
    return out
