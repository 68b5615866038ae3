"""Kubernetes quantity strings at the edges: ``"500m"``, ``"2"``, ``"2Gi"``, ``"1.5G"``.

CPU quantities become milli-cores, memory quantities bytes (both ``int``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_RE = re.compile(r"^\s*([+]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(Ki|[MGTPE]i|[kMGTPE]|m)?\s*$")


class QuantityError(ValueError):
    """A string or number that is not a valid non-negative Kubernetes quantity."""


def _parse(value: str | int | float) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise QuantityError(f"negative quantity: {value!r}")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    match = _RE.match(value)
    if not match:
        raise QuantityError(f"not a quantity: {value!r}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as exc:  # pragma: no cover - regex guards this
        raise QuantityError(f"not a quantity: {value!r}") from exc
    return number * _SUFFIX[match.group(2) or ""]


def parse_quantity(value: str | int | float) -> Decimal:
    """A quantity's exact value in its base unit (``"500m"`` → ``Decimal("0.500")``, ``"2Ki"`` → 2048), not
    rounded. Raises QuantityError on malformed or negative input."""
    return _parse(value)


def parse_cpu(value: str | int | float) -> int:
    """CPU quantity → milli-cores, rounded up as Kubernetes does (``"0.1"`` → 100, ``"250m"`` → 250).

    Raises QuantityError on malformed or negative input.
    """
    milli = _parse(value) * 1000
    return int(milli.to_integral_value(rounding="ROUND_CEILING"))


def parse_memory(value: str | int | float) -> int:
    """Memory quantity → bytes, rounded up (``"2Gi"`` → 2147483648, ``"1G"`` → 10**9).

    Raises QuantityError on malformed or negative input.
    """
    return int(_parse(value).to_integral_value(rounding="ROUND_CEILING"))


def format_cpu(milli: int) -> str:
    """Milli-cores → a short quantity string (``1500`` → ``"1500m"``, ``2000`` → ``"2"``)."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_memory(n_bytes: int) -> str:
    """Bytes → the largest exact binary unit (``2147483648`` → ``"2Gi"``)."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIX[suffix])
        if n_bytes and n_bytes % unit == 0:
            return f"{n_bytes // unit}{suffix}"
    return str(n_bytes)
