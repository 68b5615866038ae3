"""The item-5 verdict of bench/interference_budget.py: both idle definitions, the p99 target, the window order
that lets the BE budget learn its baseline right before the adaptive window."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # after the packages: never shadows them
import interference_budget as ib  # noqa: E402


def _row(p99: float, be: float, ls: float = 0.4, own: float = 0.2, cell: str = "adaptive") -> dict[str, Any]:
    return {"be_kind": "cpu", "cell": cell, "p99_inflation_percent": p99, "be_cores": be,
            **ib.shares(be, ls, own, 2), "other_cpu_cores": 0.0}


# id, row; want met, met_net
CASES = [
    ("both met", _row(5.0, 1.5), True, True),
    ("only without the bench's processes", _row(5.0, 1.3), False, True),
    ("BE short of both", _row(5.0, 1.0), False, False),
    ("p99 over the target", _row(10.1, 1.5), False, False),
    ("p99 at the target", _row(10.0, 1.5), True, True),
]


@pytest.mark.parametrize(("row", "met", "met_net"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_item5(row: dict[str, Any], met: bool, met_net: bool) -> None:
    got = ib.item5([row, _row(0.0, 0.0, cell="ls_alone")])["cpu"]
    assert set(got) == {"adaptive"}
    assert (got["adaptive"]["met"], got["adaptive"]["met_net"]) == (met, met_net)


def test_shares_of_both_idle_definitions() -> None:
    assert ib.shares(1.2, 0.4, 0.2, 2) == {"idle_cpus": 1.6, "idle_cpus_net": 1.4, "be_share_of_idle": 0.75,
                                           "be_share_of_idle_net": 0.857}


@pytest.mark.parametrize(("rnd", "want"), [
    pytest.param(0, ["ls_alone", "adaptive", "qos", "qos_cpuset"], id="even round: adaptive first"),
    pytest.param(1, ["qos", "qos_cpuset", "ls_alone", "adaptive"], id="odd round: static first"),
])
def test_adaptive_always_follows_ls_alone(rnd: int, want: list[str]) -> None:
    assert ib._order(rnd, ["qos", "adaptive", "qos_cpuset"]) == want
