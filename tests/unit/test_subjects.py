"""The subject registry (colo.subjects)."""

from __future__ import annotations

import pytest

from colo import messages as m
from colo import subjects
from colo.subjects import Subject


@pytest.mark.parametrize(
    ("subject", "keys", "expected"),
    [
        pytest.param(subjects.POD_SUBMITTED, {}, "colo.v1.pod.submitted", id="no-keys"),
        pytest.param(subjects.POD_BOUND, {"node": "node-1"}, "colo.v1.pod.bound.node-1", id="node"),
        pytest.param(subjects.DEAD_LETTER, {"service": "slo_manager"}, "colo.v1.dlq.slo_manager", id="service"),
    ],
)
def test_format(subject: Subject[object], keys: dict[str, str], expected: str) -> None:
    assert subject.format(**keys) == expected


@pytest.mark.parametrize(
    ("subject", "keys"),
    [
        pytest.param(subjects.POD_BOUND, {}, id="missing-key"),
        pytest.param(subjects.POD_SUBMITTED, {"node": "n"}, id="unexpected-key"),
        pytest.param(subjects.POD_BOUND, {"node": "a.b"}, id="dot-in-token"),
        pytest.param(subjects.POD_BOUND, {"node": "*"}, id="wildcard-token"),
        pytest.param(subjects.POD_BOUND, {"node": ""}, id="empty-token"),
        pytest.param(subjects.POD_BOUND, {"node": "a b"}, id="space"),
        pytest.param(subjects.POD_BOUND, {"node": "n1\n"}, id="trailing-newline"),
    ],
)
def test_format_rejects_bad_keys(subject: Subject[object], keys: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        subject.format(**keys)


@pytest.mark.parametrize(
    ("subject", "wildcard"),
    [
        pytest.param(subjects.NODE_METRIC, "colo.v1.node.metric.*", id="node-metric"),
        pytest.param(subjects.POD_ADMITTED, "colo.v1.pod.admitted", id="no-keys"),
    ],
)
def test_wildcard(subject: Subject[object], wildcard: str) -> None:
    assert subject.wildcard == wildcard


@pytest.mark.parametrize(
    ("concrete", "expected"),
    [
        pytest.param("colo.v1.pod.bound.n7", subjects.POD_BOUND, id="bound"),
        pytest.param("colo.v1.node.metric.n7", subjects.NODE_METRIC, id="metric"),
        pytest.param("colo.v1.pod.submitted", subjects.POD_SUBMITTED, id="exact"),
        pytest.param("colo.v1.pod.bound", None, id="too-short"),
        pytest.param("colo.v1.pod.bound.n1.extra", None, id="too-long"),
        pytest.param("other.v1.pod.submitted", None, id="other-prefix"),
    ],
)
def test_by_subject(concrete: str, expected: Subject[object] | None) -> None:
    assert subjects.by_subject(concrete) is expected


def test_every_stream_subject_is_covered_by_its_stream() -> None:
    streams = {s.name: s for s in subjects.STREAMS}
    for subj in subjects.ALL:
        if subj.stream is None:
            continue
        patterns = streams[subj.stream].subjects
        concrete = subj.format(**{k: "x" for k in subj.keys})
        assert any(_matches(p, concrete) for p in patterns), subj.pattern


def test_registry_types_are_messages() -> None:
    assert len({s.pattern for s in subjects.ALL}) == len(subjects.ALL)
    for subj in subjects.ALL:
        assert issubclass(subj.type, m.Message)


def _matches(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)
