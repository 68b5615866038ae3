"""`colo submit` manifests: valid files, every error with its field path, nothing half-submitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colo.cli import main as cli
from colo.cli import submit
from colo.manifests import Manifest, load_manifest, parse_manifest
from colo.manifests import ManifestError as PodFileError
from colo.messages import PodSpec
from colo.submission import publications


def parse_pods(text: str, now: float = 0.0) -> list[PodSpec]:
    return parse_manifest(text, now, kinds=("Pod",)).pods


def load_pod_file(path: Path) -> list[PodSpec]:
    return load_manifest(path, kinds=("Pod",)).pods

POD = """
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  priorityClassName: koord-prod
  containers:
  - resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: "1", memory: 2Gi}}
  - resources: {requests: {cpu: "0.25", memory: 256Mi}}
"""

BATCH = """
metadata: {name: spark, labels: {koordinator.sh/qosClass: BE}}
spec:
  priority: 5500
  containers:
  - resources: {requests: {kubernetes.io/batch-cpu: "2000", kubernetes.io/batch-memory: 4Gi}}
"""


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(POD, [("shop-web", 750, 1342177280, 9500)], id="single-pod-containers-summed"),
    pytest.param(BATCH, [("default-spark", 0, 0, 5500)], id="batch-resources"),
    pytest.param(json.dumps([{"metadata": {"name": "a"}, "spec": {"containers": [{}]}},
                             {"metadata": {"name": "b"}, "spec": {"containers": [{}]}}]),
                 [("default-a", 0, 0, None), ("default-b", 0, 0, None)], id="json-list"),
    pytest.param("kind: List\nitems:\n- metadata: {name: x}\n  spec: {containers: [{}]}\n",
                 [("default-x", 0, 0, None)], id="kind-list"),
    pytest.param(POD + "---\n" + BATCH, [("shop-web", 750, 1342177280, 9500), ("default-spark", 0, 0, 5500)],
                 id="multi-document"),
])
def test_valid(text: str, expected: list[tuple[str, int, int, int | None]]) -> None:
    pods = parse_pods(text, now=12.0)
    assert [(p.uid, p.requests.cpu, p.requests.memory, p.priority) for p in pods] == expected
    assert all(p.created_at == 12.0 for p in pods)


def test_batch_units() -> None:
    (pod,) = parse_pods(BATCH)
    assert (pod.requests.batch_cpu, pod.requests.batch_memory) == (2000, 4 * 2**30)
    assert pod.labels["koordinator.sh/qosClass"] == "BE"


def _list(*specs: str) -> str:
    return "kind: List\nitems:\n" + "".join(f"- {s}\n" for s in specs)


OK = "{metadata: {name: ok}, spec: {containers: [{}]}}"


@pytest.mark.parametrize(("text", "errors"), [
    pytest.param(_list(OK, OK.replace("ok", "ok2"),
                       "{metadata: {name: c}, spec: {containers: [{resources: {requests: {cpu: 5x}}}]}}"),
                 ["items[2].spec.containers[0].resources.requests.cpu: not a quantity: '5x'"], id="bad-cpu"),
    pytest.param(_list("{metadata: {name: m}, spec: {containers: [{}, {resources: {limits: {memory: -1Gi}}}]}}"),
                 ["items[0].spec.containers[1].resources.limits.memory: not a quantity: '-1Gi'"], id="bad-memory"),
    pytest.param(_list("{metadata: {name: g}, spec: {containers: [{resources: {requests: {gpu: 1}}}]}}"),
                 ["items[0].spec.containers[0].resources.requests.gpu: unknown resource 'gpu'"], id="unknown-resource"),
    pytest.param(_list("{metadata: {}, spec: {containers: [{}]}}"),
                 ["items[0].metadata.name: required"], id="missing-name"),
    pytest.param(_list("{metadata: {name: Bad_Name}, spec: {containers: [{}]}}"),
                 ["items[0].metadata.name: not a valid name: 'Bad_Name'"], id="bad-name"),
    pytest.param(_list("{metadata: {name: n}, spec: {}}"),
                 ["items[0].spec.containers: required"], id="no-containers"),
    pytest.param(_list("{metadata: {name: p}, spec: {priority: high, containers: [{}]}}"),
                 ["items[0].spec.priority: expected an integer, got 'high'"], id="bad-priority"),
    pytest.param(_list("{metadata: {name: p}, spec: {priorityClassName: gold, containers: [{}]}}"),
                 ["items[0].spec.priorityClassName: unknown priority class 'gold'"], id="bad-priority-class"),
    pytest.param(_list("{kind: Service, metadata: {name: s}, spec: {containers: [{}]}}"),
                 ["items[0].kind: unknown kind 'Service'"], id="wrong-kind"),
    pytest.param(_list("{metadata: {name: q, labels: {koordinator.sh/qosClass: BE}}, "
                       "spec: {priorityClassName: koord-prod, containers: [{}]}}"),
                 ["items[0].spec: QoS class BE cannot have priority class prod"], id="invalid-class-combination"),
    pytest.param(_list(OK, OK), ["items[1].metadata: duplicate pod 'default-ok'"], id="duplicate"),
    pytest.param("metadata: [1]\nspec: {containers: [{}]}\n", ["metadata: expected a mapping"], id="root-pod"),
    pytest.param("a: [1, 2\n", ["<root>: not valid YAML/JSON"], id="not-yaml"),
    pytest.param("", ["<root>: no objects in file"], id="empty"),
])
def test_errors_have_paths(text: str, errors: list[str]) -> None:
    with pytest.raises(PodFileError) as info:
        parse_pods(text)
    assert len(info.value.errors) == len(errors), info.value.errors
    for got, want in zip(info.value.errors, errors):
        assert got.startswith(want), (got, want)


def test_every_error_listed() -> None:
    text = _list("{metadata: {name: a}, spec: {containers: [{resources: {requests: {cpu: 1x, memory: 2y}}}]}}",
                 "{metadata: {name: b}, spec: {containers: [{resources: {limits: {cpu: z}}}]}}")
    with pytest.raises(PodFileError) as info:
        parse_pods(text)
    assert [e.split(":")[0] for e in info.value.errors] == [
        "items[0].spec.containers[0].resources.requests.cpu",
        "items[0].spec.containers[0].resources.requests.memory",
        "items[1].spec.containers[0].resources.limits.cpu",
    ]


def test_submit_publishes_nothing_when_any_pod_is_invalid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    published: list[object] = []

    async def fake_submit(manifest: Manifest, url: str, attempts: int, wait_s: float | None,
                          settings: object = None) -> list[object]:
        published.extend(item[1] for item in publications(manifest))
        return []

    monkeypatch.setattr(submit, "submit", fake_submit)
    monkeypatch.setenv("COLO_NATS_URL", "nats://127.0.0.1:1")
    bad = tmp_path / "bad.yaml"
    bad.write_text(_list(OK, "{metadata: {name: c}, spec: {containers: [{resources: {requests: {cpu: 5x}}}]}}"))
    assert cli.main(["submit", str(bad)]) == 1
    assert published == []
    good = tmp_path / "good.yaml"
    good.write_text(_list(OK, OK.replace("ok", "ok2")))
    assert cli.main(["submit", str(good)]) == 0
    assert [p.uid for p in published] == ["default-ok", "default-ok2"]  # type: ignore[attr-defined]


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(PodFileError, match="cannot read"):
        load_pod_file(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("subject", "payload", "expected"), [
    pytest.param("colo.v1.pod.rejected", b'{"uid":"u","name":"n","reason":"bad","at":1}',
                 "pod.rejected  PodRejected uid=u name=n reason=bad", id="rejected"),
    pytest.param("colo.v1.pod.rejected", b'{"uid":1}', "pod.rejected  undecodable", id="garbage"),
    pytest.param("colo.v1.nope", b"{}", "nope  (2 bytes, unregistered subject)", id="unregistered"),
])
def test_events_describe(subject: str, payload: bytes, expected: str) -> None:
    assert cli.describe(subject, payload).startswith(expected)


@pytest.mark.parametrize(("text", "kinds"), [
    pytest.param("metadata: {name: a}\nspec: {containers: [{}]}\n", (False, False, False), id="plain"),
    pytest.param("metadata: {name: a, annotations: {kubernetes.io/config.mirror: abc}}\nspec: {containers: [{}]}\n",
                 (True, False, False), id="mirror-annotation"),
    pytest.param("metadata: {name: a, annotations: {kubernetes.io/config.source: file}}\nspec: {containers: [{}]}\n",
                 (False, True, False), id="static-from-file"),
    pytest.param("metadata: {name: a, annotations: {kubernetes.io/config.source: api}}\nspec: {containers: [{}]}\n",
                 (False, False, False), id="source-api-not-static"),
    pytest.param("metadata: {name: a}\nspec: {containers: [{}], volumes: [{name: d, emptyDir: {}}]}\n",
                 (False, False, True), id="emptydir-local-storage"),
    pytest.param("metadata: {name: a}\nspec: {containers: [{}], volumes: [{name: h, hostPath: {path: /x}}]}\n",
                 (False, False, True), id="hostpath-local-storage"),
    pytest.param("metadata: {name: a}\nspec: {containers: [{}], volumes: [{name: c, configMap: {name: x}}]}\n",
                 (False, False, False), id="configmap-not-local"),
])
def test_pod_kinds_for_eviction(text: str, kinds: tuple[bool, bool, bool]) -> None:
    (pod,) = parse_pods(text)
    assert (pod.mirror, pod.static, pod.local_storage) == kinds


def test_volumes_must_be_a_list() -> None:
    with pytest.raises(PodFileError) as err:
        parse_pods("metadata: {name: a}\nspec: {containers: [{}], volumes: {name: d}}\n")
    assert "spec.volumes: expected a list" in str(err.value)
