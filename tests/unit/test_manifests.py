"""colo.manifests: every kind parsed from what a Kubernetes user writes; every problem with its field path;
nothing returned unless the whole file is valid. Table-driven, one row per case."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo.manifests import ManifestError, load_manifest, parse_manifest
from colo.messages import POD_GROUP_LABEL, PodGroupSpec, ReservationOwner, Resources
from colo.workloads import expand, initial_pods

G = 2**30
C = "containers: [{resources: {requests: {cpu: 500m, memory: 1Gi}}}]"
TEMPLATE = f"template: {{metadata: {{labels: {{app: w}}}}, spec: {{{C}}}}}"


def _errors(text: str) -> list[str]:
    with pytest.raises(ManifestError) as info:
        parse_manifest(text)
    return info.value.errors


def _check(text: str, expected: list[str]) -> None:
    errors = _errors(text)
    assert len(errors) == len(expected), errors
    for got, want in zip(errors, expected):
        assert got.startswith(want), (got, want)


# ---------------------------------------------------------------------------------------------- workloads

@pytest.mark.parametrize(("doc", "expected"), [
    pytest.param(f"kind: Deployment\napiVersion: apps/v1\nmetadata: {{name: web}}\nspec: {{replicas: 3, {TEMPLATE}}}",
                 ("Deployment", "default-web", 3, 1, 1, 3), id="deployment"),
    pytest.param(f"kind: StatefulSet\nmetadata: {{name: db, namespace: data}}\nspec: {{replicas: 2, {TEMPLATE}}}",
                 ("StatefulSet", "data-db", 2, 1, 1, 2), id="statefulset-namespace"),
    pytest.param(f"kind: Deployment\nmetadata: {{name: idle}}\nspec: {{replicas: 0, {TEMPLATE}}}",
                 ("Deployment", "default-idle", 0, 1, 1, 0), id="zero-replicas"),
    pytest.param(f"kind: Deployment\nmetadata: {{name: one}}\nspec: {{{TEMPLATE}}}",
                 ("Deployment", "default-one", 1, 1, 1, 1), id="replicas-default-1"),
    pytest.param(f"kind: Job\napiVersion: batch/v1\nmetadata: {{name: train, uid: j-1}}\n"
                 f"spec: {{parallelism: 4, completions: 10, {TEMPLATE}}}",
                 ("Job", "j-1", 1, 4, 10, 4), id="job-completions-above-parallelism"),
    pytest.param(f"kind: Job\nmetadata: {{name: t}}\nspec: {{parallelism: 3, {TEMPLATE}}}",
                 ("Job", "default-t", 1, 3, 3, 3), id="job-completions-default-parallelism"),
    pytest.param(f"kind: Job\nmetadata: {{name: t}}\nspec: {{parallelism: 8, completions: 2, {TEMPLATE}}}",
                 ("Job", "default-t", 1, 8, 2, 2), id="job-fewer-completions-than-parallelism"),
])
def test_workloads(doc: str, expected: tuple[str, str, int, int, int, int]) -> None:
    (w,) = parse_manifest(doc, now=5.0).workloads
    assert (w.kind, w.uid, w.replicas, w.parallelism, w.completions, initial_pods(w)) == expected
    assert w.template.requests == Resources(cpu=500, memory=G)
    assert w.template.namespace == w.namespace and w.created_at == 5.0
    assert w.pod_group is None and w.max_unavailable == -1


def _job(annotations: str = "", template_annotations: str = "", spec: str = "parallelism: 4") -> str:
    template = "{metadata: {annotations: {" + template_annotations + "}}, spec: {" + C + "}}"
    return ("kind: Job\nmetadata: {name: train, annotations: {" + annotations + "}}\n"
            "spec: {" + spec + ", template: " + template + "}")


GANG = "gang.scheduling.koordinator.sh"


@pytest.mark.parametrize(("doc", "expected"), [
    pytest.param(_job(f"{GANG}/min-available: '3'"), ("train", 3, 600.0, "Strict", []), id="min-available"),
    pytest.param(_job(f"{GANG}/min-available: '4', {GANG}/waiting-time: 2h, {GANG}/mode: NonStrict"),
                 ("train", 4, 7200.0, "NonStrict", []), id="waiting-time-mode"),
    pytest.param(_job(template_annotations=f"{GANG}/min-available: '2', {GANG}/waiting-time: '86400'"),
                 ("train", 2, 86400.0, "Strict", []), id="on-template-a-day-no-cap"),
    pytest.param(_job(f"{GANG}/waiting-time: 1m, {GANG}/min-available: '4'", f"{GANG}/min-available: '2', {GANG}/mode: NonStrict"),
                 ("train", 4, 60.0, "NonStrict", []), id="workload-overrides-template-key-by-key"),
    pytest.param(_job(f"{GANG}/min-available: '1', {GANG}/name: ps, {GANG}/groups: '[\"default/ps\", \"worker\"]'"),
                 ("ps", 1, 600.0, "Strict", ["default/ps", "default/worker"]), id="groups-and-name"),
])
def test_embedded_gang(doc: str, expected: tuple[str, int, float, str, list[str]]) -> None:
    (w,) = parse_manifest(doc).workloads
    g = w.pod_group
    assert g is not None
    assert (g.name, g.min_member, g.timeout_s, g.mode, g.groups) == expected
    pods = expand(w, range(initial_pods(w)))
    assert [p.uid for p in pods] == [f"default-train-{i}" for i in range(4)]
    assert all(p.gang is not None and p.gang.name == f"default/{expected[0]}" and p.gang.total_member == 4
               for p in pods)
    assert all(p.owner is not None and (p.owner.kind, p.owner.name, p.owner.uid) == ("Job", "train", "default-train")
               for p in pods)


def test_template_names_a_pod_group() -> None:
    doc = (f"kind: StatefulSet\nmetadata: {{name: ps}}\nspec: {{replicas: 2, template: {{metadata: "
           f"{{labels: {{{POD_GROUP_LABEL}: pg}}}}, spec: {{{C}}}}}}}")
    (w,) = parse_manifest(doc).workloads
    assert w.pod_group is None and w.template.labels[POD_GROUP_LABEL] == "pg"


@pytest.mark.parametrize(("annotation", "replicas", "expected"), [
    pytest.param("'2'", 5, 2, id="integer"),
    pytest.param("'0'", 5, 0, id="zero"),
    pytest.param("25%", 10, 3, id="percent-rounded-up"),
    pytest.param("100%", 4, 4, id="all"),
])
def test_max_unavailable(annotation: str, replicas: int, expected: int) -> None:
    doc = (f"kind: Deployment\nmetadata: {{name: web, annotations: {{colo.io/max-unavailable: {annotation}}}}}\n"
           f"spec: {{replicas: {replicas}, {TEMPLATE}}}")
    (w,) = parse_manifest(doc).workloads
    assert w.max_unavailable == expected
    assert all(p.max_unavailable == expected for p in expand(w, range(replicas)))


def test_deployment_pods_carry_a_stable_hash() -> None:
    (w,) = parse_manifest(f"kind: Deployment\nmetadata: {{name: web}}\nspec: {{replicas: 3, {TEMPLATE}}}").workloads
    pods = expand(w, range(3))
    assert len({p.uid for p in pods}) == 3 and all(p.name.startswith("web-") and len(p.name) == 14 for p in pods)
    assert [p.uid for p in expand(w, range(3))] == [p.uid for p in pods]
    assert all(p.app == "w" for p in pods)


@pytest.mark.parametrize(("doc", "errors"), [
    pytest.param(f"kind: Deployment\nmetadata: {{name: w}}\nspec: {{replicas: -1, {TEMPLATE}}}",
                 ["spec.replicas: must be ≥ 0, got -1"], id="negative-replicas"),
    pytest.param(f"kind: Deployment\nmetadata: {{name: w}}\nspec: {{replicas: many, {TEMPLATE}}}",
                 ["spec.replicas: expected an integer, got 'many'"], id="replicas-not-int"),
    pytest.param(f"kind: Deployment\nmetadata: {{name: w}}\nspec: {{replicas: 10001, {TEMPLATE}}}",
                 ["spec.replicas: at most 10000 pods per workload, got 10001"], id="too-many-replicas"),
    pytest.param(f"kind: Job\nmetadata: {{name: j}}\nspec: {{completions: 1000000000, {TEMPLATE}}}",
                 ["spec.completions: at most 10000 pods per workload"], id="too-many-completions"),
    pytest.param(f"kind: Job\nmetadata: {{name: {'x' * 80}}}\nspec: {{{TEMPLATE}}}",
                 ["metadata.name: the workload's uid 'default-xxx"], id="uid-too-long"),
    pytest.param(f"kind: Job\nmetadata: {{name: j}}\nspec: {{parallelism: 0, completions: 0, {TEMPLATE}}}",
                 ["spec.parallelism: must be ≥ 1, got 0", "spec.completions: must be ≥ 1, got 0"],
                 id="parallelism-completions-zero"),
    pytest.param("kind: Job\nmetadata: {name: j}\nspec: {parallelism: 2}",
                 ["spec.template: required"], id="no-template"),
    pytest.param("kind: Job\nmetadata: {name: j}\nspec: {template: {spec: {containers: "
                 "[{resources: {requests: {cpu: 5x}}}]}}}",
                 ["spec.template.spec.containers[0].resources.requests.cpu: not a quantity: '5x'"], id="bad-template"),
    pytest.param("kind: Deployment\napiVersion: apps/v2\nmetadata: {name: w}\n"
                 f"spec: {{{TEMPLATE}}}", ["apiVersion: expected apps/v1 for Deployment, got 'apps/v2'"],
                 id="wrong-api-version"),
    pytest.param(_job(f"{GANG}/min-available: '5'"),
                 [f"metadata.annotations.{GANG}/min-available: must be at most the workload's 4 pods, got 5"],
                 id="min-available-above-pods"),
    pytest.param(_job(f"{GANG}/min-available: '0'"), [f"metadata.annotations.{GANG}/min-available: must be ≥ 1"],
                 id="min-available-zero"),
    pytest.param(_job(f"{GANG}/min-available: '2', {GANG}/waiting-time: '0s'"),
                 [f"metadata.annotations.{GANG}/waiting-time: must be > 0 seconds"], id="timeout-zero"),
    pytest.param(_job(f"{GANG}/min-available: '2', {GANG}/waiting-time: soon"),
                 [f"metadata.annotations.{GANG}/waiting-time: expected seconds or a duration"], id="timeout-garbage"),
    pytest.param(_job(f"{GANG}/min-available: '2', {GANG}/mode: Loose"),
                 [f"metadata.annotations.{GANG}/mode: expected Strict or NonStrict, got 'Loose'"], id="bad-mode"),
    pytest.param(_job(f"{GANG}/min-available: '2', {GANG}/groups: 'ps'"),
                 [f"metadata.annotations.{GANG}/groups: expected a JSON list"], id="groups-not-json-list"),
    pytest.param(_job(f"{GANG}/min-available: '2', {GANG}/groups: '[\"a/B_\"]'"),
                 [f"metadata.annotations.{GANG}/groups[0]: not a 'namespace/name'"], id="groups-bad-entry"),
    pytest.param(_job(f"{GANG}/waiting-time: 10s"),
                 [f"metadata.annotations.{GANG}/waiting-time: needs {GANG}/min-available"], id="gang-without-min"),
    pytest.param(_job(f"{GANG}/mode: Loose", f"{GANG}/min-available: '2', {GANG}/waiting-time: never"),
                 [f"spec.template.metadata.annotations.{GANG}/waiting-time: expected seconds",
                  f"metadata.annotations.{GANG}/mode: expected Strict or NonStrict"], id="mixed-paths"),
    pytest.param(_job(template_annotations=f"{GANG}/min-available: x"),
                 [f"spec.template.metadata.annotations.{GANG}/min-available: expected an integer"],
                 id="template-annotation-path"),
    pytest.param(_job("colo.io/max-unavailable: '-1'"),
                 ["metadata.annotations.colo.io/max-unavailable: must be ≥ 0"], id="max-unavailable-negative"),
    pytest.param(_job("colo.io/max-unavailable: 150%"),
                 ["metadata.annotations.colo.io/max-unavailable: must be at most 100%"], id="max-unavailable-percent"),
    pytest.param(f"kind: Job\nmetadata: {{name: j, annotations: {{{GANG}/min-available: '1'}}}}\nspec: {{template: "
                 f"{{metadata: {{labels: {{{POD_GROUP_LABEL}: pg}}}}, spec: {{{C}}}}}}}",
                 [f"spec.template.metadata.labels.{POD_GROUP_LABEL}: a workload either embeds a gang or names"],
                 id="gang-and-pod-group"),
    pytest.param(f"kind: Job\nmetadata: {{name: j}}\nspec: {{template: {{spec: {{preemptionPolicy: Sometimes, {C}}}}}}}",
                 ["spec.template.spec.preemptionPolicy: expected one of PreemptLowerPriority, Never"],
                 id="bad-preemption-policy"),
])
def test_workload_errors(doc: str, errors: list[str]) -> None:
    _check(doc, errors)


# ---------------------------------------------------------------------------------------------- PodGroup

PG = "kind: PodGroup\napiVersion: scheduling.sigs.k8s.io/v1alpha1\nmetadata: {name: pg, namespace: ml"


@pytest.mark.parametrize(("doc", "expected"), [
    pytest.param(PG + "}\nspec: {minMember: 3}", PodGroupSpec(uid="ml-pg", name="pg", namespace="ml", min_member=3),
                 id="min-member"),
    pytest.param(PG + "}\n", PodGroupSpec(uid="ml-pg", name="pg", namespace="ml"), id="defaults"),
    pytest.param(PG + "}\nspec: {minMember: 2, scheduleTimeoutSeconds: 604800}",
                 PodGroupSpec(uid="ml-pg", name="pg", namespace="ml", min_member=2, timeout_s=604800.0),
                 id="a-week-timeout-no-cap"),
    pytest.param(PG + f", annotations: {{{GANG}/mode: NonStrict, {GANG}/groups: '[\"ml/pg\", \"ml/ps\"]'}}}}\n"
                 "spec: {minMember: 1}",
                 PodGroupSpec(uid="ml-pg", name="pg", namespace="ml", mode="NonStrict", groups=["ml/pg", "ml/ps"]),
                 id="mode-groups"),
])
def test_pod_groups(doc: str, expected: PodGroupSpec) -> None:
    assert parse_manifest(doc).pod_groups == [expected]


@pytest.mark.parametrize(("doc", "errors"), [
    pytest.param(PG + "}\nspec: {minMember: 0}", ["spec.minMember: must be ≥ 1, got 0"], id="min-zero"),
    pytest.param(PG + "}\nspec: {scheduleTimeoutSeconds: -5}", ["spec.scheduleTimeoutSeconds: must be > 0"],
                 id="negative-timeout"),
    pytest.param(PG + "}\nspec: {scheduleTimeoutSeconds: .inf}", ["spec.scheduleTimeoutSeconds: must be > 0"],
                 id="infinite-timeout"),
    pytest.param(PG + f", annotations: {{{GANG}/mode: strict}}}}\n",
                 [f"metadata.annotations.{GANG}/mode: expected Strict or NonStrict"], id="mode-case"),
    pytest.param("kind: PodGroup\nmetadata: {name: PG}\n", ["metadata.name: not a valid name: 'PG'"], id="bad-name"),
])
def test_pod_group_errors(doc: str, errors: list[str]) -> None:
    _check(doc, errors)


# ---------------------------------------------------------------------------------------------- ElasticQuota

EQ = "kind: ElasticQuota\napiVersion: scheduling.sigs.k8s.io/v1alpha1\nmetadata: {name: team-a"
QP = "quota.scheduling.koordinator.sh"


def test_quota() -> None:
    doc = (EQ + f", labels: {{{QP}/parent: org}}, annotations: {{{QP}/shared-weight: '{{\"cpu\": \"2\"}}', "
           f"{QP}/allow-lent-resource: 'false'}}}}\n"
           "spec: {min: {cpu: '4', memory: 8Gi}, max: {cpu: '8', memory: 16Gi, kubernetes.io/batch-cpu: '4000', "
           "pods: 20}, namespaces: [a, b], selector: {matchLabels: {team: a}}}")
    (q,) = parse_manifest(doc, now=3.0).quotas
    assert (q.name, q.parent, q.namespaces, q.match_labels, q.allow_lent) == ("team-a", "org", ["a", "b"],
                                                                             {"team": "a"}, False)
    assert q.min == {"cpu": 4000, "memory": 8 * G}
    assert q.max == {"cpu": 8000, "memory": 16 * G, "batch_cpu": 4000, "pods": 20}
    assert q.shared_weight == {"cpu": 2000} and q.created_at == 3.0


def test_quota_tree_in_one_file() -> None:
    doc = (f"kind: ElasticQuota\nmetadata: {{name: org, labels: {{{QP}/is-parent: 'true'}}}}\nspec: {{max: {{cpu: 10}}}}"
           f"\n---\n{EQ}, labels: {{{QP}/parent: org}}}}\nspec: {{min: {{cpu: 1}}}}")
    assert [(q.name, q.parent) for q in parse_manifest(doc).quotas] == [("org", ""), ("team-a", "org")]


@pytest.mark.parametrize(("doc", "errors"), [
    pytest.param(EQ + "}\nspec: {min: {cpu: '8'}, max: {cpu: '4'}}", ["spec.min.cpu: min 8000 exceeds max 4000"],
                 id="min-above-max"),
    pytest.param(EQ + "}\nspec: {min: {gpu: 1}}", ["spec.min.gpu: unknown resource 'gpu'"], id="unknown-resource"),
    pytest.param(EQ + "}\nspec: {max: {memory: lots}}", ["spec.max.memory: not a quantity: 'lots'"], id="bad-quantity"),
    pytest.param("kind: ElasticQuota\nmetadata: {name: team.a}\nspec: {}",
                 ["metadata.name: not a valid name: 'team.a'"], id="dot-in-name-not-a-subject-token"),
    pytest.param(EQ + f", annotations: {{{QP}/shared-weight: 'cpu=2'}}}}\nspec: {{}}",
                 [f"metadata.annotations.{QP}/shared-weight: expected a JSON resource list"], id="bad-weight"),
    pytest.param(EQ + f", annotations: {{{QP}/allow-lent-resource: maybe}}}}\nspec: {{}}",
                 [f"metadata.annotations.{QP}/allow-lent-resource: expected true or false"], id="bad-allow-lent"),
    pytest.param(EQ + "}\nspec: {selector: {matchExpressions: []}}",
                 ["spec.selector.matchExpressions: unsupported"], id="match-expressions"),
    pytest.param(EQ + "}\nspec: {namespaces: a}", ["spec.namespaces: expected a list of strings"], id="namespaces"),
    pytest.param(EQ + f", labels: {{{QP}/parent: team-a}}}}\nspec: {{}}",
                 [f"metadata.labels.{QP}/parent: a quota cannot be its own parent"], id="own-parent"),
    pytest.param(f"kind: ElasticQuota\nmetadata: {{name: org}}\nspec: {{}}\n---\n{EQ}, labels: {{{QP}/parent: org}}}}"
                 "\nspec: {}", ["[1].metadata.labels: parent quota 'org' is not marked"], id="parent-not-is-parent"),
])
def test_quota_errors(doc: str, errors: list[str]) -> None:
    _check(doc, errors)


# ---------------------------------------------------------------------------------------------- Reservation

RS = "kind: Reservation\napiVersion: scheduling.koordinator.sh/v1alpha1\nmetadata: {name: r1}\n"


def test_reservation() -> None:
    doc = (RS + f"spec: {{template: {{spec: {{nodeSelector: {{zone: a}}, {C}}}}}, owners: [{{object: {{uid: p-1}}}}, "
           "{controller: {kind: Job, name: train}, namespace: ml}, {labelSelector: {matchLabels: {app: web}}}], "
           "ttl: 30m, allocateOnce: false, nodeName: n1}")
    (r,) = parse_manifest(doc, now=2.0).reservations
    assert (r.name, r.node, r.requests, r.ttl_s, r.allocate_once, r.node_selector, r.created_at) == (
        "r1", "n1", Resources(cpu=500, memory=G), 1800.0, False, {"zone": "a"}, 2.0)
    assert r.owners == [ReservationOwner(uid="p-1"), ReservationOwner(owner_kind="Job", owner_name="train", namespace="ml"),
                        ReservationOwner(match_labels={"app": "web"})]


@pytest.mark.parametrize(("ttl", "seconds"), [
    pytest.param("120", 120.0, id="seconds-string"), pytest.param("1h30m", 5400.0, id="duration"),
    pytest.param("45", 45.0, id="number"), pytest.param("1.5s", 1.5, id="fraction"),
])
def test_reservation_ttl(ttl: str, seconds: float) -> None:
    doc = RS + f"spec: {{template: {{spec: {{{C}}}}}, owners: [{{object: {{uid: p}}}}], ttl: {ttl}}}"
    assert parse_manifest(doc).reservations[0].ttl_s == seconds


@pytest.mark.parametrize(("spec", "errors"), [
    pytest.param(f"{{template: {{spec: {{{C}}}}}}}", ["spec.owners: required"], id="no-owners"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{}}]}}", ["spec.owners[0]: expected exactly one of"],
                 id="empty-owner"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{object: {{uid: p}}, labelSelector: {{}}}}]}}",
                 ["spec.owners[0]: expected exactly one of"], id="two-owner-kinds"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{controller: {{kind: ReplicaSet, name: x}}}}]}}",
                 ["spec.owners[0].controller.kind: expected Deployment, StatefulSet or Job"], id="bad-controller"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{labelSelector: {{matchLabels: {{}}}}}}]}}",
                 ["spec.owners[0].labelSelector.matchLabels: required"], id="empty-selector"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{object: {{uid: p}}}}], ttl: 0}}",
                 ["spec.ttl: must be > 0"], id="ttl-zero"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{object: {{uid: p}}}}], ttl: 1d}}",
                 ["spec.ttl: expected seconds or a duration"], id="ttl-days-unsupported"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{object: {{uid: p}}}}], allocateOnce: 2}}",
                 ["spec.allocateOnce: expected true or false"], id="allocate-once"),
    pytest.param(f"{{template: {{spec: {{{C}}}}}, owners: [{{object: {{uid: p}}}}], nodeName: N_1}}",
                 ["spec.nodeName: not a valid node name"], id="node-name"),
    pytest.param("{owners: [{object: {uid: p}}]}", ["spec.template: required"], id="no-template"),
])
def test_reservation_errors(spec: str, errors: list[str]) -> None:
    _check(RS + f"spec: {spec}", errors)


# ---------------------------------------------------------------------------------------------- whole files

def test_mixed_file_ordered_for_publishing(tmp_path: Path) -> None:
    text = "\n---\n".join([
        f"kind: Job\nmetadata: {{name: train}}\nspec: {{parallelism: 2, template: {{metadata: "
        f"{{labels: {{{POD_GROUP_LABEL}: pg}}}}, spec: {{{C}}}}}}}",
        f"kind: Pod\nmetadata: {{name: solo}}\nspec: {{{C}}}",
        "kind: PodGroup\nmetadata: {name: pg}\nspec: {minMember: 2}",
        "kind: ElasticQuota\nmetadata: {name: q}\nspec: {max: {cpu: 4}}",
        RS + f"spec: {{template: {{spec: {{{C}}}}}, owners: [{{object: {{uid: p}}}}]}}",
    ])
    path = tmp_path / "all.yaml"
    path.write_text(text)
    m = load_manifest(path)
    assert [type(o).__name__ for o in m.ordered()] == ["ElasticQuota", "PodGroupSpec", "ReservationSpec",
                                                       "WorkloadSpec", "PodSpec"]


def test_every_problem_of_every_document_and_nothing_returned() -> None:
    text = "\n---\n".join([
        f"kind: Pod\nmetadata: {{name: ok}}\nspec: {{{C}}}",
        "kind: Job\nmetadata: {name: j}\nspec: {parallelism: 0, template: {spec: {containers: "
        "[{resources: {requests: {cpu: 1x}}}]}}}",
        "kind: PodGroup\nmetadata: {name: g}\nspec: {minMember: -1}",
        "kind: CronJob\nmetadata: {name: c}",
    ])
    assert [e.split(":")[0] for e in _errors(text)] == [
        "[1].spec.parallelism", "[1].spec.template.spec.containers[0].resources.requests.cpu",
        "[2].spec.minMember", "[3].kind"]


@pytest.mark.parametrize(("text", "errors"), [
    pytest.param(f"kind: Job\nmetadata: {{name: a}}\nspec: {{completions: 2, {TEMPLATE}}}\n---\n"
                 f"kind: Pod\nmetadata: {{name: a-1}}\nspec: {{{C}}}", ["[1].metadata: duplicate pod 'default-a-1'"],
                 id="pod-collides-with-a-job-pod"),
    pytest.param(f"kind: Job\nmetadata: {{name: a}}\nspec: {{completions: 3, {TEMPLATE}}}\n---\n"
                 f"kind: StatefulSet\nmetadata: {{name: a}}\nspec: {{replicas: 3, {TEMPLATE}}}",
                 ["[1].metadata: duplicate workload 'default-a'"], id="duplicate-workload-once-not-per-pod"),
    pytest.param("kind: PodGroup\nmetadata: {name: g}\n---\nkind: PodGroup\nmetadata: {name: g}\n",
                 ["[1].metadata: duplicate PodGroup 'default/g'"], id="duplicate-pod-group"),
])
def test_duplicates(text: str, errors: list[str]) -> None:
    _check(text, errors)


@pytest.mark.parametrize("path", sorted(str(p) for p in (Path(__file__).parents[2] / "examples").glob("*.yaml")))
def test_examples_parse(path: str) -> None:
    m = load_manifest(Path(path))
    assert m.ordered()
