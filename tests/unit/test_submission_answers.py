"""Which admission answer belongs to which submitted object (colo.submission.apply_answer), case by case."""

from __future__ import annotations

import pytest

from colo.manifests import Manifest
from colo.messages import (
    PodAdmitted,
    PodGroupSpec,
    PodRejected,
    PodSpec,
    WorkloadAdmitted,
    WorkloadRejected,
    WorkloadSpec,
)
from colo.submission import apply_answer, expected_outcomes

POD = PodSpec(uid="ml-web", name="web", namespace="ml", created_at=10.0)
JOB = WorkloadSpec(kind="Job", uid="ml-train", name="train", namespace="ml", template=PodSpec(uid="", name=""))
GROUP = PodGroupSpec(uid="ml-train", name="train", namespace="ml", min_member=2)


@pytest.mark.parametrize(("answer", "key", "state"), [
    pytest.param(PodAdmitted(spec=POD, at=11.0), ("pod", "ml-web"), "admitted", id="pod-admitted"),
    pytest.param(PodRejected(uid="ml-web", name="web", reason="bad", at=11.0, created_at=10.0), ("pod", "ml-web"),
                 "rejected", id="pod-rejected"),
    pytest.param(PodRejected(uid="ml-web", name="web", reason="bad", at=11.0), ("pod", "ml-web"), "rejected",
                 id="pod-rejected-older-slo-manager"),
    pytest.param(PodRejected(uid="ml-web", name="web", reason="bad", at=11.0, created_at=3.0), ("pod", "ml-web"),
                 "unknown", id="answer-to-an-earlier-submission"),
    pytest.param(WorkloadAdmitted(kind="Job", uid="ml-train", name="train", namespace="ml", pods=["a"], at=1.0),
                 ("workload", "ml-train"), "admitted", id="job"),
    pytest.param(WorkloadRejected(kind="PodGroup", uid="ml-train", name="train", namespace="ml", errors=["x"],
                                  at=1.0), ("podgroup", "ml-train"), "rejected", id="podgroup-same-uid-as-job"),
])
def test_answers(answer: object, key: tuple[str, str], state: str) -> None:
    expected = expected_outcomes(Manifest(pods=[POD], workloads=[JOB], pod_groups=[GROUP]))
    apply_answer(expected, answer, {POD.uid: POD.created_at})
    assert expected[key].state == state
    others = [o.state for k, o in expected.items() if k != key]
    assert others == ["unknown"] * len(others)
    assert not apply_answer(expected, answer, {POD.uid: POD.created_at})  # a repeat changes nothing
