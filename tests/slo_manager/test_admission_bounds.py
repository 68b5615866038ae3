"""Admission rejects absurdly large quantities and priorities (they would overflow int64 downstream)."""

from __future__ import annotations

import pytest

from colo.messages import PodAdmitted, PodRejected, PodSpec, Resources
from colo_slo_manager.admission import admit
from colo_slo_manager.settings import SloManagerSettings

HUGE = 10**30


@pytest.mark.parametrize(("pod", "fragment"), [
    pytest.param(PodSpec(uid="p", name="p", requests=Resources(cpu=HUGE)), "request cpu", id="request-cpu"),
    pytest.param(PodSpec(uid="p", name="p", limits=Resources(memory=2**62)), "limit memory", id="limit-memory"),
    pytest.param(PodSpec(uid="p", name="p", requests=Resources(pods=HUGE)), "request pods", id="request-pods"),
    pytest.param(PodSpec(uid="p", name="p", priority=HUGE), "priority", id="priority-int32"),
    pytest.param(PodSpec(uid="p", name="p", priority=-(2**31) - 1), "priority", id="priority-below-int32"),
])
def test_out_of_range_is_rejected(pod: PodSpec, fragment: str) -> None:
    out = admit(pod, SloManagerSettings(), 1.0)
    assert isinstance(out, PodRejected), out
    assert fragment in out.reason


def test_large_but_sane_is_admitted() -> None:
    pod = PodSpec(uid="p", name="p", requests=Resources(cpu=512_000, memory=4 * 2**40))
    assert isinstance(admit(pod, SloManagerSettings(), 1.0), PodAdmitted)
