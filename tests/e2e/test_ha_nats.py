"""Clustered NATS: the shortened scenario on a 3-server cluster with every stream replicated 3 times; the
server leading the pod stream is killed with SIGKILL mid-run. Nothing is lost, nothing bound twice, no node
over-committed, the run completes; the stall (kill → first bind after it) is printed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
import pytest

from colo import subjects as S
from colo.settings import RuntimeSettings
from colo.sim import traces as tr
from colo.sim.run import RunResult, run_once
from colo.sim.scenario import Scenario, ScenarioParams, build_scenario
from colo.sim.services import Supervisor
from colo.testing.clusters import NatsCluster
from colo.testing.ha import BindClock, stream_leader, wait_stream_leaders

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.ha,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

SHORT = ScenarioParams(nodes=6, hours=0.5, seed=2)
KILL_STEP = 8


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return build_scenario(SHORT)


def test_kill_pod_stream_leader_loses_nothing(scenario: Scenario, tmp_path: Path, redis_url: str) -> None:
    with NatsCluster(3) as cluster:
        settings = RuntimeSettings(nats_url=cluster.url, stream_replicas=3)
        killed: dict[str, float] = {}
        leader_name: list[str] = []

        async def main() -> tuple[RunResult, float, float]:
            binds = BindClock()
            nc = await nats.connect(servers=cluster.url.split(","), max_reconnect_attempts=-1,
                                    reconnect_time_wait=0.2)
            await nc.subscribe(S.POD_BOUND.wildcard, cb=binds.on_msg)

            async def kill(step: int, now: float, sup: Supervisor) -> None:
                if step != KILL_STEP:
                    return
                leader = await stream_leader(nc, S.PODS)
                killed["at"] = time.monotonic()
                leader_name.append(leader)
                cluster.member(leader).kill()
                killed["leaders_s"] = await wait_stream_leaders(nc, exclude=leader) - killed["at"]

            result = await run_once(scenario, "colo", cluster.url, redis_url, tmp_path, hook=kill,
                                    extra_env={"COLO_STREAM_REPLICAS": "3"}, settings=settings)
            replicas = (await nc.jetstream().stream_info(S.PODS)).config.num_replicas
            await nc.close()
            assert replicas == 3
            return result, binds.first_after(killed["at"]), binds.last_before(killed["at"])

        result, first_after, last_before = asyncio.run(main())

    m = result.metrics
    stall_s = first_after - killed["at"]
    print(f"\nNATS cluster: killed {leader_name[0]} (leader of {S.PODS}) at step {KILL_STEP}; new stream leaders "
          f"after {killed['leaders_s']:.2f} s; first bind {stall_s:.2f} s after the kill "
          f"(bind gap {first_after - last_before:.2f} s); {len(m.bound_node)} pods bound")
    assert len(m.bound_node) > 0
    assert m.tick_errors == []
    assert result.violations == []
    assert m.double_bound() == []
    assert m.unaccounted() == []
    assert set(m.submitted_at) - set(m.rejected) <= set(result.store_phases)
    assert all(code == 0 for code in result.exit_codes.values()), result.exit_codes
