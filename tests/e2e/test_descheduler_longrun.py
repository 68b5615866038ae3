"""Two virtual hours of the demo scenario with the descheduler on and aggressive thresholds (issue 12, item 9).

The five services run as processes over real NATS and Redis; every NodeMetric and every eviction
order of the descheduler is recorded from the bus and audited (:mod:`colo.sim.migration_audit`):

- no pod is migrated more than twice;
- no node makes more than :data:`MAX_SWINGS` swings between high and low that a migration took part in (an
  eviction off it before a high → low swing, an evicted pod arriving on it before a low → high one:
  ``MigrationAudit.migration_oscillations``), and the cluster as a whole swings no more than the same scenario
  without the descheduler. All swings of a node are not compared run against run: the trace's own load (batch
  tasks arriving and ending, online services' 5-minute steps) swings nodes up to 9 times in these 2 hours with
  no descheduler at all, and once one migration has changed the loads the scheduler sees, it places the
  trace's later pods elsewhere, so a node can swing 5 times against 2 with no migration near it (seed 3);
  and no node is relieved by a migration more than :data:`MAX_BOUNCES` times within 30 min of taking migrated
  pods (``MigrationAudit.migration_bounces``: the target-then-source round trip of a cascade);
- no high episode of a node loses more pods than the excess required (from the recorded metrics);
- and the run still keeps the demo's invariants (nothing over-committed, nothing bound twice).

The thresholds are far below the shipped ones (low 20/35 %, high 40/55 %, a node is a source at
its first high round) so that a 20-node, 2-hour run has hot nodes to relieve.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from colo import subjects as S
from colo.bus import Bus
from colo.embedded import EmbeddedServers
from colo.messages import EvictionCommand, NodeMetric
from colo.sim import traces as tr
from colo.sim.migration_audit import MigrationAudit
from colo.sim.run import RunResult, run_once
from colo.sim.scenario import ScenarioParams, build_scenario
from colo.sim.services import Supervisor

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

PARAMS = ScenarioParams(nodes=20, hours=2.0, seed=1)
LOW = (20, 35)
HIGH = (40, 55)
MAX_SWINGS = 3
"""Swings between high and low a migration took part in that one node may make in 2 h: a relieved source goes
from high to low once (the point of a migration), a target may take a pod and later go high with the trace's
load, and the pod limit lets a pod move twice; a cascade (a target driven high, relieved, driven high again) adds
one per round trip. Seeds 1–5 of this run stay at or below 3."""
MAX_BOUNCES = 2
"""Evictions off one node within 30 min after a migrated pod arrived on it (``migration_bounces``): the round
trip of a cascade. The descheduler before bookings matched the metrics made 8 on one node of this run (seed 1);
seeds 1–5 now make at most 2 (a target that took a pod and later went high with the trace's load)."""
DESCHEDULER_ENV = {
    "COLO_DESCHEDULER_LOW_THRESHOLDS__CPU": str(LOW[0]),
    "COLO_DESCHEDULER_LOW_THRESHOLDS__MEMORY": str(LOW[1]),
    "COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU": str(HIGH[0]),
    "COLO_DESCHEDULER_HIGH_THRESHOLDS__MEMORY": str(HIGH[1]),
    "COLO_DESCHEDULER_CONSECUTIVE_HIGH_ROUNDS": "1",
}


async def _run(tmp: Path, descheduler: bool = True) -> tuple[RunResult, MigrationAudit]:
    scenario = build_scenario(PARAMS)
    audit = MigrationAudit(allocatable={n.name: (n.allocatable.cpu, n.allocatable.memory) for n in scenario.nodes},
                           low=LOW, high=HIGH)

    async def on_metric(msg: NodeMetric) -> None:
        audit.add_metric(msg)

    async def on_evict(msg: EvictionCommand) -> None:
        if msg.by == "descheduler":
            audit.add_eviction(msg)

    with EmbeddedServers() as servers:
        bus = await Bus.connect(servers.nats_url, "audit")
        try:
            await bus.ensure_streams()
            await bus.subscribe(S.NODE_METRIC, on_metric, durable="audit-metrics")
            await bus.subscribe(S.POD_EVICT, on_evict, durable="audit-evict")

            async def settle_audit(step: int, now: float, sup: Supervisor) -> None:
                await bus.settle()

            result = await run_once(scenario, "colo", servers.nats_url, servers.redis_url, tmp,
                                    hook=settle_audit,
                                    extra_env={**DESCHEDULER_ENV, "COLO_DESCHEDULER_ENABLED": "1" if descheduler else "0"})
            await bus.settle()
        finally:
            await bus.close()
    return result, audit


Runs = tuple[tuple[RunResult, MigrationAudit], tuple[RunResult, MigrationAudit]]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The run with the descheduler and the same scenario without it, side by side (own servers each)."""
    async def go() -> Runs:
        on, off = await asyncio.gather(_run(tmp_path_factory.mktemp("longrun-on")),
                                       _run(tmp_path_factory.mktemp("longrun-off"), descheduler=False))
        return on, off
    return asyncio.run(go())


@pytest.fixture(scope="module")
def longrun(both: Runs) -> tuple[RunResult, MigrationAudit]:
    return both[0]


def test_the_run_deschedules_and_keeps_its_invariants(longrun: tuple[RunResult, MigrationAudit]) -> None:
    result, audit = longrun
    assert result.metrics.tick_errors == []
    assert result.violations == []
    assert result.metrics.double_bound() == []
    assert audit.evictions, "aggressive thresholds must make the descheduler act (else the audit proves nothing)"
    assert len(audit.metrics) == PARAMS.nodes


def test_no_pod_migrated_more_than_twice(longrun: tuple[RunResult, MigrationAudit]) -> None:
    _, audit = longrun
    many = {uid: n for uid, n in audit.migrations_per_pod().items() if n > 2}
    assert many == {}


def test_no_node_oscillates(both: Runs) -> None:
    (_, on), (_, off) = both
    assert off.evictions == [], "the comparison run has no descheduler"
    with_d, without = on.oscillations(), off.oscillations()
    assert sum(with_d.values()) <= sum(without.values()), "the cluster swings more with the descheduler"
    swings = {node: n for node, n in on.migration_oscillations().items() if n > MAX_SWINGS}
    assert swings == {}, "swings a migration took part in"
    bounces = {node: n for node, n in on.migration_bounces().items() if n > MAX_BOUNCES}
    assert bounces == {}, "targets relieved again within 30 min of taking migrated pods"


def test_evictions_within_what_the_excess_required(longrun: tuple[RunResult, MigrationAudit]) -> None:
    _, audit = longrun
    assert audit.over_evictions() == []
