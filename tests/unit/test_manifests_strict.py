"""Issue 14, observation 2 (and 1): pod files are checked strictly and by admission's own checks. Unknown fields are
errors with their path and the nearest known name, in every kind; fractional batch amounts and limits below
requests are errors; every problem of a file is listed at once; a pod ``--dry-run`` accepts is one admission
admits, and what admission refuses the dry run refuses with the same words (one implementation,
:mod:`colo.validation`)."""

from __future__ import annotations

import msgspec
import pytest

from colo.manifests import ManifestError, parse_manifest
from colo.messages import PodSpec, Resources
from colo.validation import pod_problems
from colo_slo_manager.admission import admit
from colo_slo_manager.settings import SloManagerSettings

POD = """
metadata: {name: web, namespace: shop}
spec:
  containers:
  - resources: {requests: {cpu: 500m, memory: 1Gi}}
"""


def errors(text: str) -> list[str]:
    with pytest.raises(ManifestError) as exc:
        parse_manifest(text)
    return exc.value.errors


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("metadata: {name: web}\nspec:\n  containers:\n  - resoures: {requests: {cpu: '1'}}\n",
                 "spec.containers[0].resoures: unknown field (did you mean 'resources'?)", id="resoures"),
    pytest.param("metadata: {name: web}\nspec:\n  nodeSelectr: {disk: ssd}\n  containers: [{}]\n",
                 "spec.nodeSelectr: unknown field (did you mean 'nodeSelector'?)", id="nodeSelectr"),
    pytest.param("metadata: {name: web, lables: {a: b}}\nspec: {containers: [{}]}\n",
                 "metadata.lables: unknown field (did you mean 'labels'?)", id="metadata-lables"),
    pytest.param("metdata: {name: web}\nspec: {containers: [{}]}\n",
                 "metdata: unknown field (did you mean 'metadata'?)", id="top-level"),
    pytest.param("metadata: {name: web}\nspec:\n  containers: [{resources: {requets: {cpu: '1'}}}]\n",
                 "spec.containers[0].resources.requets: unknown field (did you mean 'requests'?)", id="requets"),
    pytest.param("metadata: {name: web}\nspec:\n  containers: [{resources: {requests: {cpus: '1'}}}]\n",
                 "spec.containers[0].resources.requests.cpus: unknown resource 'cpus' (did you mean 'cpu'?)",
                 id="resource-name"),
    pytest.param("metadata: {name: web}\nspec:\n  containers: [{}]\n  tolerations: [{key: a, efect: NoSchedule}]\n",
                 "spec.tolerations[0].efect: unknown field (did you mean 'effect'?)", id="toleration"),
    pytest.param("kind: Deployment\nmetadata: {name: web}\nspec:\n  replica: 3\n  template: {spec: {containers: [{}]}}\n",
                 "spec.replica: unknown field (did you mean 'replicas'?)", id="deployment"),
    pytest.param("kind: Job\nmetadata: {name: j}\nspec:\n  paralelism: 3\n  template: {spec: {containers: [{}]}}\n",
                 "spec.paralelism: unknown field (did you mean 'parallelism'?)", id="job"),
    pytest.param("kind: Job\nmetadata: {name: j}\nspec:\n  template: {spec: {containrs: [{}]}}\n",
                 "spec.template.spec.containrs: unknown field (did you mean 'containers'?)", id="template"),
    pytest.param("kind: PodGroup\nmetadata: {name: g}\nspec: {minMembers: 2}\n",
                 "spec.minMembers: unknown field (did you mean 'minMember'?)", id="podgroup"),
    pytest.param("kind: ElasticQuota\nmetadata: {name: q}\nspec: {maxx: {cpu: '1'}}\n",
                 "spec.maxx: unknown field (did you mean 'max'?)", id="quota"),
    pytest.param("kind: Reservation\nmetadata: {name: r}\nspec:\n  tll: 10m\n  owners: [{object: {uid: x}}]\n"
                 "  template: {spec: {containers: [{}]}}\n",
                 "spec.tll: unknown field (did you mean 'ttl'?)", id="reservation"),
    pytest.param("metadata: {name: web, annotations: {colo.io/sim-durration: 1m}}\nspec: {containers: [{}]}\n",
                 "metadata.annotations.colo.io/sim-durration: unknown key (did you mean "
                 "'colo.io/sim-duration'?)", id="sim-annotation"),
    pytest.param("kind: Job\nmetadata:\n  name: j\n  annotations: {gang.scheduling.koordinator.sh/min-availabel: '2'}\n"
                 "spec: {parallelism: 2, template: {spec: {containers: [{}]}}}\n",
                 "metadata.annotations.gang.scheduling.koordinator.sh/min-availabel: unknown key (did you mean "
                 "'gang.scheduling.koordinator.sh/min-available'?)", id="gang-annotation"),
    pytest.param("kind: Job\nmetadata: {name: j}\nspec:\n  template:\n    metadata: {annotations: "
                 "{gang.scheduling.koordinator.sh/mod: Strict}}\n    spec: {containers: [{}]}\n",
                 "spec.template.metadata.annotations.gang.scheduling.koordinator.sh/mod: unknown key (did you mean "
                 "'gang.scheduling.koordinator.sh/mode'?)", id="template-gang-annotation"),
    pytest.param("kind: ElasticQuota\nmetadata:\n  name: q\n  labels: {quota.scheduling.koordinator.sh/is_parent: 'true'}\n"
                 "spec: {max: {cpu: '1'}}\n",
                 "metadata.labels.quota.scheduling.koordinator.sh/is_parent: unknown key (did you mean "
                 "'quota.scheduling.koordinator.sh/is-parent'?)", id="quota-label"),
    pytest.param("metadata: {name: b, labels: {koordinator.sh/qosClass: BE}}\nspec:\n  priorityClassName: koord-batch\n"
                 "  containers: [{resources: {requests: {kubernetes.io/batch-cpu: 500m}}}]\n",
                 "spec.containers[0].resources.requests.kubernetes.io/batch-cpu: '500m' is 0.5 milli-cores, not a "
                 "whole number; kubernetes.io/batch-cpu is integer milli-cores (Koordinator): write \"500\" for "
                 "0.5 cores", id="batch-cpu-fraction"),
    pytest.param("metadata: {name: b, labels: {koordinator.sh/qosClass: BE}}\nspec:\n  priorityClassName: koord-batch\n"
                 "  containers: [{resources: {requests: {kubernetes.io/batch-memory: '0.5'}}}]\n",
                 "spec.containers[0].resources.requests.kubernetes.io/batch-memory: '0.5' is 0.5 bytes, not a whole "
                 "number", id="batch-memory-fraction"),
    pytest.param("metadata: {name: web}\nspec:\n  containers:\n  - resources: {requests: {cpu: '2', memory: 2Gi}, "
                 "limits: {cpu: '1', memory: 2Gi}}\n",
                 "spec.containers[0].resources.limits.cpu: limit 1 is below the request 2", id="limit-below-request"),
    pytest.param("metadata: {name: web}\nspec:\n  priority: 99999999999\n  containers: [{resources: {requests: "
                 "{cpu: '1'}}}]\n",
                 "spec: priority 99999999999 is outside the int32 range", id="priority-int32"),
    pytest.param("metadata: {name: web}\nspec:\n  priorityClassName: koord-batch\n  priority: 9500\n"
                 "  containers: [{resources: {requests: {cpu: '1'}}}]\n",
                 "spec: priority 9500 is outside the batch range", id="batch-with-prod-priority"),
    pytest.param("metadata: {name: web}\nspec:\n  affinity:\n    nodeAffinity:\n"
                 "      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
                 "        - matchExpressions: [{key: zone, operator: Inn, values: [a]}]\n  containers: [{}]\n",
                 "spec: node affinity: required term 0 expression 0: unknown operator 'Inn'", id="affinity-operator"),
])
def test_strict_errors(text: str, expected: str) -> None:
    found = errors(text)
    assert any(e.startswith(expected) for e in found), found


def test_every_problem_of_a_file_at_once() -> None:
    text = """
- metadata: {name: a}
  spec:
    nodeSelectr: {disk: ssd}
    containers: [{resoures: {}}]
- metadata: {name: b}
  spec:
    priority: 99999999999
    containers: [{resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]
"""
    found = errors(text)
    assert [e.split(":")[0] for e in found] == [
        "[0].spec.nodeSelectr", "[0].spec.containers[0].resoures", "[1].spec.containers[0].resources.limits.cpu",
        "[1].spec"]


def test_small_batch_cpu_is_a_warning() -> None:
    m = parse_manifest("metadata: {name: b, labels: {koordinator.sh/qosClass: BE}}\nspec:\n"
                       "  priorityClassName: koord-batch\n"
                       "  containers: [{resources: {requests: {kubernetes.io/batch-cpu: '2'}}}]\n")
    assert m.pods[0].requests.batch_cpu == 2
    assert m.warnings == ["spec.containers[0].resources.requests.kubernetes.io/batch-cpu: '2' is 2 milli-cores "
                          "(0.002 cores); kubernetes.io/batch-cpu is integer milli-cores: 2 cores would be \"2000\""]


def test_node_affinity_is_read() -> None:
    m = parse_manifest("metadata: {name: web}\nspec:\n  affinity:\n    nodeAffinity:\n"
                       "      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
                       "        - matchExpressions: [{key: zone, operator: In, values: [a, b]}]\n"
                       "      preferredDuringSchedulingIgnoredDuringExecution:\n"
                       "      - {weight: 10, preference: {matchExpressions: [{key: disk, operator: Exists}]}}\n"
                       "  containers: [{}]\n")
    aff = m.pods[0].affinity
    assert aff is not None and aff.node_affinity is not None and aff.node_affinity.required is not None
    (term,) = aff.node_affinity.required.node_selector_terms
    assert [(e.key, e.operator, e.values) for e in term.match_expressions] == [("zone", "In", ["a", "b"])]
    assert [(p.weight, p.preference.match_expressions[0].key) for p in aff.node_affinity.preferred] == [(10, "disk")]


def test_sim_annotations_give_the_pod_its_work() -> None:
    m = parse_manifest("metadata:\n  name: spark\n  labels: {koordinator.sh/qosClass: BE}\n"
                       "  annotations: {colo.io/sim-duration: 10m, colo.io/sim-cpu: 1500m}\nspec:\n"
                       "  priorityClassName: koord-batch\n"
                       "  containers: [{resources: {requests: {kubernetes.io/batch-cpu: '2000', "
                       "kubernetes.io/batch-memory: 4Gi}}}]\n")
    sim = m.pods[0].sim
    assert sim is not None and (sim.kind, sim.duration_s, sim.cpu_milli, sim.memory_bytes) == (
        "batch", 600.0, 1500, 4 * 2**30)
    assert "required with the other" in errors(POD.replace("shop}", "shop, annotations: {colo.io/sim-cpu: '1'}}"))[0]


ADMISSION_CASES = [
    pytest.param(PodSpec(uid="shop-web", name="web", namespace="shop", priority=99999999999,
                         requests=Resources(cpu=1000)), id="int32"),
    pytest.param(PodSpec(uid="shop-web", name="web", namespace="shop", priority_class="batch", priority=9500,
                         requests=Resources(cpu=1000)), id="batch-9500"),
    pytest.param(PodSpec(uid="shop-web", name="web", namespace="shop", qos_class="LSR", priority_class="prod",
                         requests=Resources(cpu=1500), limits=Resources(cpu=1500)), id="lsr-fraction"),
    pytest.param(PodSpec(uid="shop-web", name="web", namespace="shop", labels={"koordinator.sh/qosClass": "LS"},
                         requests=Resources(batch_cpu=1000)), id="batch-not-be"),
    pytest.param(PodSpec(uid="shop-web", name="web", namespace="shop", requests=Resources(cpu=2000),
                         limits=Resources(cpu=1000)), id="request-over-limit"),
    pytest.param(PodSpec(uid="shop-web", name="web", namespace="shop", priority=5500,
                         requests=Resources(cpu=1000)), id="valid"),
]


@pytest.mark.parametrize("pod", ADMISSION_CASES)
def test_dry_run_and_admission_agree(pod: PodSpec) -> None:
    """Without a colocation profile (colocation off), admission refuses exactly what the shared checks find."""
    settings = msgspec.structs.replace(SloManagerSettings(), colocation_enabled=False)
    result = admit(pod, settings, 0.0)
    problems = pod_problems(pod)
    if problems:
        assert getattr(result, "reason", None) == "; ".join(problems)
    else:
        assert not hasattr(result, "reason")
