"""``colo explain``'s preemption tables: victims' and the node-choice criteria's start times read as times."""

from __future__ import annotations

from rich.console import Console

from colo.cli.explain import render_preemption

PRE = {"node": "n1", "kept": False, "candidates": 3, "runner_up": "n2",
       "victims": [{"uid": "v1", "name": "v1", "priority": 5500, "started_at": 1796176139.7}],
       "criteria": {"max_victim_priority": 5500, "victims": 1, "earliest_start_of_highest_s": 1796176139.7},
       "runner_up_criteria": {"max_victim_priority": 5500, "victims": 2, "earliest_start_of_highest_s": 12.5}}


def test_criteria_start_times_are_shown_as_times_not_raw_epochs() -> None:
    console = Console(width=200, record=True)
    render_preemption({"preemption": PRE}, console)
    text = console.export_text()
    assert "1796176139.7" not in text
    row = next(line for line in text.splitlines() if "earliest_start_of_highest_s" in line)
    assert "2026-" in row and "UTC" in row and "t=12.5 s (simulated clock)" in row
