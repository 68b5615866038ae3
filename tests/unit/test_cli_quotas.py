"""``colo get quotas``: the table of the scheduler's quota statuses (the stream read is tested end to end in
tests/scheduler/test_quota_integration.py)."""

from __future__ import annotations

import pytest
from rich.console import Console

from colo.cli.quotas import amounts, quotas_table
from colo.messages import QuotaStatus

GI = 1024**3


@pytest.mark.parametrize(("values", "shown"), [
    ({}, "-"),
    ({"cpu": 2500, "memory": 4 * GI}, "cpu=2500m memory=4Gi"),
    ({"pods": 10, "batch_cpu": 1000, "cpu": 1000}, "cpu=1 batch_cpu=1 pods=10"),
])
def test_amounts(values: dict[str, int], shown: str) -> None:
    assert amounts(values) == shown


def test_quotas_table_rows() -> None:
    st = [QuotaStatus(name="team-a", parent="org", min={"cpu": 10_000}, max={}, used={"cpu": 9000},
                      request={"cpu": 12_000}, runtime={"cpu": 10_000}, pods=9, pending=3)]
    console = Console(width=200, record=True)
    console.print(quotas_table(st))
    text = console.export_text()
    assert "1 quotas" in text
    row = next(line for line in text.splitlines() if "team-a" in line)
    for cell in ("org", "cpu=10", "unlimited", "cpu=9", " 9 ", " 3 "):
        assert cell in row, (cell, row)


@pytest.mark.parametrize(("used", "runtime", "max_", "shown"), [
    ({"cpu": 9000}, {"cpu": 10_000}, {"cpu": 20_000}, "-"),
    ({"cpu": 16_000}, {"cpu": 10_000}, {"cpu": 20_000}, "cpu>runtime"),
    ({"cpu": 64_000}, {"cpu": 32_000}, {"cpu": 32_000}, "cpu>max"),
], ids=["within", "lent-min-wanted-back", "max-lowered-below-use"])
def test_the_over_column_marks_a_quota_above_its_runtime(used: dict[str, int], runtime: dict[str, int],
                                                         max_: dict[str, int], shown: str) -> None:
    from colo.cli.quotas import over

    st = QuotaStatus(name="team", parent="", min={}, max=max_, used=used, request=used, runtime=runtime)
    assert over(st) == shown
