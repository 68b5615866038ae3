"""The interference calibration table: LS latency and interference signals beside three kinds of BE work at
several intensities, under each isolation setting, measured with a real node agent on this machine.

The setup is ``bench/interference.py``'s (:mod:`interference_parts`: the agent as its own process, host backend,
an LS HTTP pod doing ``--work-ms`` of pure-Python CPU work per request at ``--rate`` requests/s open loop from a
SCHED_FIFO client). BE pods are real processes (``bench/interference_be.py``), ``max(--intensities)`` of each
kind, all bound at the start; a cell lets the first ``intensity`` pods of its kind run and keeps every other BE
pod stopped (SIGSTOP), so the BE group's requests, hence its cpu.shares, are the same in every cell:

==========  =====================================================================================================
``cpu``     ``while True: pass``
``membw``   NumPy copies between two arrays of ``--membw-bytes`` (default 8 × the LLC size) each
``cache``   random gathers over an array of ``--cache-bytes`` (default the LLC size, from sysfs)
==========  =====================================================================================================

Isolation settings (one NodeSLO each, published to the agent; the script waits until the BE group shows it):

==============  =============================================================================================
``none``        plain shares (Σ batch-cpu), no ``cpu.idle``, no suppress
``sched_idle``  ``cpu.idle`` = 1 on the BE group, no suppress
``qos``         the agent's default NodeSLO (``cpu.idle`` + suppress ``cpuset`` 65 %)
``adaptive``    ``qos`` + ``be_budget=BEBudgetStrategy(enabled=True)`` (an agent without that strategy
                ignores it: then it measures the same as ``qos``)
==============  =============================================================================================

Order: for each of ``--rounds`` rounds, for each kind: an ``ls_alone`` window (every BE pod stopped), then for
each intensity every isolation setting. Windows wait for quiet like ``bench/interference.py`` (``--max-other``,
``--quiet-wait-s``, ``--attempts``, ``--max-load``: relax them on a shared machine).

Per window (a JSON line): the figures of :meth:`interference_parts.Bench.measure` plus ``be_kind``,
``intensity``, ``isolation``, ``p99_inflation_percent`` over the ``ls_alone`` window of the same round and kind,
``be_share_of_idle`` = BE cores / (CPUs − LS cores). Per cell (its quiet windows' requests pooled, all of its
windows when none was quiet): the row of the calibration file (:mod:`interference_calibration_file`), where
``p99_inflation_percent`` compares with the pooled ``ls_alone`` requests of the same rounds and the signals are
the windows' means: ``runq_wait_ratio`` = Δwait/Δrun of the LS server (``/proc/<pid>/schedstat``),
``cpu_pressure_some`` = the node's PSI ``cpu.some`` over the window (Δ``total`` / window, percent: the quantity
``avg10`` smooths), ``throttled_ratio`` = Δnr_throttled/Δnr_periods of the LS pod group, ``cpi`` = −1 (no perf).

Prints one JSON line per window, a table, the issue-17 item-5 comparison (``qos`` vs ``adaptive`` for ``cpu`` and
``membw`` at the highest intensity: p99 inflation ≤ +10 %, BE ≥ 90 % of the CPU the LS pod leaves idle), then a
summary JSON line; writes the calibration file to ``--out`` (default: the node agent's package data,
``services/node-agent/colo_node_agent/data/interference-calibration.json``).

Run: ``make interference`` (root, writable cgroup v1 or v2; ~40 min with the defaults: 2 rounds of 39 windows)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import signal
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from interference_be import KINDS
from interference_calibration_file import ISOLATIONS, SCHEMA, write
from interference_load import percentiles_ms
from interference_parts import (
    MI,
    NODE,
    Bench,
    add_quiet_options,
    agent_session,
    calibrate_work,
    interrupt,
    llc_bytes,
    machine_facts,
    wait_for_quiet,
)

from colo.messages import BEBudgetStrategy, CPUSuppressStrategy, NodeSLO, PodSpec, Resources

BE_SCRIPT = Path(__file__).resolve().parent / "interference_be.py"
DEFAULT_OUT = (Path(__file__).resolve().parents[1] / "services" / "node-agent" / "colo_node_agent" / "data"
               / "interference-calibration.json")
TARGET_P99_INFLATION_PERCENT = 10.0  # issue 17 item 5
TARGET_BE_SHARE_OF_IDLE = 0.9  # issue 17 item 5


@dataclass(frozen=True)
class Isolation:
    """One isolation setting: its NodeSLO and the BE group state that shows it is applied."""

    name: str
    slo: NodeSLO
    expect: dict[str, str]


def isolations(be_shares: int) -> dict[str, Isolation]:
    """The isolation settings (module doc) by name; ``be_shares`` the BE group's cpu.shares from its requests."""
    off = CPUSuppressStrategy(enabled=False)
    unlimited, idle = {"cpu.cfs_quota_us": "-1"}, {"cpu.idle": "1"}
    settings = [
        Isolation("none", NodeSLO(node=NODE, be_cpu_idle=False, cpu_suppress=off),
                  {"cpu.idle": "0", "cpu.shares": str(be_shares)} | unlimited),
        Isolation("sched_idle", NodeSLO(node=NODE, be_cpu_idle=True, cpu_suppress=off), idle | unlimited),
        Isolation("qos", NodeSLO(node=NODE), idle | unlimited),
        Isolation("adaptive", NodeSLO(node=NODE, be_budget=BEBudgetStrategy(enabled=True)), idle | unlimited),
    ]
    return {s.name: s for s in settings}


def be_spec(kind: str, i: int, batch_cpu: int, nbytes: int) -> PodSpec:
    """BE pod ``be-<kind>-<i>`` running ``interference_be.py kind nbytes``; its memory limit holds the arrays."""
    uid = f"be-{kind}-{i}"
    memory = (2 * nbytes if kind == "membw" else nbytes) + 192 * MI
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500,
                   command=[sys.executable, str(BE_SCRIPT), kind, str(nbytes)],
                   requests=Resources(batch_cpu=batch_cpu, batch_memory=memory),
                   limits=Resources(batch_memory=memory))


def _csv(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [x for x in text.split(",") if x]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise SystemExit(f"--{what}: {bad or 'empty'} not in {list(allowed)}")
    return items


def _intensities(text: str) -> list[int]:
    try:
        items = [int(x) for x in text.split(",") if x]
    except ValueError as e:
        raise SystemExit(f"--intensities: {e}") from e
    if not items or min(items) < 1:
        raise SystemExit(f"--intensities: BE worker counts >= 1, got {text!r}")
    return sorted(set(items))


async def _window(b: Bench, name: str, rnd: int, active: set[str], iso: Isolation | None,
                  tags: dict[str, Any]) -> tuple[dict[str, Any], list[float]]:
    """The quiet window (≤ ``--attempts`` tries) of one cell; every try is printed."""
    args = b.args
    b.run_only(active)
    for attempt in range(1, args.attempts + 1):
        await b.apply(iso.slo if iso else None, iso.expect if iso else {})
        await asyncio.sleep(args.settle_s)
        await b.wait_quiet()
        out, lat = await b.measure(name, rnd, args.seconds)
        out |= tags | {"attempt": attempt, "quiet": out["other_cpu_cores"] <= args.max_other}
        if iso is None:
            out["be_group"] = {}
        if out["quiet"] or attempt == args.attempts:
            return out, lat
        print(json.dumps(out), flush=True)
        print(f"{name}: other work used {out['other_cpu_cores']} cores > {args.max_other}: window not counted",
              flush=True)
    raise AssertionError("unreachable")


async def measure_all(args: argparse.Namespace, work_n: int, kinds: list[str], levels: list[int],
                      settings: list[Isolation], batch_cpu: int, sizes: dict[str, int], cpus: int
                      ) -> tuple[list[dict[str, Any]], list[list[float]]]:
    """Every window of the run (module doc "Order"): (figures, latencies in seconds), in the same order."""
    specs = [be_spec(k, i, batch_cpu, sizes[k]) for k in kinds for i in range(max(levels))]
    windows: list[dict[str, Any]] = []
    latencies: list[list[float]] = []
    async with agent_session(args, work_n, sum(s.requests.batch_memory for s in specs)) as b:
        await b.bind_be(specs)
        b.run_only(set())
        for rnd in range(args.rounds):
            for kind in kinds:
                alone, alone_lat = await _window(b, "ls_alone", rnd, set(), None, {"be_kind": kind})
                print(json.dumps(alone), flush=True)
                windows.append(alone)
                latencies.append(alone_lat)
                for n in levels:
                    active = {f"be-{kind}-{i}" for i in range(n)}
                    for iso in settings:
                        tags = {"be_kind": kind, "intensity": n, "isolation": iso.name}
                        out, lat = await _window(b, f"{kind}x{n}/{iso.name}", rnd, active, iso, tags)
                        out["p99_inflation_percent"] = round((out["p99_ms"] / alone["p99_ms"] - 1) * 100, 1)
                        out["be_share_of_idle"] = round(out["be_cpu_cores_used"] /
                                                        (cpus - out["ls_cpu_cores_used"]), 3)
                        print(json.dumps(out), flush=True)
                        windows.append(out)
                        latencies.append(lat)
    return windows, latencies


def _mean(ws: list[dict[str, Any]], key: str) -> float:
    values = [w[key] for w in ws if w[key] >= 0]
    return float(np.mean(values)) if values else -1.0


def rows_of(windows: list[dict[str, Any]], latencies: list[list[float]], cpus: int
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the LS-alone figures, the calibration rows) from every window (module doc "Per cell")."""
    def pooled(idx: list[int]) -> tuple[list[dict[str, Any]], list[float]]:
        quiet = [i for i in idx if windows[i]["quiet"]] or idx
        return [windows[i] for i in quiet], [x for i in quiet for x in latencies[i]]

    alone_ws, alone_lat = pooled([i for i, w in enumerate(windows) if w["run"] == "ls_alone"])
    alone = {**percentiles_ms(alone_lat), "cpu_cores": round(_mean(alone_ws, "ls_cpu_cores_used"), 3)}
    cells = dict.fromkeys((w["be_kind"], w["intensity"], w["isolation"]) for w in windows if "isolation" in w)
    rows = []
    for kind, n, iso in cells:
        ws, lat = pooled([i for i, w in enumerate(windows)
                          if (w.get("be_kind"), w.get("intensity"), w.get("isolation")) == (kind, n, iso)])
        rounds = {w["round"] for w in ws}
        _, base_lat = pooled([i for i, w in enumerate(windows) if w["run"] == "ls_alone" and w["round"] in rounds])
        p, base = percentiles_ms(lat), percentiles_ms(base_lat)
        be, ls = _mean(ws, "be_cpu_cores_used"), _mean(ws, "ls_cpu_cores_used")
        rows.append({"be_kind": kind, "intensity": n, "isolation": iso, "be_cores": round(be, 3),
                     "be_fraction": round(be / cpus, 3), "be_share_of_idle": round(be / (cpus - ls), 3),
                     "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"],
                     "p99_inflation_percent": round((p["p99_ms"] / base["p99_ms"] - 1) * 100, 1),
                     "signals": {"runq_wait_ratio": round(_mean(ws, "runq_wait_ratio"), 4),
                                 "cpu_pressure_some": round(_mean(ws, "cpu_pressure_some"), 2),
                                 "throttled_ratio": round(_mean(ws, "throttled_ratio"), 4), "cpi": -1}})
    return alone, rows


def item5(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``qos`` vs ``adaptive`` per BE kind (``cpu``, ``membw``) at the highest intensity measured: p99 inflation,
    BE share of idle CPU and pass/fail against the targets (issue 17 item 5)."""
    out: dict[str, Any] = {"target_p99_inflation_percent": TARGET_P99_INFLATION_PERCENT,
                           "target_be_share_of_idle": TARGET_BE_SHARE_OF_IDLE}
    for kind in ("cpu", "membw"):
        mine = [r for r in rows if r["be_kind"] == kind]
        if not mine:
            continue
        top = max(r["intensity"] for r in mine)
        per: dict[str, Any] = {"intensity": top}
        for r in mine:
            if r["intensity"] == top and r["isolation"] in ("qos", "adaptive"):
                ok = (r["p99_inflation_percent"] <= TARGET_P99_INFLATION_PERCENT
                      and r["be_share_of_idle"] >= TARGET_BE_SHARE_OF_IDLE)
                per[r["isolation"]] = {"p99_inflation_percent": r["p99_inflation_percent"],
                                       "be_share_of_idle": r["be_share_of_idle"], "met": ok}
        out[kind] = per
    return out


def noise_of(windows: list[dict[str, Any]], args: argparse.Namespace, load0: float) -> dict[str, Any]:
    """How busy the machine was: other work's cores over the windows, quiet windows, load averages."""
    other = [w["other_cpu_cores"] for w in windows]
    return {"max_other_cpu_cores_threshold": args.max_other, "parent_shares": args.parent_shares or 1024, "quiet_windows": sum(bool(w["quiet"]) for w in windows),
            "windows": len(windows), "other_cpu_cores_mean": round(float(np.mean(other)), 3),
            "other_cpu_cores_p90": round(float(np.percentile(other, 90)), 3),
            "other_cpu_cores_max": round(max(other), 3), "load1_start": round(load0, 2),
            "load1_mean": round(float(np.mean([w["load1_before"] for w in windows])), 2),
            "quiet_machine": args.max_other <= 0.2 and all(w["quiet"] for w in windows), "note": args.note}


def print_table(rows: list[dict[str, Any]], alone: dict[str, Any], check: dict[str, Any]) -> None:
    print(f"LS alone: p50 {alone['p50_ms']} ms, p99 {alone['p99_ms']} ms, {alone['cpu_cores']} cores")
    print(f"{'kind':<6} {'n':>2} {'isolation':<10} {'p50 ms':>7} {'p99 ms':>8} {'Δp99 %':>8} {'BE cores':>8} "
          f"{'BE/idle':>7} {'runq w/r':>8} {'PSI %':>6} {'thr':>5}")
    for r in rows:
        s = r["signals"]
        print(f"{r['be_kind']:<6} {r['intensity']:>2} {r['isolation']:<10} {r['p50_ms']:>7.2f} {r['p99_ms']:>8.2f} "
              f"{r['p99_inflation_percent']:>8.1f} {r['be_cores']:>8.3f} {r['be_share_of_idle']:>7.3f} "
              f"{s['runq_wait_ratio']:>8.3f} {s['cpu_pressure_some']:>6.1f} {s['throttled_ratio']:>5.2f}")
    for kind in ("cpu", "membw"):
        for iso in ("qos", "adaptive"):
            r = check.get(kind, {}).get(iso)
            if r:
                print(f"item 5 {kind} x{check[kind]['intensity']} {iso}: p99 {r['p99_inflation_percent']:+} % "
                      f"(<= +10), BE {r['be_share_of_idle']} of idle (>= 0.9): {'met' if r['met'] else 'not met'}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    kinds = _csv(args.kinds, KINDS, "kinds")
    settings_names = _csv(args.isolations, ISOLATIONS, "isolations")
    levels = _intensities(args.intensities)
    load0 = wait_for_quiet(args.max_load, args.load_wait_s)
    work_n, work_ms = calibrate_work(args)
    cpus, llc = psutil.cpu_count() or 1, llc_bytes() or 32 * MI
    n_pods = len(kinds) * max(levels)
    batch_cpu = args.be_batch_cpu or max(1, 1000 // n_pods)  # Σ ≈ 1000 m: BE shares ≈ 1024, the cgroup default
    be_shares = max(2, n_pods * batch_cpu * 1024 // 1000)
    sizes = {"cpu": 0, "membw": args.membw_bytes or 8 * llc, "cache": args.cache_bytes or llc}
    table = isolations(be_shares)
    print(f"load average {load0:.2f}; handler work {work_n} iterations = {work_ms:.3f} ms; LLC {llc} bytes; "
          f"{n_pods} BE pods of {batch_cpu} m batch-cpu (BE shares {be_shares})", flush=True)
    windows, latencies = await measure_all(args, work_n, kinds, levels, [table[n] for n in settings_names],
                                           batch_cpu, sizes, cpus)
    alone, rows = rows_of(windows, latencies, cpus)
    machine = machine_facts()
    noise = noise_of(windows, args, load0)
    doc = {"schema": SCHEMA, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "command": shlex.join(["python", *sys.argv]),
           "machine": {"cpus": cpus, "cpu_model": machine["cpu_model"], "kernel": machine["kernel"],
                       "llc_bytes": llc},
           "ls": {"work_ms": round(work_ms, 3), "rate_per_s": args.rate, "cpu_cores": alone["cpu_cores"],
                  "alone_p50_ms": alone["p50_ms"], "alone_p99_ms": alone["p99_ms"]},
           "rows": rows, "noise": noise}
    write(Path(args.out), doc)
    check = item5(rows)
    print_table(rows, alone, check)
    return {"bench": "interference_calibration", "machine": machine, "out": str(args.out), "kinds": kinds,
            "intensities": levels, "isolations": settings_names, "rounds": args.rounds, "seconds": args.seconds,
            "rate_rps": args.rate, "work_ms": round(work_ms, 3), "work_iterations": work_n,
            "be_batch_cpu_milli": batch_cpu, "be_group_shares_requests": be_shares,
            "be_bytes": sizes, "alone": alone, "noise": noise, "item5": check, "rows": len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_quiet_options(ap)
    ap.add_argument("--seconds", type=float, default=20.0, help="counted part of a window, s")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over every cell, interleaved")
    ap.add_argument("--kinds", default=",".join(KINDS), help="BE kinds, comma-separated")
    ap.add_argument("--intensities", default="1,2,4", help="BE worker counts, comma-separated")
    ap.add_argument("--isolations", default=",".join(ISOLATIONS), help="isolation settings, comma-separated")
    ap.add_argument("--be-batch-cpu", type=int, default=0,
                    help="batch-cpu request of each BE pod, milli-cores (0: 1000 / BE pods)")
    ap.add_argument("--membw-bytes", type=int, default=0, help="each membw array, bytes (0: 8 x LLC)")
    ap.add_argument("--cache-bytes", type=int, default=0, help="the cache array, bytes (0: the LLC size)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="calibration file to write")
    ap.add_argument("--note", default="", help="free text kept in the file's noise.note (e.g. what else ran)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, interrupt)
    res = asyncio.run(run(args))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
