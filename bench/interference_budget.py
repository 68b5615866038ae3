"""Issue 17 item 5 on this machine: the SLO-driven BE budget (``adaptive``) against the static suppress threshold
(``qos``) in one run, for BE ``cpu`` and ``membw`` work, against the target LS p99 ≤ +10 % over the LS pod alone
while BE uses ≥ 90 % of the CPU the LS pod leaves idle (docs/interference.md "Item 5 on the host").

The setup is ``bench/interference_calibration.py``'s (:mod:`interference_parts`: the node agent as its own process,
host backend, ``machine`` scope, 1 s loop; the LS HTTP pod doing ``--work-ms`` of CPU work per request at
``--rate`` requests/s open loop from a SCHED_FIFO client; BE pods of ``bench/interference_be.py``, ``--workers``
of each kind, all bound at the start, the ones of other kinds stopped with SIGSTOP). Isolation settings, one
NodeSLO each; both main ones use the suppress policy ``--policy`` (``cfsQuota``: on 2 CPUs the ``cpuset`` policy
never gives BE fewer than 2 CPUs, so it limits nothing there):

==============  ==============================================================================================
``qos``         the default NodeSLO with ``cpu_suppress.policy = --policy``: cpu.idle + the static 65 % threshold
``adaptive``    ``qos`` + ``be_budget`` on (``--signal``, ``--target``, ``--max-percent``, ``--step-percent``,
                ``--hold-s``): the threshold grows from 65 % while the LS signal stays near its BE-free baseline
``qos_cpuset``  (``--cpuset-row``) the agent's default NodeSLO unchanged (suppress ``cpuset`` 65 %)
==============  ==============================================================================================

The budget learns its baseline from loops without BE work, and switching it off forgets it, so the ``ls_alone``
window runs under the ``adaptive`` NodeSLO (every BE pod stopped: the policy has nothing to act on) and the
``adaptive`` window follows it directly; BE then runs ``--ramp-s`` uncounted seconds (ended early once the
threshold reaches the ceiling) before the window's ``--warmup-s`` and counted ``--seconds``. Order per kind:
even rounds ``ls_alone``, ``adaptive``, ``qos`` (, ``qos_cpuset``); odd rounds the static ones first.

Per window (a JSON line): :meth:`interference_parts.Bench.measure`'s figures plus ``idle_cpus`` = CPUs − LS
cores, ``idle_cpus_net`` = CPUs − LS cores − the bench's own processes (``bench_cpu_cores``: this script with
the load generator, the agent, nats-server, redis-server — they stand for other machines and host services),
``be_share_of_idle`` and ``be_share_of_idle_net`` = BE cores over each, ``p99_inflation_percent`` over the
round's ``ls_alone`` window of the same kind, and ``budget`` (the agent's ``suppress`` QoSEvents: the threshold
at the window's start and end, its min/max, the cuts, the phases, the signal and baseline last reported).
Per cell (its quiet windows' requests pooled, all of them when none was quiet) the same against the pooled
``ls_alone`` requests of the same kind; the summary JSON line's ``item5`` says per kind and setting whether the
target is met with either idle definition.

Run (root, writable cgroups): ``.venv/bin/python bench/interference_budget.py`` (~2 min per kind and round)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import psutil
from interference_be import KINDS
from interference_calibration import _csv, be_spec
from interference_load import generate, percentiles_ms
from interference_parts import (
    LS_UID,
    NODE,
    ROOT,
    Bench,
    add_quiet_options,
    agent_session,
    calibrate_work,
    interrupt,
    llc_bytes,
    machine_facts,
    sched_counters,
    wait_for_quiet,
)

from colo import subjects
from colo.messages import BEBudgetState, BEBudgetStrategy, CPUSuppressStrategy, NodeMetric, NodeSLO, QoSEvent
from colo_node_agent.cgroups.layout import pod_dir

TARGET_P99_INFLATION_PERCENT = 10.0  # issue 17 item 5
TARGET_BE_SHARE_OF_IDLE = 0.9  # issue 17 item 5
STATIC_THRESHOLD_PERCENT = CPUSuppressStrategy().threshold_percent


@dataclass(frozen=True)
class Setting:
    """One isolation setting: its NodeSLO and the BE group state that shows it is applied."""

    name: str
    slo: NodeSLO
    expect: dict[str, str]


def settings(args: argparse.Namespace) -> dict[str, Setting]:
    """The isolation settings (module doc) by name, from the command line's policy and budget options."""
    suppress = CPUSuppressStrategy(policy=args.policy)
    budget = BEBudgetStrategy(enabled=True, signal=args.signal, target_increase_percent=args.target,
                              max_percent=args.max_percent, step_percent=args.step_percent, hold_s=args.hold_s)
    quota = {"cpu.cfs_quota_us": ">0" if args.policy == "cfsQuota" else "-1"}
    idle = {"cpu.idle": "1"}
    out = [Setting("qos", NodeSLO(node=NODE, cpu_suppress=suppress), idle | quota),
           Setting("adaptive", NodeSLO(node=NODE, cpu_suppress=suppress, be_budget=budget), idle | quota)]
    if args.cpuset_row:
        out.append(Setting("qos_cpuset", NodeSLO(node=NODE), idle | {"cpu.cfs_quota_us": "-1"}))
    return {s.name: s for s in out}


@dataclass
class BudgetLog:
    """The agent's ``suppress`` QoSEvents as (time.time(), detail), to follow the budget's threshold."""

    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    states: list[tuple[float, BEBudgetState]] = field(default_factory=list)
    """``NodeMetric.be_budget`` as reported (every 5 s)."""

    async def on_event(self, msg: QoSEvent) -> None:
        if msg.kind == "suppress":
            self.events.append((time.time(), dict(msg.detail)))

    async def on_metric(self, msg: NodeMetric) -> None:
        if msg.be_budget is not None:
            self.states.append((time.time(), msg.be_budget))

    def threshold(self) -> float:
        """The budget's threshold now (percent): the last event's, the static one before any."""
        for _, d in reversed(self.events):
            if "be_budget_threshold_percent" in d:
                return float(d["be_budget_threshold_percent"])
        return float(STATIC_THRESHOLD_PERCENT)

    def summary(self, t0: float, t1: float, start_threshold: float) -> dict[str, Any]:
        """What the budget did between ``t0`` and ``t1``: thresholds (percent), cuts, phases, last signal."""
        mine = [d for at, d in self.events if t0 <= at <= t1 and "be_budget_threshold_percent" in d]
        th = [start_threshold, *(float(d["be_budget_threshold_percent"]) for d in mine)]
        out: dict[str, Any] = {"threshold_start_percent": start_threshold, "threshold_end_percent": th[-1],
                               "threshold_min_percent": min(th), "threshold_max_percent": max(th),
                               "changes": len(mine), "cuts": sum(d["be_budget_phase"] == "cut" for d in mine),
                               "phases": sorted({str(d["be_budget_phase"]) for d in mine})}
        reported = [st for at, st in self.states if t0 <= at <= t1]
        if reported:
            last = reported[-1]
            out |= {"reported_phases": sorted({st.phase for st in reported}), "signal": last.signal,
                    "baseline": last.baseline, "baseline_samples": last.baseline_samples}
        return out


@dataclass
class LoopSignals:
    """The LS pod's signals once a second during a window, as the agent's loop sees them: the server's Δwait/Δrun
    (``/proc/<pid>/schedstat``) and the pod group's PSI ``cpu.some`` avg10 (the hybrid ``unified`` mount or v2)."""

    b: Bench
    runq: list[float] = field(default_factory=list)
    psi: list[float] = field(default_factory=list)

    def _psi(self) -> float:
        cg = self.b.cg
        base = ROOT / "unified" if cg.v1 else ROOT
        try:
            line = (base / cg.parent / pod_dir("LS", LS_UID) / "cpu.pressure").read_text().splitlines()[0]
        except (OSError, IndexError):
            return -1.0
        return float(dict(p.split("=", 1) for p in line.split()[1:])["avg10"])

    async def sample(self, seconds: float) -> None:
        pids = self.b.cg.members(pod_dir("LS", LS_UID))
        prev = sched_counters(pids)
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            await asyncio.sleep(1.0)
            cur = sched_counters(pids)
            run, wait = cur[0] - prev[0], cur[1] - prev[1]
            prev = cur
            if run > 0:
                self.runq.append(wait / run)
            self.psi.append(self._psi())

    def summary(self) -> dict[str, float]:
        """Mean, standard deviation and p10/p90 of each signal over the window's seconds."""
        out: dict[str, float] = {}
        for name, xs in (("runq_wait", self.runq), ("cpu_pressure", [x for x in self.psi if x >= 0])):
            if xs:
                a = np.array(xs)
                out |= {f"{name}_mean": round(float(a.mean()), 4), f"{name}_std": round(float(a.std()), 4),
                        f"{name}_p10": round(float(np.percentile(a, 10)), 4),
                        f"{name}_p90": round(float(np.percentile(a, 90)), 4)}
        return out


async def _ramp(b: Bench, log: BudgetLog, ceiling: float, seconds: float) -> float:
    """Let the budget grow (uncounted) for up to ``seconds`` or until its threshold reaches ``ceiling``;
    returns the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and log.threshold() < ceiling:
        await asyncio.sleep(0.5)
    return round(time.monotonic() - t0, 1)


async def _window(b: Bench, log: BudgetLog, name: str, rnd: int, kind: str, active: set[str], s: Setting,
                  ramp_s: float) -> tuple[dict[str, Any], list[float]]:
    """One quiet window (≤ ``--attempts`` tries) of setting ``s`` with the BE pods ``active`` running."""
    args = b.args
    b.run_only(active)
    for attempt in range(1, args.attempts + 1):
        # the LS pod keeps serving between windows, as a real one does: loops without requests have no
        # run-queue signal, and the few requests at a window's edges give the budget outliers to learn from
        filler = asyncio.create_task(generate(b.port, args.rate, 86400.0, 0.0, lambda _: None))
        try:
            await b.apply(s.slo, s.expect)
            await asyncio.sleep(args.settle_s)
            ramped = await _ramp(b, log, float(s.slo.be_budget.max_percent), ramp_s) if ramp_s > 0 else 0.0
            await b.wait_quiet()
        finally:
            filler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await filler
        th0, t0 = log.threshold(), time.time()
        loop = LoopSignals(b)
        sampler = asyncio.create_task(loop.sample(args.warmup_s + args.seconds))
        out, lat = await b.measure(name, rnd, args.seconds)
        await sampler
        out["loop_signals"] = loop.summary()
        out |= {"be_kind": kind, "setting": s.name, "attempt": attempt, "ramp_s": ramped,
                "quiet": out["other_cpu_cores"] <= args.max_other}
        if s.slo.be_budget.enabled:
            out["budget"] = log.summary(t0 + args.warmup_s, time.time(), th0)
        if out["quiet"] or attempt == args.attempts:
            return out, lat
        print(json.dumps(out), flush=True)
        print(f"{name}: other work used {out['other_cpu_cores']} cores > {args.max_other}: window not counted",
              flush=True)
    raise AssertionError("unreachable")


def shares(be: float, ls: float, own: float, cpus: int) -> dict[str, float]:
    """The two idle definitions (module doc) and BE's share of each; cores."""
    idle, net = cpus - ls, cpus - ls - own
    return {"idle_cpus": round(idle, 3), "idle_cpus_net": round(net, 3),
            "be_share_of_idle": round(be / idle, 3) if idle > 0 else -1.0,
            "be_share_of_idle_net": round(be / net, 3) if net > 0 else -1.0}


def _order(rnd: int, names: list[str]) -> list[str]:
    static = [n for n in names if n != "adaptive"]
    return ["ls_alone", "adaptive", *static] if rnd % 2 == 0 else [*static, "ls_alone", "adaptive"]


async def measure_all(args: argparse.Namespace, work_n: int, kinds: list[str], table: dict[str, Setting],
                      cpus: int) -> tuple[list[dict[str, Any]], list[list[float]]]:
    """Every window of the run (module doc), in order: (figures, latencies in seconds)."""
    llc = llc_bytes() or 32 << 20
    sizes = {"cpu": 0, "membw": args.membw_bytes or 8 * llc, "cache": llc}
    batch_cpu = max(1, 1000 // (len(kinds) * args.workers))  # Σ ≈ 1000 m: BE shares ≈ 1024, as the calibration
    specs = [be_spec(k, i, batch_cpu, sizes[k]) for k in kinds for i in range(args.workers)]
    windows: list[dict[str, Any]] = []
    latencies: list[list[float]] = []
    log = BudgetLog()
    async with agent_session(args, work_n, sum(s.requests.batch_memory for s in specs)) as b:
        await b.bus.subscribe(subjects.NODE_QOS, log.on_event, durable="bench-budget")
        await b.bus.subscribe(subjects.NODE_METRIC, log.on_metric, durable="bench-budget-metric")
        await b.bind_be(specs)
        b.run_only(set())
        for rnd in range(args.rounds):
            for kind in kinds:
                alone: dict[str, Any] = {}
                for name in _order(rnd, list(table)):
                    if name == "ls_alone":
                        out, lat = await _window(b, log, name, rnd, kind, set(), table["adaptive"], 0.0)
                        alone = out
                    else:
                        active = {f"be-{kind}-{i}" for i in range(args.workers)}
                        ramp = args.ramp_s if name == "adaptive" else 0.0
                        out, lat = await _window(b, log, f"{kind}/{name}", rnd, kind, active, table[name], ramp)
                    out |= shares(out["be_cpu_cores_used"], out["ls_cpu_cores_used"], out["bench_cpu_cores"], cpus)
                    out["cell"] = name
                    windows.append(out)
                    latencies.append(lat)
                for w in windows:
                    if w["round"] == rnd and w["be_kind"] == kind:
                        w["p99_inflation_percent"] = round((w["p99_ms"] / alone["p99_ms"] - 1) * 100, 1)
                        print(json.dumps(w), flush=True)
    return windows, latencies


def _mean(ws: list[dict[str, Any]], key: str) -> float:
    return float(np.mean([w[key] for w in ws]))


def cells(windows: list[dict[str, Any]], latencies: list[list[float]], cpus: int) -> list[dict[str, Any]]:
    """Per (kind, cell): quiet windows pooled (all when none was quiet); p99 inflation over the kind's pooled
    ``ls_alone`` requests."""
    out = []
    keys = dict.fromkeys((w["be_kind"], w["cell"]) for w in windows)
    for kind, cell in keys:
        idx = [i for i, w in enumerate(windows) if (w["be_kind"], w["cell"]) == (kind, cell)]
        idx = [i for i in idx if windows[i]["quiet"]] or idx
        ws, lat = [windows[i] for i in idx], [x for i in idx for x in latencies[i]]
        a_idx = [i for i, w in enumerate(windows) if (w["be_kind"], w["cell"]) == (kind, "ls_alone")]
        a_idx = [i for i in a_idx if windows[i]["quiet"]] or a_idx
        base = percentiles_ms([x for i in a_idx for x in latencies[i]])
        p = percentiles_ms(lat)
        be, ls, own = _mean(ws, "be_cpu_cores_used"), _mean(ws, "ls_cpu_cores_used"), _mean(ws, "bench_cpu_cores")
        row: dict[str, Any] = {
            "be_kind": kind, "cell": cell, "windows": len(ws), "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"],
            "p99_inflation_percent": round((p["p99_ms"] / base["p99_ms"] - 1) * 100, 1),
            "p99_inflation_by_window": [w["p99_inflation_percent"] for w in ws],
            "be_cores": round(be, 3), "ls_cores": round(ls, 3), "bench_cores": round(own, 3),
            **shares(be, ls, own, cpus), "other_cpu_cores": round(_mean(ws, "other_cpu_cores"), 3),
            "runq_wait_ratio": round(_mean(ws, "runq_wait_ratio"), 4)}
        loops = [w["loop_signals"] for w in ws if w.get("loop_signals")]
        if loops:
            row["loop_signals"] = {k: round(float(np.mean([x[k] for x in loops if k in x])), 4)
                                   for k in loops[0]}
        allowed = [w["be_cpu_allowed_milli"] for w in ws if "be_cpu_allowed_milli" in w]
        if allowed:
            row["be_cpu_allowed_milli"] = round(float(np.mean(allowed)))
        budgets = [w["budget"] for w in ws if "budget" in w]
        if budgets:
            row["threshold_percent"] = {k: [bd[k] for bd in budgets] for k in
                                        ("threshold_start_percent", "threshold_end_percent", "threshold_min_percent",
                                         "threshold_max_percent")}
            row["budget_cuts"] = sum(bd["cuts"] for bd in budgets)
        elif cell != "ls_alone":
            row["threshold_percent"] = STATIC_THRESHOLD_PERCENT
        out.append(row)
    return out


def item5(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per BE kind and setting: p99 inflation, BE cores, both idle shares, threshold, and whether the target is
    met with each idle definition (``met``: CPUs − LS; ``met_net``: also less the bench's own processes)."""
    out: dict[str, Any] = {"target_p99_inflation_percent": TARGET_P99_INFLATION_PERCENT,
                           "target_be_share_of_idle": TARGET_BE_SHARE_OF_IDLE}
    for r in rows:
        if r["cell"] == "ls_alone":
            continue
        ok = r["p99_inflation_percent"] <= TARGET_P99_INFLATION_PERCENT
        out.setdefault(r["be_kind"], {})[r["cell"]] = {
            k: r[k] for k in ("p99_inflation_percent", "be_cores", "be_share_of_idle", "be_share_of_idle_net",
                              "threshold_percent", "other_cpu_cores") if k in r} | {
            "met": ok and r["be_share_of_idle"] >= TARGET_BE_SHARE_OF_IDLE,
            "met_net": ok and r["be_share_of_idle_net"] >= TARGET_BE_SHARE_OF_IDLE}
    return out


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'kind':<6} {'setting':<11} {'p50 ms':>7} {'p99 ms':>8} {'Δp99 %':>8} {'BE cores':>8} {'BE/idle':>7} "
          f"{'BE/idle net':>11} {'other':>6} {'threshold %':>12}")
    for r in rows:
        th = r.get("threshold_percent", "")
        th_text = f"{max(th['threshold_end_percent'])}" if isinstance(th, dict) else str(th)
        print(f"{r['be_kind']:<6} {r['cell']:<11} {r['p50_ms']:>7.2f} {r['p99_ms']:>8.2f} "
              f"{r['p99_inflation_percent']:>8.1f} {r['be_cores']:>8.3f} {r['be_share_of_idle']:>7.3f} "
              f"{r['be_share_of_idle_net']:>11.3f} {r['other_cpu_cores']:>6.2f} {th_text:>12}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    kinds = _csv(args.kinds, KINDS, "kinds")
    table = settings(args)
    load0 = wait_for_quiet(args.max_load, args.load_wait_s)
    work_n, work_ms = calibrate_work(args)
    cpus = psutil.cpu_count() or 1
    print(f"load average {load0:.2f}; handler work {work_n} iterations = {work_ms:.3f} ms", flush=True)
    windows, latencies = await measure_all(args, work_n, kinds, table, cpus)
    rows = cells(windows, latencies, cpus)
    print_table(rows)
    other = [w["other_cpu_cores"] for w in windows]
    return {"bench": "interference_budget", "machine": machine_facts(), "kinds": kinds, "workers": args.workers,
            "rounds": args.rounds, "seconds": args.seconds, "rate_rps": args.rate, "work_ms": round(work_ms, 3),
            "policy": args.policy, "budget": msgspec.structs.asdict(table["adaptive"].slo.be_budget),
            "ramp_s": args.ramp_s, "load1_start": round(load0, 2),
            "noise": {"max_other_cpu_cores_threshold": args.max_other, "parent_shares": args.parent_shares or 1024,
                      "quiet_windows": sum(bool(w["quiet"]) for w in windows), "windows": len(windows),
                      "other_cpu_cores_mean": round(float(np.mean(other)), 3),
                      "other_cpu_cores_max": round(max(other), 3)},
            "cells": rows, "item5": item5(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_quiet_options(ap)
    ap.add_argument("--seconds", type=float, default=20.0, help="counted part of a window, s")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over every cell, interleaved")
    ap.add_argument("--kinds", default="cpu,membw", help="BE kinds, comma-separated")
    ap.add_argument("--workers", type=int, default=4, help="BE workers (pods) of each kind, all running in a cell")
    ap.add_argument("--membw-bytes", type=int, default=0, help="each membw array, bytes (0: 8 x LLC)")
    ap.add_argument("--policy", choices=("cfsQuota", "cpuset"), default="cfsQuota",
                    help="suppress policy of qos and adaptive")
    ap.add_argument("--cpuset-row", action="store_true", help="add qos_cpuset: the default NodeSLO (cpuset)")
    ap.add_argument("--signal", choices=("runq_wait", "cpu_pressure", "cpi"), default="runq_wait",
                    help="the BE budget's LS signal")
    ap.add_argument("--target", type=float, default=50.0,
                    help="the budget's target_increase_percent (50: the LS-alone run-queue wait of one loop swings "
                         "by 9-29 %% (1 sigma) on this machine, so +10 %% cuts on noise; docs/interference.md)")
    ap.add_argument("--max-percent", type=int, default=95, help="the budget's ceiling, percent of capacity")
    ap.add_argument("--step-percent", type=int, default=2, help="the budget's growth per agent loop, percent")
    ap.add_argument("--hold-s", type=float, default=60.0, help="the budget's hold after a cut, s")
    ap.add_argument("--ramp-s", type=float, default=30.0,
                    help="uncounted BE time under adaptive before its window (ends at the ceiling), s")
    args = ap.parse_args()
    if args.workers < 1:
        raise SystemExit(f"--workers: >= 1, got {args.workers}")
    signal.signal(signal.SIGTERM, interrupt)
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
