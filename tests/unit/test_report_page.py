"""The report page's headline, scenario tables, chart legends and unschedulable section (no servers)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from colo.sim.report_headline import HEADLINE_METRICS, JOB_HEADLINE_METRICS, headline, jobs_on, sentence
from colo.sim.report_reasons import end_sentence, reasons_html
from colo.sim.report_scenario import scenario_html
from colo.sim.report_svg import LineStyle, svg_chart

RUN = {"cpu_util_avg": 0.234, "mem_util_avg": 0.398, "batch_tasks_completed": 1705.0, "be_evictions": 1420.0,
       "ls_cpu_satisfaction": 1.0, "gang_wait_p50_s": 720.0, "gang_wait_p95_s": 4794.0, "preemptions": 10.0,
       "quota_reclaims": 0.0, "gangs_placed": 383.0, "gangs_waiting": 138.0, "ls_p99_inflation_avg_pct": 0.0}
COLO = {**RUN, "ls_p99_inflation_avg_pct": 4.5, "cpu_util_avg": 0.26, "mem_util_avg": 0.478, "batch_tasks_completed": 1762.0, "be_evictions": 104.0,
        "gang_wait_p50_s": 60.0, "gang_wait_p95_s": 4380.0, "preemptions": 22.0, "quota_reclaims": 47.0}


def _summary(jobs: bool) -> dict[str, Any]:
    ratios = {k: (COLO[k] / RUN[k] if RUN[k] else None) for k in RUN}
    return {"scenario": {"params": {"jobs": jobs}}, "runs": {"baseline": RUN, "colo": COLO},
            "ratio_colo_over_baseline": ratios}


@pytest.mark.parametrize(("metric", "label", "expected"), [
    pytest.param("cpu_util_avg", "CPU", "CPU rose from 23.4% in baseline to 26.0% with co-location (1.11×, better).",
                 id="higher-better"),
    pytest.param("be_evictions", "BE evictions",
                 "BE evictions fell from 1420 in baseline to 104 with co-location (0.07×, better).", id="lower-better"),
    pytest.param("preemptions", "Preemptions",
                 "Preemptions rose from 10 in baseline to 22 with co-location (2.20×, worse).", id="lower-worse"),
    pytest.param("gang_wait_p50_s", "Median gang wait",
                 "Median gang wait fell from 720 s in baseline to 60 s with co-location (0.08×, better).", id="seconds"),
    pytest.param("quota_reclaims", "Quota reclaims",
                 "Quota reclaims rose from 0 in baseline to 47 with co-location (baseline 0, no ratio, worse).",
                 id="no-ratio"),
    pytest.param("ls_cpu_satisfaction", "LS", "LS: 100.0% in baseline and 100.0% with co-location (1.00×, the same).", id="same"),
])
def test_headline_sentence(metric: str, label: str, expected: str) -> None:
    s = _summary(True)
    assert sentence(metric, label, RUN[metric], COLO[metric], s["ratio_colo_over_baseline"][metric]) == expected


def test_headline_has_gang_sentences_only_with_jobs() -> None:
    assert len(headline(_summary(True))) == len(HEADLINE_METRICS) + len(JOB_HEADLINE_METRICS)
    assert len(headline(_summary(False))) == len(HEADLINE_METRICS)
    assert jobs_on({"runs": {"colo": {"gangs_placed": 2}}}) and not jobs_on({"runs": {"colo": {}}})
    assert headline({"runs": {"colo": COLO}}) == [], "one run: nothing to compare"


def test_headline_inflation_sentence_only_where_modelled() -> None:
    lines = [line for line in headline(_summary(False)) if line.startswith("Modelled")]
    assert lines == ["Modelled LS p99 latency inflation (mean over LS pods) rose from 0.0% in baseline to 4.5% with "
                     "co-location (baseline 0, no ratio, worse): co-location runs more BE work beside the LS pods, "
                     "and the interference model (docs/scenario.md) says what that load does to their tail latency."]
    unmodelled = _summary(False)
    unmodelled["runs"] = {name: {**run, "ls_p99_inflation_avg_pct": -1.0} for name, run in unmodelled["runs"].items()}
    lines = headline(unmodelled)
    assert len(lines) == len(HEADLINE_METRICS)
    assert lines[-1] == ("Modelled LS p99 latency inflation (mean over LS pods): – in baseline and – with "
                         "co-location (no ratio: not measured in either run).")


def test_scenario_section_is_tables_with_units_not_json() -> None:
    desc = {"params": {"nodes": 20, "hours": 1.0, "seed": 3, "jobs": True}, "nodes": 20,
            "cluster_cpu_milli": 1_752_000, "cluster_memory_bytes": 8568 * 2**30,
            "traces": ["alibaba-v2017/batch_task.csv", "alibaba-gpu-v2023/openb_node_list_all_node.csv"],
            "ls_cpu_requested_fraction": 0.607, "high_priority_jobs": [f"job-{i}" for i in range(9)],
            "quotas": {"team-a": {"min": {"batch_cpu": 326_400, "batch_memory": 2 * 2**30}}},
            "settings_env": {}, "something_new": 5}
    page = scenario_html(desc)
    assert "{" not in page and "[" not in page and "<pre" not in page
    cells = dict(re.findall(r"<tr><th>([^<]*)</th><td>((?:[^<]|<br>)*)</td></tr>", page))  # leaf cells
    assert cells["cluster cpu"] == "1,752.0 cores" and cells["cluster memory"] == "8,568.0 GiB"
    assert cells["ls cpu requested fraction"] == "60.7%" and cells["seed"] == "3" and cells["jobs"] == "yes"
    assert cells["traces"] == "alibaba-v2017/batch_task.csv<br>alibaba-gpu-v2023/openb_node_list_all_node.csv"
    assert cells["high priority jobs"].endswith("… (9 in all)")
    assert ("<tr><th></th><th>min batch cpu</th><th>min batch memory</th></tr>"
            "<tr><th>team-a</th><td>326.4 cores</td><td>2.0 GiB</td></tr>") in page
    assert "<h3>Other</h3>" in page and cells["something new"] == "5"
    assert "<h3>Settings from the environment</h3><p>none</p>" in page


def _legend(svg: str) -> dict[str, str]:
    return dict(re.findall(r'<g class="legend-entry" data-series="([^"]*)" data-dash="([^"]*)">', svg))


def test_coinciding_lines_stay_visible_and_the_legend_keys_the_dash() -> None:
    same = [(0.0, 1.0), (0.5, 1.0), (1.0, 1.0)] * 1
    svg = svg_chart("t", {"baseline": same, "colo": same}, "fraction", 1.0)
    assert _legend(svg) == {"baseline": "6,3", "colo": "solid"}
    order = re.findall(r'<polyline class="series" data-series="([^"]*)"', svg)
    assert order == ["colo", "baseline"], "solid first, the dashed one over it"
    squares, circles = svg.count("<rect x=") - 1 - 1, svg.count("<circle")  # frame rect; one legend square
    assert squares >= 1 and circles >= 2, "both series show their markers"
    styled = svg_chart("t", {"a used": same, "a runtime": same}, "cores",
                       styles={"a used": LineStyle("#111", ""), "a runtime": LineStyle("#111", "6,3")})
    assert _legend(styled) == {"a used": "solid", "a runtime": "6,3"}


def test_unschedulable_section_lists_reasons_next_to_the_offer() -> None:
    rows = [{"label": "Insufficient batch-memory", "category": "memory", "pods": 3, "pods_any": 3, "nodes": 45},
            {"label": "Insufficient batch-cpu", "category": "cpu", "pods": 0, "pods_any": 2, "nodes": 4}]
    sample = {"t": 3600.0, "batch_cpu_cores": 800.0, "batch_cpu_allocated_cores": 400.0, "batch_memory_gib": 4000.0,
              "batch_memory_allocated_gib": 3990.0, "pods_unschedulable": 3,
              "unschedulable_reasons": {"Insufficient batch-memory": 3}}
    text = end_sentence("colo", rows, sample)
    assert text.startswith("colo: 3 pods unschedulable at the end while 800.0 batch cores were offered "
                           "(400.0 unallocated) and 4,000.0 GiB of batch memory (10.0 GiB unallocated)")
    assert "3 for memory" in text
    page = reasons_html({"unschedulable_reasons": {"colo": rows}, "series": {"colo": [sample]}})
    assert "<table class='reasons'>" in page and "<table class='reasons-over-time'>" in page
    assert "batch-cpu offered, allocated, unallocated" in page
    base = end_sentence("baseline", rows, {**sample, "batch_cpu_cores": 0.0, "batch_memory_gib": 0.0})
    assert "offers no batch resources" in base
    assert end_sentence("colo", [], sample) == "colo: no pod was unschedulable at the end."


def test_verdict_line_before_the_sentences() -> None:
    """Issue 14 follow-up: the headline had bullets only, no one-line verdict."""
    from colo.sim.report_headline import verdict

    assert verdict(_summary(True)) == ("Co-location raised CPU use 1.11× and memory 1.20× and finished more batch "
                                       "tasks (1.03×), with LS CPU satisfaction unchanged at 100.0% and a modelled "
                                       "LS p99 latency inflation of 4.5% against 0.0% in baseline.")
    unmodelled = _summary(True)
    unmodelled["runs"]["colo"] = {**COLO, "ls_p99_inflation_avg_pct": -1.0}
    assert verdict(unmodelled).endswith("with LS CPU satisfaction unchanged at 100.0%.")
    assert verdict({"runs": {"colo": COLO}}) == ""


def _with(baseline: dict[str, float], colo: dict[str, float]) -> dict[str, Any]:
    base, co = {**RUN, **baseline}, {**COLO, **colo}
    return {"runs": {"baseline": base, "colo": co},
            "ratio_colo_over_baseline": {k: (co[k] / base[k] if base[k] else None) for k in base}}


@pytest.mark.parametrize(("baseline", "colo", "part"), [
    pytest.param({"batch_tasks_completed": 1000.0}, {"batch_tasks_completed": 800.0},
                 "finished fewer batch tasks (0.80×)", id="fewer"),
    pytest.param({"batch_tasks_completed": 1000.0}, {"batch_tasks_completed": 1070.0},
                 "finished more batch tasks (1.07×)", id="more"),
    pytest.param({"batch_tasks_completed": 1000.0}, {"batch_tasks_completed": 1000.0},
                 "finished as many batch tasks (1.00×)", id="as-many"),
    pytest.param({"batch_tasks_completed": 0.0}, {"batch_tasks_completed": 12.0},
                 "finished more batch tasks (from 0 to 12)", id="none-in-baseline"),
    pytest.param({"ls_p99_inflation_avg_pct": 19.0}, {"ls_p99_inflation_avg_pct": 22.8},
                 "a modelled LS p99 latency inflation of 22.8% against 19.0% in baseline.", id="inflation-both"),
    pytest.param({"ls_p99_inflation_avg_pct": -1.0}, {"ls_p99_inflation_avg_pct": 22.8},
                 "a modelled LS p99 latency inflation of 22.8% (not modelled in baseline).",
                 id="inflation-colo-only"),
])
def test_verdict_wording(baseline: dict[str, float], colo: dict[str, float], part: str) -> None:
    from colo.sim.report_headline import verdict

    assert part in verdict(_with(baseline, colo))


def test_disruptions_that_rose_say_why() -> None:
    lines = {s.split(" ")[0]: s for s in headline(_summary(True))}
    assert "by design: a high-priority job preempts" in lines["Preemptions"]
    assert "co-location puts more BE work" not in lines["BE"], "BE evictions fell here: no reason given"


def test_unschedulable_section_says_sums_over_nodes_and_instants() -> None:
    rows = [{"label": "Insufficient batch-cpu", "category": "cpu", "pods": 1, "pods_any": 1, "nodes": 4}]
    page = reasons_html({"unschedulable_reasons": {"colo": rows}, "series": {"colo": []}})
    assert "summed over all nodes" in page and "fragmentation" in page and "instants" in page
    assert "pods (on any node)" not in page and "rejected on ≥ 1 node" in page


def test_identical_lines_say_they_coincide() -> None:
    """LS CPU satisfaction at 100 % in both runs drew one line over the other with nothing said."""
    from colo.sim.metrics import RunMetrics, Sample
    from colo.sim.report_charts import charts

    runs = []
    for name in ("baseline", "colo"):
        r = RunMetrics(name)
        r.series = [Sample(t=60.0 * i, cpu_util=0.1 * i if name == "colo" else 0.0, mem_util=0.0, ls_satisfaction=1.0,
                           batch_running=0, batch_completed=0, suppress_events=0, evictions=0)
                    for i in range(3)]
        runs.append(r)
    svg = {c.split("</text>")[0].rsplit(">", 1)[-1]: c for c in charts(runs)}
    assert "colo = baseline (lines coincide)" in svg["LS CPU satisfaction (served / demanded)"]
    assert "lines coincide" not in svg["CPU utilization (used / capacity)"]
