"""Priority / QoS class resolution and valid combinations (REFERENCE.md §1)."""

from __future__ import annotations

import pytest

from colo.classes import (
    PRIORITY_CLASS_LABEL,
    QOS_CLASS_LABEL,
    kubernetes_qos,
    priority_class_of,
    priority_class_of_value,
    qos_class_of,
    validate_classes,
)
from colo.messages import PodSpec, Resources


def pod(**kw: object) -> PodSpec:
    return PodSpec(uid="u", name="p", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("priority", "expected"),
    [
        pytest.param(9000, "prod", id="prod-low"), pytest.param(9999, "prod", id="prod-high"),
        pytest.param(7500, "mid", id="mid"), pytest.param(5000, "batch", id="batch-low"),
        pytest.param(5999, "batch", id="batch-high"), pytest.param(3500, "free", id="free"),
        pytest.param(8999, "none", id="gap"), pytest.param(10000, "none", id="above"),
        pytest.param(0, "none", id="zero"), pytest.param(None, "none", id="unset"),
    ],
)
def test_priority_class_of_value(priority: int | None, expected: str) -> None:
    assert priority_class_of_value(priority) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(pod(), "BE", id="no-resources-besteffort"),
        pytest.param(pod(requests=Resources(cpu=1000, memory=2**30), limits=Resources(cpu=1000, memory=2**30)),
                     "LSR", id="guaranteed"),
        pytest.param(pod(limits=Resources(cpu=1000, memory=2**30)), "LSR", id="limits-only-guaranteed"),
        pytest.param(pod(requests=Resources(cpu=500)), "LS", id="burstable"),
        pytest.param(pod(requests=Resources(cpu=500, memory=1), limits=Resources(cpu=1000, memory=1)),
                     "LS", id="limit-above-request"),
        pytest.param(pod(requests=Resources(batch_cpu=1000)), "LS", id="batch-request-is-not-besteffort"),
    ],
)
def test_kubernetes_qos(spec: PodSpec, expected: str) -> None:
    assert kubernetes_qos(spec) == expected


@pytest.mark.parametrize(
    ("spec", "qos", "prio"),
    [
        pytest.param(pod(qos_class="LSE", priority_class="prod"), "LSE", "prod", id="explicit-fields"),
        pytest.param(pod(labels={QOS_CLASS_LABEL: "BE", PRIORITY_CLASS_LABEL: "batch"}), "BE", "batch",
                     id="labels"),
        pytest.param(pod(labels={QOS_CLASS_LABEL: "bogus"}), "BE", "batch", id="bad-label-ignored"),
        pytest.param(pod(priority=7100), "BE", "mid", id="priority-range-wins-over-qos"),
        pytest.param(pod(priority=100), "BE", "none", id="priority-outside-ranges"),
        pytest.param(pod(requests=Resources(cpu=100)), "LS", "prod", id="LS-defaults-to-prod"),
        pytest.param(pod(), "BE", "batch", id="BE-defaults-to-batch"),
        pytest.param(pod(qos_class="SYSTEM"), "SYSTEM", "prod", id="SYSTEM-is-prod"),
    ],
)
def test_class_resolution(spec: PodSpec, qos: str, prio: str) -> None:
    assert (qos_class_of(spec), priority_class_of(spec)) == (qos, prio)


@pytest.mark.parametrize(
    ("spec", "errors"),
    [
        pytest.param(pod(qos_class="BE", priority_class="batch"), [], id="BE-batch-ok"),
        pytest.param(pod(qos_class="BE", priority_class="free"), [], id="BE-free-ok"),
        pytest.param(pod(qos_class="BE", priority_class="mid"), [], id="BE-mid-ok"),
        pytest.param(pod(qos_class="BE", priority_class="prod"), ["BE cannot have priority class prod"],
                     id="BE-prod"),
        pytest.param(pod(qos_class="BE", priority=1), ["BE cannot have priority class none"], id="BE-none"),
        pytest.param(pod(qos_class="LSR", priority_class="prod", requests=Resources(cpu=2000)), [],
                     id="LSR-whole-cores-ok"),
        pytest.param(pod(qos_class="LSR", priority_class="prod", requests=Resources(cpu=1500)),
                     ["whole, non-zero number of cores"], id="LSR-fractional"),
        pytest.param(pod(qos_class="LSE", priority_class="prod"), ["whole, non-zero number of cores"],
                     id="LSE-zero-cores"),
        pytest.param(pod(qos_class="LSE", priority_class="batch", requests=Resources(cpu=1000)),
                     ["requires priority class prod, got batch"], id="LSE-batch"),
        pytest.param(pod(qos_class="LS", priority_class="prod", requests=Resources(batch_cpu=500)),
                     ["batch-* resources must be BE"], id="LS-with-batch-resources"),
        pytest.param(pod(qos_class="LS", priority_class="mid", requests=Resources(mid_cpu=500)), [],
                     id="LS-mid-resources-ok"),
        pytest.param(pod(qos_class="LSR", priority_class="batch", requests=Resources(cpu=500, batch_memory=1)),
                     ["requires priority class prod", "whole, non-zero", "batch-* resources must be BE"],
                     id="every-violation-listed"),
    ],
)
def test_validate_classes(spec: PodSpec, errors: list[str]) -> None:
    got = validate_classes(spec)
    assert len(got) == len(errors), got
    for fragment, message in zip(errors, got):
        assert fragment in message


def test_hostname_label_is_the_nodes_name_unless_set() -> None:
    from colo.messages import HOSTNAME_LABEL, NodeSpec, Resources, with_hostname_label

    r = Resources(cpu=1000)
    assert with_hostname_label(NodeSpec(name="m1", capacity=r, allocatable=r, labels={"zone": "a"})).labels == {
        "zone": "a", HOSTNAME_LABEL: "m1"}
    kept = NodeSpec(name="m1", capacity=r, allocatable=r, labels={HOSTNAME_LABEL: "host-1"})
    assert with_hostname_label(kept) is kept
