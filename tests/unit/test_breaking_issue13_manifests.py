"""Issue 13 at the edge: what ``colo submit`` accepts in a PodGroup or a workload's gang is what admission
admits, and a gang timeout of any length is readable as YAML writes it.

* ``scheduleTimeoutSeconds: 1e9`` — YAML 1.1 (PyYAML) reads ``1e9`` as a *string* (its float needs a dot): a
  billion seconds must be accepted, as must the waiting-time annotation ``"1e9"``; ``1e400`` (infinite) must be
  an error that says so.
* A PodGroup's uid / name / namespace and an embedded gang's name are identifiers of at most 80 characters
  (admission's rule, :func:`colo_slo_manager.expansion.pod_group_problems`): the file check must refuse what
  admission would, or a file of a PodGroup and pods is half submitted (the pods in, the group out).
* A workload uid of 76–80 characters is valid, and its embedded gang (uid ``<uid>-gang``, derived) must not be
  refused by admission for a uid the user never wrote.
"""

from __future__ import annotations

import pytest

from colo.manifests import ManifestError, parse_manifest
from colo_slo_manager.expansion import pod_group_problems, workload_problems

GROUP = """apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}, namespace: {namespace}{uid}}}
spec: {{minMember: 2{timeout}}}
"""
JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  uid: {uid}
  annotations: {{gang.scheduling.koordinator.sh/min-available: "1"{extra}}}
spec:
  template: {{spec: {{containers: [{{name: c, image: x}}]}}}}
"""


def group(name: str = "g", namespace: str = "default", uid: str = "", timeout: str = "") -> str:
    return GROUP.format(name=name, namespace=namespace, uid=f", uid: {uid!r}" if uid else "",
                        timeout=f", scheduleTimeoutSeconds: {timeout}" if timeout else "")


def job(name: str = "j", uid: str = "j1", extra: str = "") -> str:
    return JOB.format(name=name, uid=uid, extra=extra)


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param(group(timeout="1e9"), 1e9, id="podgroup-1e9-unquoted"),
    pytest.param(group(timeout="'1e9'"), 1e9, id="podgroup-1e9-string"),
    pytest.param(group(timeout="1.5e+3"), 1500.0, id="podgroup-float-exponent"),
    pytest.param(group(timeout="1000000000"), 1e9, id="podgroup-integer"),
])
def test_group_timeout_of_any_length_in_exponent_notation(text: str, seconds: float) -> None:
    [g] = parse_manifest(text).pod_groups
    assert g.timeout_s == seconds
    assert pod_group_problems(g) == []


def test_embedded_gang_waiting_time_in_exponent_notation() -> None:
    [w] = parse_manifest(job(extra=', gang.scheduling.koordinator.sh/waiting-time: "1e9"')).workloads
    assert w.pod_group is not None and w.pod_group.timeout_s == 1e9


@pytest.mark.parametrize("timeout", ["1e400", "'1e400'", ".inf", "-1e9", "0e0", "1" + "0" * 400, "-" + "1" * 400])
def test_group_timeout_infinite_or_not_positive_is_an_error(timeout: str) -> None:
    with pytest.raises(ManifestError) as exc:
        parse_manifest(group(timeout=timeout))
    assert [e.split(":")[0] for e in exc.value.errors] == ["spec.scheduleTimeoutSeconds"]


@pytest.mark.parametrize(("text", "path"), [
    pytest.param(group(uid="a/b"), "metadata.uid", id="podgroup-uid-slash"),
    pytest.param(group(uid="u" * 81), "metadata.uid", id="podgroup-uid-81-chars"),
    pytest.param(group(name="g" * 100), "metadata.name", id="podgroup-name-100-chars"),
    pytest.param(group(namespace="'Bad NS'"), "metadata.namespace", id="podgroup-namespace-space"),
    pytest.param(job(extra=", gang.scheduling.koordinator.sh/name: " + "g" * 100),
                 "metadata.annotations.gang.scheduling.koordinator.sh/name", id="embedded-gang-name-100-chars"),
])
def test_edge_refuses_what_admission_refuses(text: str, path: str) -> None:
    with pytest.raises(ManifestError) as exc:
        parse_manifest(text)
    assert any(e.startswith(path + ":") for e in exc.value.errors), exc.value.errors


@pytest.mark.parametrize("uid", ["w" * 76, "w" * 80])
def test_admission_admits_the_embedded_gang_of_a_long_valid_uid(uid: str) -> None:
    [w] = parse_manifest(job(uid=uid)).workloads
    assert workload_problems(w) == []


@pytest.mark.parametrize("text", [
    group(), group(name="g" * 80, uid="u" * 80), group(namespace="team-a"), job(), job(uid="w" * 80),
    job(extra=", gang.scheduling.koordinator.sh/name: " + "g" * 80),
])
def test_what_the_edge_accepts_admission_admits(text: str) -> None:
    m = parse_manifest(text)
    assert [p for g in m.pod_groups for p in pod_group_problems(g)] == []
    assert [p for w in m.workloads for p in workload_problems(w)] == []


def test_edge_refuses_a_workload_name_admission_refuses() -> None:
    with pytest.raises(ManifestError) as exc:
        parse_manifest(job(name="j" * 100, uid="short"))
    assert any(e.startswith("metadata.name:") for e in exc.value.errors), exc.value.errors
