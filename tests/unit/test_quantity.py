"""Kubernetes quantity parsing and formatting (colo.quantity)."""

from __future__ import annotations

import pytest

from colo.quantity import QuantityError, format_cpu, format_memory, parse_cpu, parse_memory


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        pytest.param("500m", 500, id="milli"),
        pytest.param("2", 2000, id="cores"),
        pytest.param("0.1", 100, id="fraction"),
        pytest.param("0.0001", 1, id="rounds-up"),
        pytest.param("1.5", 1500, id="decimal"),
        pytest.param(" 250m ", 250, id="spaces"),
        pytest.param(3, 3000, id="int"),
        pytest.param(0.25, 250, id="float"),
        pytest.param("1e3m", 1000, id="exponent"),
        pytest.param("0", 0, id="zero"),
    ],
)
def test_parse_cpu(text: str | int | float, milli: int) -> None:
    assert parse_cpu(text) == milli


@pytest.mark.parametrize(
    ("text", "n_bytes"),
    [
        pytest.param("2Gi", 2 * 2**30, id="gibi"),
        pytest.param("1G", 10**9, id="giga"),
        pytest.param("512Mi", 512 * 2**20, id="mebi"),
        pytest.param("1.5Gi", 3 * 2**29, id="fractional-gibi"),
        pytest.param("100", 100, id="bytes"),
        pytest.param("1k", 1000, id="kilo"),
        pytest.param("1Ki", 1024, id="kibi"),
        pytest.param("1Ti", 2**40, id="tebi"),
        pytest.param(4096, 4096, id="int"),
    ],
)
def test_parse_memory(text: str | int, n_bytes: int) -> None:
    assert parse_memory(text) == n_bytes


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("", id="empty"),
        pytest.param("5x", id="unknown-suffix"),
        pytest.param("-1", id="negative-string"),
        pytest.param(-2, id="negative-number"),
        pytest.param("abc", id="letters"),
        pytest.param("1.2.3", id="two-dots"),
        pytest.param(True, id="bool"),
        pytest.param(None, id="none"),
        pytest.param("2 Gi i", id="garbage-tail"),
        pytest.param("1ki", id="lowercase-kibi"),
        pytest.param("1KI", id="uppercase-i"),
        pytest.param("1mi", id="milli-i"),
    ],
)
def test_bad_quantities_raise(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_cpu(bad)  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        parse_memory(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("milli", "text"),
    [pytest.param(1500, "1500m", id="milli"), pytest.param(2000, "2", id="whole"),
     pytest.param(0, "0", id="zero")],
)
def test_format_cpu_roundtrips(milli: int, text: str) -> None:
    assert format_cpu(milli) == text
    assert parse_cpu(text) == milli


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [pytest.param(2**31, "2Gi", id="gibi"), pytest.param(3 * 2**20, "3Mi", id="mebi"),
     pytest.param(1000, "1000", id="not-binary"), pytest.param(0, "0", id="zero")],
)
def test_format_memory_roundtrips(n_bytes: int, text: str) -> None:
    assert format_memory(n_bytes) == text
    assert parse_memory(text) == n_bytes
