"""Demo tick benchmark: per-service wall milliseconds per virtual tick over a short simulation.

Runs the real demo machinery (:func:`colo.sim.run.run_all`: embedded NATS/Redis, the five
service processes, the virtual-time coordinator) on a scenario of ``--nodes`` nodes for
``--hours`` virtual hours, then prints for each run the mean wall time of every service's
tick (request → TickAck, which includes the service's settle round trips), the whole step
(pods published, five ticks, coordinator settle and invariant check), start-up time and the
CPU seconds each process used during the ticks. The last line is one JSON object so the
figures can be quoted::

    .venv/bin/python bench/demo_tick.py --nodes 100 --hours 1

Numbers depend on the machine and its load: compare before/after in the same conditions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from colo.sim.run import run_all
from colo.sim.scenario import ScenarioParams, build_scenario
from colo.sim.services import TICK_ORDER, Supervisor


def _proc_name(p: psutil.Process) -> str:
    try:
        cmd = p.cmdline()
    except psutil.Error:
        return "?"
    if "-m" in cmd and cmd.index("-m") + 1 < len(cmd):
        return cmd[cmd.index("-m") + 1].removeprefix("colo_").replace("_", "-")
    return Path(cmd[0]).name if cmd else "?"


def _cpu_s(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
    except psutil.Error:
        return 0.0
    return float(t.user + t.system)


@dataclass
class _Probe:
    """Per-run step hook: step start times and CPU seconds of the run's service processes."""

    steps: int
    started: float = field(default_factory=time.perf_counter)
    first_step_at: float = 0.0
    step_starts: list[float] = field(default_factory=list)
    cpu_first: dict[str, float] = field(default_factory=dict)
    cpu_last: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def _snapshot(sup: Supervisor) -> dict[str, float]:
        return {name: _cpu_s(psutil.Process(p.proc.pid)) for name, p in sup.procs.items()}

    def on_step(self, step: int, sup: Supervisor) -> None:
        t = time.perf_counter()
        if step == 0:
            self.first_step_at = t
            self.cpu_first = self._snapshot(sup)
        self.step_starts.append(t)
        if step == self.steps:  # the last step: CPU used by the ticks of all earlier steps
            self.cpu_last = self._snapshot(sup)


def _others_cpu() -> float:
    """CPU seconds of this process and its children that are not services (NATS, Redis)."""
    total = _cpu_s(psutil.Process())
    for p in psutil.Process().children(recursive=True):
        if not _proc_name(p).startswith(("node-agent", "profiler", "slo-manager", "scheduler", "descheduler")):
            total += _cpu_s(p)
    return total


async def _bench(nodes: int, hours: float, seed: int, runs: tuple[str, ...], concurrent: bool) -> dict[str, object]:
    t0 = time.perf_counter()
    scenario = build_scenario(ScenarioParams(nodes=nodes, hours=hours, seed=seed))
    build_s = time.perf_counter() - t0
    steps = int(scenario.duration_s // 60.0)
    probes = {run: _Probe(steps) for run in runs}
    others = {"first": 0.0, "last": 0.0}

    async def hook(step: int, now: float, sup: Supervisor) -> None:
        probes[sup.run].on_step(step, sup)
        if step == 0 and not others["first"]:
            others["first"] = _others_cpu()
        if step == steps:
            others["last"] = _others_cpu()

    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="colo-bench-") as tmp:
        kw = {"concurrent": concurrent} if len(runs) > 1 else {}
        results = await run_all(scenario, Path(tmp), runs, show_progress=False, hook=hook, **kw)
    runs_wall = time.perf_counter() - t1
    out: dict[str, object] = {"nodes": nodes, "hours": hours, "ticks": steps + 1, "concurrent": concurrent,
                              "scenario_build_s": round(build_s, 2), "runs_wall_s": round(runs_wall, 2),
                              "coordinator_and_servers_cpu_s": round(others["last"] - others["first"], 2),
                              "runs": {}}
    ticks = steps + 1
    for run, result in zip(runs, results):
        m, probe = result.metrics, probes[run]
        per_service = {s: round(1000 * m.tick_wall_s.get(s, 0.0) / ticks, 1) for s in TICK_ORDER}
        n_steps = len(probe.step_starts) - 1
        step_ms = 1000 * (probe.step_starts[-1] - probe.step_starts[0]) / max(1, n_steps)
        out["runs"][run] = {  # type: ignore[index]
            "tick_ms": per_service,
            "tick_ms_total": round(sum(per_service.values()), 1),
            "step_ms": round(step_ms, 1),
            "startup_s": round(probe.first_step_at - probe.started, 2),
            "wall_s": round(m.wall_s, 2),
            "cpu_ms_per_tick": {k: round(1000 * (probe.cpu_last.get(k, 0.0) - v) / max(1, n_steps), 1)
                                for k, v in probe.cpu_first.items()},
            "violations": len(result.violations),
        }
    return out


def main() -> None:
    """Parse options, run the benchmark, print a table and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=ScenarioParams().seed)
    ap.add_argument("--runs", default="baseline,colo")
    ap.add_argument("--concurrent", action="store_true",
                    help="run the runs at the same time as the demo does (default: one after the other, "
                         "so that per-service figures are not mixed with the other run)")
    args = ap.parse_args()
    runs = tuple(r.strip() for r in args.runs.split(",") if r.strip())
    res = asyncio.run(_bench(args.nodes, args.hours, args.seed, runs, args.concurrent))
    for run, r in res["runs"].items():  # type: ignore[attr-defined]
        print(f"{run}: " + "  ".join(f"{s} {ms:.1f}" for s, ms in r["tick_ms"].items())
              + f"  | ticks {r['tick_ms_total']:.1f} ms  step {r['step_ms']:.1f} ms/tick"
              + f"  startup {r['startup_s']:.1f} s  wall {r['wall_s']:.1f} s")
        print(f"{run}: cpu ms/tick " + "  ".join(f"{k} {v:.1f}" for k, v in r["cpu_ms_per_tick"].items()))
    print(f"scenario build {res['scenario_build_s']} s, runs {res['runs_wall_s']} s wall, "
          f"coordinator+servers {res['coordinator_and_servers_cpu_s']} cpu s")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
