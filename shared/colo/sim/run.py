"""The virtual-time coordinator: runs a scenario through the five real services (DESIGN.md §8).

For each run (``baseline``, ``colo``) it starts NATS and Redis (embedded unless
``COLO_NATS_URL``/``COLO_REDIS_URL`` are set), writes the node agent's nodes file, starts
the services with ``COLO_SIM=1`` and the run's settings (:data:`RUN_ENV`), publishes the
teams' quotas (``quota.spec``), then steps virtual time: publish the pods and workloads that
arrived (``pod.submitted``/``workload.submitted``, msg_id = uid; :mod:`colo.sim.submit`), tick the
services in order node-agent → profiler → slo-manager → scheduler → descheduler, wait
for the coordinator's own consumers to settle and record metrics
(:class:`colo.sim.metrics.RunMetrics`). At the end it checks invariants in Redis and
stops the services gracefully. The runs of :func:`run_all` proceed concurrently when each
has its own embedded servers.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from colo import subjects as S
from colo.bus import Bus, BusError
from colo.codec import encode
from colo.embedded import EmbeddedServers
from colo.messages import (
    EvictionCommand,
    NodeMetric,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodMigrationJob,
    PodRejected,
    PodStatus,
    PodUnschedulable,
    QoSEvent,
    QuotaStatus,
    Resources,
    Tick,
    WorkloadRejected,
)
from colo.settings import RuntimeSettings, load_runtime_settings
from colo.sim.ceiling import CeilingTracker
from colo.sim.gpu_metrics import GpuUsage
from colo.sim.invariants import AllocationWatch
from colo.sim.metrics import RunMetrics
from colo.sim.scenario import Scenario
from colo.sim.services import TICK_ORDER, Supervisor
from colo.sim.submit import Submissions
from colo.store import Store

STEP_S = 60.0
"""Virtual seconds per tick: the node agents' report interval (REFERENCE.md §2)."""

RUN_ENV: dict[str, dict[str, str]] = {
    "baseline": {"COLO_SLO_MANAGER_COLOCATION_ENABLED": "0", "COLO_DESCHEDULER_ENABLED": "0"},
    "colo": {"COLO_SLO_MANAGER_COLOCATION_ENABLED": "1", "COLO_DESCHEDULER_ENABLED": "1"},
    "colo-adaptive": {"COLO_SLO_MANAGER_COLOCATION_ENABLED": "1", "COLO_DESCHEDULER_ENABLED": "1",
                      "COLO_SLO_MANAGER_BE_BUDGET_ENABLED": "1",
                      "COLO_SLO_MANAGER_NODE_SLO__BE_BUDGET__SIGNAL": "latency_inflation"},
    "colo-adaptive-mem": {"COLO_SLO_MANAGER_COLOCATION_ENABLED": "1", "COLO_DESCHEDULER_ENABLED": "1",
                          "COLO_SLO_MANAGER_BE_BUDGET_ENABLED": "1",
                          "COLO_SLO_MANAGER_NODE_SLO__BE_BUDGET__SIGNAL": "latency_inflation",
                          "COLO_SLO_MANAGER_BATCH__MEMORY_RECLAIM_THRESHOLD_PERCENT": "80",
                          "COLO_SLO_MANAGER_NODE_SLO__MEMORY_EVICT__THRESHOLD_PERCENT": "85"},
}
"""Service settings per run: baseline = no co-location (no batch resources, no descheduler); colo = the static
thresholds (suppress 65 %, batch reclaim 60 % CPU / 65 % memory); colo-adaptive = colo with the SLO-driven BE
budget (NodeSLO ``be_budget``, docs/node-agent.md "BE budget"): the node agent grows the suppress threshold while
the LS pods' modelled p99 inflation (signal ``latency_inflation``, the one the sim models from its calibration;
docs/node-agent.md "BE budget" on why not ``runq_wait`` there) allows and slo-manager offers batch allocatable up
to it; colo-adaptive-mem = colo-adaptive
with more memory room: batch memory reclaimed up to 80 % of capacity (65 % by default) and BE memory eviction at 85 %
(70 %), the reference's 5-point gap kept (docs/scenario.md "The saturated scenario": where memory binds, how much CPU
the BE budget then reaches)."""

SIM_ENV: dict[str, str] = {"COLO_PROFILER_COLD_START_S": "3600"}
"""Service settings common to every run. The profiler counts a pod at its full request for its first
``cold_start_s`` (24 h by default, REFERENCE.md §7): longer than a demo, so prod-reclaimable and with it
mid resources would stay 0 throughout. The demo's online pods stand for services that run for days
before the window starts; one virtual hour of samples (60 NodeMetrics) stands for that history."""

NODES_FILE_ENV = "COLO_NODE_AGENT_NODES_FILE"
"""The node agent setting naming the JSON list of NodeSpec it simulates."""

StepHook = Callable[[int, float, Supervisor], Awaitable[None]]
"""Called before the ticks of each step with (step, virtual now, supervisor); used to restart services."""


@dataclass
class RunResult:
    """Metrics of one run plus the invariant violations found in Redis at its end."""

    metrics: RunMetrics
    violations: list[str] = field(default_factory=list)
    allocated: dict[str, Resources] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    store_phases: dict[str, str] = field(default_factory=dict)
    """uid → phase of every pod record in the store at the end (nothing lost)."""


async def collect(bus: Bus, metrics: RunMetrics, watch: AllocationWatch, run: str) -> None:
    """Subscribe the coordinator's consumers (durables ``<what>-<run>``) that feed ``metrics`` and ``watch``."""

    async def bound(msg: PodBound) -> None:
        metrics.on_bound(msg)

    async def unsched(msg: PodUnschedulable) -> None:
        metrics.on_unschedulable(msg)

    async def status(msg: PodStatus) -> None:
        metrics.on_status(msg)

    async def qos(msg: QoSEvent) -> None:
        metrics.on_qos(msg)

    async def rejected(msg: PodRejected) -> None:
        metrics.on_rejected(msg)

    async def migration(msg: PodMigrationJob) -> None:
        metrics.on_migration(msg)

    async def resource(msg: NodeResource) -> None:
        watch.offered(msg)
        metrics.loops.on_resource(msg)
        metrics.ceiling.on_resource(msg)

    async def node_metric(msg: NodeMetric) -> None:
        metrics.ceiling.on_metric(msg)

    async def node_slo(msg: NodeSLO) -> None:
        metrics.ceiling.on_slo(msg)

    async def admitted(msg: PodAdmitted) -> None:
        metrics.on_admitted(msg)

    async def evict(msg: EvictionCommand) -> None:
        metrics.on_evict(msg)

    async def quota(msg: QuotaStatus) -> None:
        metrics.on_quota(msg)

    async def workload_rejected(msg: WorkloadRejected) -> None:
        metrics.on_workload_rejected(msg)

    await bus.subscribe(S.POD_BOUND, bound, durable=f"bound-{run}")
    await bus.subscribe(S.POD_UNSCHEDULABLE, unsched, durable=f"unsched-{run}")
    await bus.subscribe(S.POD_STATUS, status, durable=f"status-{run}")
    await bus.subscribe(S.NODE_QOS, qos, durable=f"qos-{run}")
    await bus.subscribe(S.POD_REJECTED, rejected, durable=f"rejected-{run}")
    await bus.subscribe(S.NODE_RESOURCE, resource, durable=f"resource-{run}")
    await bus.subscribe(S.MIGRATION, migration, durable=f"migration-{run}")
    await bus.subscribe(S.POD_ADMITTED, admitted, durable=f"admitted-{run}")
    await bus.subscribe(S.POD_EVICT, evict, durable=f"evict-{run}")
    await bus.subscribe(S.QUOTA_STATUS, quota, durable=f"quota-{run}")
    await bus.subscribe(S.WORKLOAD_REJECTED, workload_rejected, durable=f"workload-rejected-{run}")
    await bus.subscribe(S.NODE_METRIC, node_metric, durable=f"metric-{run}")
    await bus.subscribe(S.NODE_SLO, node_slo, durable=f"slo-{run}")


def _write_nodes(path: Path, nodes: list[NodeSpec]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode(nodes))


def service_env(scenario: Scenario, run: str, nats_url: str, redis_url: str, work_dir: Path,
                extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every service of ``run``: the links, ``COLO_SIM``, the store prefix ``colo-<run>``,
    :data:`SIM_ENV`, ``RUN_ENV[run]`` and ``extra_env`` (last wins); writes the node agent's nodes file
    (``<work_dir>/<run>-nodes.json``) it names."""
    nodes_file = work_dir / f"{run}-nodes.json"
    _write_nodes(nodes_file, scenario.nodes)
    return {
        "COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url, "COLO_SIM": "1",
        "COLO_STORE_PREFIX": f"colo-{run}", "COLO_LOG_LEVEL": os.environ.get("COLO_LOG_LEVEL", "INFO"),
        NODES_FILE_ENV: str(nodes_file), **SIM_ENV, **RUN_ENV.get(run, {}), **(extra_env or {}),
    }


async def run_once(scenario: Scenario, run: str, nats_url: str, redis_url: str, work_dir: Path,
                   progress: Progress | None = None, hook: StepHook | None = None,
                   extra_env: dict[str, str] | None = None, tick_timeout_s: float = 120.0,
                   settings: RuntimeSettings | None = None) -> RunResult:
    """One run of ``scenario`` with the settings of :data:`SIM_ENV` and ``RUN_ENV[run]`` against the given servers.

    ``settings`` are the coordinator's own links (a cluster's stream replicas, Sentinels), as the services
    get theirs from ``extra_env``.

    Raises ServiceError when a service dies or does not become ready, TimeoutError when a
    tick is not answered within ``tick_timeout_s`` (wall seconds).
    """
    prefix = f"colo-{run}"
    env = service_env(scenario, run, nats_url, redis_url, work_dir, extra_env)
    # GPU figures from the bindings (colo.sim.gpu_metrics), against the scenario's own GPU pod shapes
    metrics = RunMetrics(name=run, gpus=GpuUsage.of(scenario.nodes, scenario.gpu_pods()))
    metrics.ceiling = CeilingTracker(scenario.nodes, colocation=env.get("COLO_SLO_MANAGER_COLOCATION_ENABLED") != "0")
    cpu_f, mem_f = (scenario.description.get(k) for k in ("batch_offered_cpu_fraction", "batch_offered_memory_fraction"))
    if isinstance(cpu_f, (int, float)) and isinstance(mem_f, (int, float)) and mem_f > 0:
        metrics.batch_cpu_per_memory = float(cpu_f) / float(mem_f)
    watch = AllocationWatch()
    # the coordinator's links: as given, else the credentials and TLS of the environment (docs/security.md)
    link = settings or load_runtime_settings({**os.environ, **env})
    bus = await Bus.connect(nats_url, f"sim-{run}", settings=link)
    store = await Store.connect(redis_url, prefix=prefix, settings=link)
    sup = Supervisor(run, env, work_dir / "logs")
    started = time.perf_counter()
    result = RunResult(metrics=metrics)
    try:
        await bus.ensure_streams()
        await bus.purge_streams()
        await store.delete_all()
        await collect(bus, metrics, watch, run)
        await sup.start_all()
        steps = int(scenario.duration_s // STEP_S)
        task = progress.add_task(run, total=steps + 1, status="") if progress else None
        submissions = Submissions(scenario, env, metrics)
        await submissions.start(bus)  # the teams' quotas are in place before any of their jobs arrives
        for step in range(steps + 1):
            now = step * STEP_S
            await submissions.publish_due(bus, now)
            if hook is not None:
                await hook(step, now, sup)
            tick = Tick(seq=step, now=now, step_s=STEP_S)
            acks = []
            for service in TICK_ORDER:
                sup.check_alive()
                t0 = time.perf_counter()
                acks.append(await bus.request_tick(service, tick, timeout_s=tick_timeout_s))
                metrics.tick_wall_s[service] = metrics.tick_wall_s.get(service, 0.0) + time.perf_counter() - t0
            await _settle_step(bus, step, now, tick_timeout_s)
            await bus.settle()
            await watch.check(store, now)
            metrics.on_ticks(now, acks, watch.allocated_total)
            if progress is not None and task is not None:
                s = metrics
                status = (f"bound {len(s.bound_node)} · done {len(s.completed_at)} · "
                          f"unsched {len(s.unschedulable)}")
                progress.update(task, advance=1, status=status)
                if not progress.console.is_terminal and step % max(1, steps // 10) == 0:
                    # no live bar without a terminal: a plain line every tenth of the run
                    progress.console.print(f"{run}: {now / 3600:.1f} of {steps * STEP_S / 3600:g} h · {status}",
                                           highlight=False)
        result.violations = list(watch.violations)
        result.violations += [f"pod {uid} bound twice" for uid in metrics.double_bound()]
        result.violations += metrics.gpus.violations if metrics.gpus is not None else []
        result.allocated = await store.all_allocated()
        result.store_phases = {r.spec.uid: r.phase for r in await store.list_pods()}
    finally:
        metrics.wall_s = time.perf_counter() - started
        # in a thread: a concurrent run keeps ticking while these services shut down
        result.exit_codes = await asyncio.to_thread(sup.stop_all)
        result.restarts = dict(sup.restarts)
        await bus.close()
        await store.close()
    return result


def make_progress(console: Console | None = None) -> Progress:
    """The rich progress bar shown during runs (on ``console``, default rich's own): ticks done of the
    run's ticks (one tick = ``STEP_S`` virtual seconds), pods bound/completed/unschedulable so far, wall
    time."""
    return Progress(TextColumn("[bold]{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn(f"ticks of {STEP_S:g} s ·"), TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                    console=console)


async def run_all(scenario: Scenario, work_dir: Path, runs: tuple[str, ...] = ("baseline", "colo"),
                  show_progress: bool = True, hook: StepHook | None = None,
                  concurrent: bool | None = None, console: Console | None = None) -> list[RunResult]:
    """Each of ``runs`` on fresh embedded servers (or on COLO_NATS_URL/COLO_REDIS_URL when set).

    With ``concurrent`` (default: when both servers are embedded, there are several runs and
    more than one CPU) the runs proceed at the same time, each on its own NATS and Redis: one
    run's services mostly wait for a tick while the other's compute, so the pair finishes in
    little more than the time of one. Runs on shared external servers always go one after
    the other (each run purges the streams). Results are in the order of ``runs``; when one
    run fails the others are cancelled and the error is raised.
    """
    nats_env = os.environ.get("COLO_NATS_URL")
    redis_env = os.environ.get("COLO_REDIS_URL")
    if concurrent is None:
        concurrent = not nats_env and not redis_env and len(runs) > 1 and (os.cpu_count() or 1) > 1
    if nats_env or redis_env:
        concurrent = False
    progress = make_progress(console) if show_progress else None

    async def one(run: str) -> RunResult:
        if nats_env and redis_env:
            return await run_once(scenario, run, nats_env, redis_env, work_dir, progress, hook)
        with EmbeddedServers(nats=not nats_env, redis=not redis_env) as servers:
            return await run_once(scenario, run, nats_env or servers.nats_url, redis_env or servers.redis_url,
                                  work_dir, progress, hook)

    if progress is not None:
        progress.start()
    try:
        if not concurrent:
            return [await one(run) for run in runs]
        tasks = [asyncio.create_task(one(run), name=f"run:{run}") for run in runs]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    finally:
        if progress is not None:
            progress.stop()


async def _settle_step(bus: Bus, step: int, now: float, timeout_s: float) -> None:
    """Every service drains its consumers at ``now``, in tick order, after the step's ticks.

    What the last services published in their ticks (the descheduler's evictions, the Failed statuses the node
    agent answers them with, the scheduler's requeue of those pods) is then handled within the step, at its
    time, whether a handler is quick or slow; without it a handler still running when the next step's tick came
    saw that step's time, a quick one this step's, and runs were not reproducible. Raises BusError as
    ``request_tick``; a settle error is raised as BusError too.
    """
    for service in TICK_ORDER:
        ack = await bus.request_tick(service, Tick(seq=step, now=now, step_s=STEP_S, settle_only=True),
                                     timeout_s=timeout_s)
        if ack.error:
            raise BusError(f"{service} could not settle step {step}: {ack.error}")
