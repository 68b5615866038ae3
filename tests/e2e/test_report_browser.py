"""The demo report of a short real run (the shared 20-node, 1 h runs with jobs of conftest.py) rendered in a headless
browser (Debian's chromium driven by Playwright, as tests/api/test_dashboard_browser.py does).

What a reader sees: the headline has a sentence per key metric whose baseline, colo and ratio figures are those
of ``summary.json``; the unschedulable reasons table is there with the pods of the run; every chart legend keys
colour and line style (baseline dashed, colo solid); the scenario section is tables, no raw JSON. Screenshots go
to ``out/test-artifacts/report-*.png``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rich.console import Console

from colo.sim import traces as tr
from colo.sim.report import write_report
from colo.sim.report_format import fmt
from colo.sim.report_headline import HEADLINE_METRICS, JOB_HEADLINE_METRICS
from colo.sim.run import RunResult
from colo.sim.scenario import Scenario
from colo.testing.browser import LAUNCH_ARGS, chromium_or_reason

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

ARTIFACTS = Path(__file__).parents[2] / "out" / "test-artifacts"


@pytest.fixture(scope="module")
def report(jobs_scenario: Scenario, jobs_runs: dict[str, RunResult],
           tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("report")
    description = {**jobs_scenario.description, "settings_env": {"COLO_LOG_LEVEL": "INFO"}}
    with (out / "table.txt").open("w") as table:
        write_report(out, [jobs_runs["baseline"].metrics, jobs_runs["colo"].metrics], description,
                     Console(file=table, width=200))
    return out / "report.html", json.loads((out / "summary.json").read_text())


@pytest_asyncio.fixture
async def page(report: tuple[Path, dict[str, Any]]) -> AsyncIterator[Any]:
    path, why = chromium_or_reason()
    if path is None:
        pytest.skip(why)
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("playwright is not installed (requirements-dev.txt)")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=path, headless=True, args=list(LAUNCH_ARGS))
        try:
            pg = await browser.new_page(viewport={"width": 1300, "height": 1000})
            errors: list[str] = []
            pg.on("pageerror", lambda exc: errors.append(str(exc)))
            await pg.goto(report[0].as_uri())
            yield pg
            assert errors == []
        finally:
            await browser.close()


async def _shot(page: Any, selector: str, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.locator(selector).first.screenshot(path=str(ARTIFACTS / f"report-{name}.png"))


async def _top_shot(page: Any, selector: str, name: str) -> None:
    """The viewport with ``selector`` at its top."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.evaluate(f"document.querySelector('{selector}').scrollIntoView()")
    await page.screenshot(path=str(ARTIFACTS / f"report-{name}.png"))


def _expected(metric: str, label: str, summary: dict[str, Any]) -> tuple[str, list[str]]:
    """The sentence's start and the figures it must state, from summary.json."""
    b, c = summary["runs"]["baseline"][metric], summary["runs"]["colo"][metric]
    r = summary["ratio_colo_over_baseline"][metric]
    unit = " s" if metric.endswith("_s") else ""
    return label, [fmt(metric, b) + unit, fmt(metric, c) + unit, "no ratio" if r is None else f"{r:.2f}×"]


async def test_headline_states_each_key_metric_with_the_summary_figures(
        page: Any, report: tuple[Path, dict[str, Any]]) -> None:
    summary = report[1]
    sentences = [t.strip() for t in await page.locator("ul.headline li").all_inner_texts()]
    assert summary["scenario"]["params"]["jobs"], "the scenario has jobs: gang and preemption sentences"
    for metric, label in HEADLINE_METRICS + JOB_HEADLINE_METRICS:
        start, figures = _expected(metric, label, summary)
        line = next((s for s in sentences if s.startswith(start)), None)
        assert line is not None, (metric, sentences)
        for figure in figures:
            assert figure in line, (metric, figure, line)
        assert "baseline" in line
    assert len(sentences) == len(HEADLINE_METRICS + JOB_HEADLINE_METRICS) == len(summary["headline"])
    # the headline comes first: above the metric table
    head, table = await page.locator("ul.headline").bounding_box(), await page.locator("table.metrics").bounding_box()
    assert head["y"] < table["y"]
    # a one-line verdict before the sentences (issue 14 follow-up)
    verdict = page.locator("p.verdict")
    assert (await verdict.inner_text()).strip() == summary["verdict"] != ""
    assert summary["verdict"].startswith("Co-location ")
    assert (await verdict.bounding_box())["y"] < head["y"]
    await page.screenshot(path=str(ARTIFACTS / "report-top.png"))
    await _shot(page, "ul.headline", "headline")


async def test_unschedulable_reasons_are_broken_down_next_to_the_batch_offer(
        page: Any, report: tuple[Path, dict[str, Any]]) -> None:
    summary = report[1]
    assert await page.locator("#unschedulable").count() == 1
    runs = list(summary["runs"])
    assert any(summary["runs"][r]["pods_unschedulable"] for r in runs), "the short run leaves pods unschedulable"
    tables = page.locator("table.reasons")
    shown = 0
    for run in runs:
        pods = int(summary["runs"][run]["pods_unschedulable"])
        assert sum(int(row["pods"]) for row in summary["unschedulable_reasons"][run]) == pods
        if not pods:
            continue
        rows = await tables.nth(shown).locator("tr").all_inner_texts()
        shown += 1
        # header + one row per reason; the dominant-reason column adds up to the run's pods_unschedulable
        body = [r.split("\t") for r in rows[1:]]
        assert [b[0] for b in body] == [row["label"] for row in summary["unschedulable_reasons"][run]]
        assert sum(int(b[2]) for b in body) == pods
    assert await tables.count() == shown
    over_time = page.locator("table.reasons-over-time")
    assert await over_time.count() == len(runs)
    head = await over_time.first.locator("tr").first.inner_text()
    assert "batch cores offered" in head and "unallocated" in head and "memory" in head
    colo = summary["series"]["colo"][-1]
    sentence = await page.locator("p.reasons-summary").nth(runs.index("colo")).inner_text()
    if summary["runs"]["colo"]["pods_unschedulable"]:
        assert f"{colo['batch_cpu_cores']:,.1f} batch cores were offered" in sentence
    await _top_shot(page, "#unschedulable", "reasons")


LEGEND_JS = """() => [...document.querySelectorAll('svg')].map(svg => ({
  title: svg.querySelector('text').textContent,
  legend: [...svg.querySelectorAll('g.legend-entry')].map(g => ({
    name: g.dataset.series, dash: g.querySelector('line').getAttribute('stroke-dasharray') || '',
    color: g.querySelector('line').getAttribute('stroke'), marker: g.children.length > 2})),
  lines: Object.fromEntries([...svg.querySelectorAll('polyline.series')].map(p => [p.dataset.series,
    {dash: p.getAttribute('stroke-dasharray') || '', color: p.getAttribute('stroke')}])),
}))"""


async def test_every_legend_keys_colour_and_line_style(page: Any) -> None:
    charts = await page.evaluate(LEGEND_JS)
    assert len(charts) >= 9
    for chart in charts:
        assert chart["legend"], chart["title"]
        for entry in chart["legend"]:
            line = chart["lines"].get(entry["name"])
            if line is None:
                continue  # a series without points has no line, its key stays
            assert (entry["dash"], entry["color"]) == (line["dash"], line["color"]), (chart["title"], entry)
            assert entry["marker"], (chart["title"], entry)
            if entry["name"].startswith("baseline"):
                assert entry["dash"], f"{chart['title']}: baseline is dashed"
            if entry["name"].startswith("colo"):
                assert not entry["dash"], f"{chart['title']}: colo is solid"
        styles = [(e["dash"], e["color"]) for e in chart["legend"]]
        assert len(set(styles)) == len(styles), f"{chart['title']}: two series drawn alike"
    await _shot(page, ".chart >> nth=0", "chart-cpu")
    await _top_shot(page, "#over-time", "charts")


async def test_scenario_section_is_readable_tables(page: Any, report: tuple[Path, dict[str, Any]]) -> None:
    summary = report[1]
    section = page.locator("div.scenario")
    text = await section.inner_text()
    assert await page.locator("pre").count() == 0
    assert '{"' not in text and '": ' not in text and "[" not in text, "no raw JSON"
    rows = dict(r.split("\t", 1) for r in await section.locator("table.kv > tbody > tr").all_inner_texts()
                if "\t" in r)
    assert rows["nodes"].strip() == str(summary["scenario"]["nodes"])
    params = summary["scenario"]["params"]
    assert rows["hours"].strip() == f"{params['hours']:g}" and rows["seed"].strip() == str(params["seed"])
    assert tr.BATCH_TASK in rows["traces"] and tr.NODE_LIST in rows["traces"]
    assert rows["cluster cpu"].strip() == f"{summary['scenario']['cluster_cpu_milli'] / 1000:,.1f} cores"
    assert "quotas" in rows and "cores" in rows["quotas"] and "GiB" in rows["quotas"]
    await _top_shot(page, "#scenario", "scenario")
    await page.screenshot(path=str(ARTIFACTS / "report-full.png"), full_page=True)
