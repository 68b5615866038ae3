"""``colo sim`` / ``python -m colo.sim`` / ``make demo``: scenario → both runs → report."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from colo.codec import encode
from colo.sim.presets import PRESETS, Preset, preset
from colo.sim.report import write_report
from colo.sim.run import run_all
from colo.sim.scenario import ScenarioParams
from colo.sim.services import ServiceError
from colo.sim.traces import TraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's command-line options (shared by ``python -m colo.sim`` and ``colo sim``). Scenario
    parameters left out take the value of the ``--scenario`` preset (:mod:`colo.sim.presets`), else the
    :class:`ScenarioParams` default."""
    d = ScenarioParams()
    parser.add_argument("--scenario", default="default", choices=sorted(PRESETS),
                        help="named scenario: " + "; ".join(f"{p.name}: {p.summary}" for p in PRESETS.values())
                             + " (default %(default)s)")
    parser.add_argument("--nodes", type=int, default=None, help=f"nodes sampled from the trace (default {d.nodes})")
    parser.add_argument("--hours", type=float, default=None, help=f"virtual hours (default {d.hours:g})")
    parser.add_argument("--seed", type=int, default=None, help=f"scenario seed (default {d.seed})")
    parser.add_argument("--out", type=Path, default=Path("out/demo"), help="output directory (default %(default)s)")
    parser.add_argument("--runs", default=None, help="comma-separated runs (default: the scenario's, baseline,colo)")
    parser.add_argument("--ls-cpu-fraction", type=float, default=None,
                        help=f"target share of cluster CPU requested by LS pods (default {d.ls_cpu_fraction})")
    parser.add_argument("--batch-scale", type=float, default=None,
                        help=f"multiplier on the nodes/1313 batch scaling (default {d.batch_scale})")
    parser.add_argument("--be-cpu-pods-fraction", type=float, default=None,
                        help="CPU-heavy batch: gpu-v2023's CPU-only BE pods up to this share of the cluster's "
                             f"CPU-time (default {d.be_cpu_pods_fraction:g} = none; docs/scenario.md)")
    parser.add_argument("--be-cpu-pods-arrival-fraction", type=float, default=None,
                        help="the CPU-heavy batch pods arrive over this first share of the batch window "
                             f"(default {d.be_cpu_pods_arrival_fraction:g}; the saturated preset 0.25)")
    parser.add_argument("--jobs", action=argparse.BooleanOptionalAction, default=None,
                        help="batch tasks enter as Jobs (gangs) of teams with elastic quotas, a few at high "
                             "priority; --no-jobs submits them as bare pods (default: jobs)")
    parser.add_argument("--teams", type=int, default=None, help=f"teams sharing the batch tasks (default {d.teams})")
    parser.add_argument("--scenario-only", action="store_true", help="print the scenario description and exit")


_OPTION_FIELDS = ("nodes", "hours", "seed", "ls_cpu_fraction", "batch_scale", "be_cpu_pods_fraction",
                  "be_cpu_pods_arrival_fraction", "jobs", "teams")
"""The options that set :class:`ScenarioParams` fields of the same name."""


def scenario_params(args: argparse.Namespace, chosen: Preset) -> ScenarioParams:
    """The parameters a run uses: each option given, else the preset's value, else the default (jobs on
    unless the preset or ``--no-jobs`` says otherwise)."""
    values: dict[str, object] = {"jobs": True, **chosen.params}
    for name in _OPTION_FIELDS:
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
    return ScenarioParams(**values)  # type: ignore[arg-type]


def run_demo(args: argparse.Namespace, console: Console | None = None) -> int:
    """Build the scenario, run it, write the report. Returns the exit code (1 on invariant violations)."""
    # not a terminal (a pipe, a CI log): wide lines, so that paths and the progress bars stay whole
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    try:
        chosen = preset(getattr(args, "scenario", "default"))
        params = scenario_params(args, chosen)
        scenario = chosen.build(params)
    except (ValueError, TraceError) as exc:
        console.print(f"[red]scenario: {escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 2
    if args.scenario_only:
        console.print_json(json.dumps(scenario.description))
        return 0
    d = scenario.description
    pods = (f"{d['gpu_pods']} GPU pods ({d['gpu_pods_ls']} LS, {d['gpu_pods_be']} BE; {d['gpu_requested']:g} GPUs "
            f"requested of {d['cluster_gpus']}, trace time ÷{d['gpu_time_compression']:g})" if "gpu_pods" in d
            else f"{d['ls_pods']} LS pods ({d['ls_cpu_requested_fraction']:.0%} of CPU requested)")
    console.print(f"scenario: {d['nodes']} nodes, {pods}, "
                  f"{d['batch_pods']} batch pods over {params.hours:g} h"
                  + (f" as {d['jobs']} jobs ({d['gangs']} gangs) of {params.teams} teams" if params.jobs else "")
                  + (f", {d['be_cpu_pods']} CPU-heavy BE pods (gpu-v2023)" if "be_cpu_pods" in d else ""))
    runs = (tuple(r.strip() for r in args.runs.split(",") if r.strip()) if args.runs is not None
            else chosen.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        results = asyncio.run(run_all(scenario, args.out, runs, console=console))
    except ServiceError as exc:
        console.print(f"[red]run failed: {escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 2
    # the COLO_* settings the services inherited from this environment, so that a report says what it ran with
    settings_env = {k: v for k, v in sorted(os.environ.items())
                    if k.startswith("COLO_") and k not in ("COLO_NATS_URL", "COLO_REDIS_URL", "COLO_TRACES_DIR")}
    description = {**scenario.description, "settings_env": settings_env}
    summary = write_report(args.out, [r.metrics for r in results], description, console)
    for r in results:
        # the descheduler's jobs, one JSON object a line, as on the bus (docs/descheduler.md "Migration jobs")
        (args.out / f"{r.metrics.name}-migrations.jsonl").write_bytes(
            b"".join(encode(ev) + b"\n" for ev in r.metrics.migration_events))
        # each team's quota at the end of every step (docs/scenario.md "Jobs in the report")
        (args.out / f"{r.metrics.name}-quotas.jsonl").write_text(
            "".join(json.dumps(row, sort_keys=True) + "\n" for row in r.metrics.jobs.quota_rows()))
    for r in results:
        if r.metrics.workload_at and not r.metrics.owner_of:
            console.print(f"[red]{r.metrics.name}: none of {len(r.metrics.workload_at)} workloads was expanded into "
                          "pods (no admission of workload.submitted?); --no-jobs submits bare pods[/]",
                          highlight=False, soft_wrap=True)
    bad = 0
    for r in results:
        for v in r.violations[:20]:
            console.print(f"[red]{r.metrics.name}: invariant violated: {v}[/]")
        bad += len(r.violations)
    console.print(f"report: {args.out / 'report.html'}  summary: {args.out / 'summary.json'}  "
                  f"migrations: {args.out}/<run>-migrations.jsonl  quotas: {args.out}/<run>-quotas.jsonl")
    return 1 if bad or not summary else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m colo.sim``."""
    parser = argparse.ArgumentParser(prog="python -m colo.sim", description=__doc__)
    add_arguments(parser)
    return run_demo(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
