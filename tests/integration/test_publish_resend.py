"""Publishes that a leaderless stream dropped are sent again (message id: de-duplicated), so a kill -9 of the
cluster member leading a stream stalls :meth:`Bus.publish_many` for the leader election, not its whole timeout."""

from __future__ import annotations

import time

import pytest

from colo import subjects as S
from colo.bus import Bus
from colo.messages import PodAdmitted, PodSpec, Resources
from colo.settings import RuntimeSettings
from colo.testing.clusters import NatsCluster
from colo.testing.ha import stream_leader

pytestmark = [pytest.mark.integration, pytest.mark.ha]

PODS = 20


def _admitted(i: int) -> PodAdmitted:
    return PodAdmitted(spec=PodSpec(uid=f"u{i}", name=f"p{i}", requests=Resources(cpu=100, memory=1 << 20)),
                       at=float(i))


async def test_publishes_dropped_by_a_leaderless_stream_are_sent_again() -> None:
    with NatsCluster(3) as cluster:
        bus = await Bus.connect(cluster.url, "slo-manager", settings=RuntimeSettings(stream_replicas=3))
        try:
            await bus.ensure_streams()
            leader = await stream_leader(bus.nc, S.POD_ADMITTED.stream or "")
            cluster.member(leader).kill()
            started = time.monotonic()
            # before the resend, the acks of the dropped publishes never came: BusError after 25 s
            await bus.publish_many([(S.POD_ADMITTED, _admitted(i), f"admitted-u{i}", {}) for i in range(PODS)],
                                   timeout_s=25.0)
            print(f"\npublish_many after killing {leader}: acked in {time.monotonic() - started:.2f} s")
            info = await bus.js.stream_info(S.POD_ADMITTED.stream or "")
            assert info.state.messages == PODS  # sent again, kept once (duplicate window)
        finally:
            await bus.close()
