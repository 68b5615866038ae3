"""Admission: colocation profiles, translation and class validation (REFERENCE.md §1)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from colo.messages import PodAdmitted, PodRejected, PodSpec, Resources
from colo_slo_manager.admission import admit, probability_bucket
from colo_slo_manager.settings import ColocationProfile, SloManagerSettings

GI = 2**30

SPARK = ColocationProfile(name="spark", namespaces=["analytics"], match_labels={"app": "spark"},
                          qos_class="BE", priority_class="batch", scheduler_name="colo-batch",
                          labels={"colo.io/profile": "spark"}, annotations={"owner": "data"})
MID = ColocationProfile(name="mid", match_labels={"tier": "mid"}, qos_class="LS", priority_class="mid")
KEEP = ColocationProfile(name="keep", match_labels={"app": "keep"}, qos_class="BE", priority_class="batch",
                         translate_resources=False)


def settings(*profiles: ColocationProfile, enabled: bool = True) -> SloManagerSettings:
    return SloManagerSettings(profiles=list(profiles), colocation_enabled=enabled)


def spec(uid: str = "p1", namespace: str = "analytics", labels: dict[str, str] | None = None,
         requests: Resources = Resources(), limits: Resources = Resources(), name: str | None = None,
         **kw: object) -> PodSpec:
    return PodSpec(uid=uid, name=f"pod-{uid}" if name is None else name, namespace=namespace, labels=labels or {},
                   requests=requests, limits=limits, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pod", "cfg", "profile", "want_requests", "want_limits", "want_qos", "want_prio", "want_priority"),
    [
        pytest.param(spec(labels={"app": "spark"}, requests=Resources(cpu=2000, memory=4 * GI),
                          limits=Resources(cpu=4000, memory=4 * GI)),
                     settings(SPARK), "spark",
                     Resources(batch_cpu=2000, batch_memory=4 * GI), Resources(batch_cpu=4000, batch_memory=4 * GI),
                     "BE", "batch", 5500, id="batch-profile-translates"),
        pytest.param(spec(labels={"app": "spark"}, limits=Resources(cpu=3000, memory=GI)),
                     settings(SPARK), "spark",
                     Resources(batch_cpu=3000, batch_memory=GI), Resources(batch_cpu=3000, batch_memory=GI),
                     "BE", "batch", 5500, id="limit-only-copied-to-request"),
        pytest.param(spec(labels={"tier": "mid"}, requests=Resources(cpu=1000, memory=GI)),
                     settings(SPARK, MID), "mid",
                     Resources(mid_cpu=1000, mid_memory=GI), Resources(), "LS", "mid", 7500,
                     id="mid-profile-translates-to-mid"),
        pytest.param(spec(labels={"app": "keep"}, requests=Resources(cpu=1000)),
                     settings(KEEP), "keep", Resources(cpu=1000), Resources(), "BE", "batch", 5500,
                     id="no-translation-when-disabled-in-profile"),
        pytest.param(spec(namespace="web", labels={"app": "spark"}, requests=Resources(cpu=1000)),
                     settings(SPARK), "", Resources(cpu=1000), Resources(), None, None, None,
                     id="namespace-mismatch-no-profile"),
        pytest.param(spec(labels={"app": "flink"}, requests=Resources(cpu=1000)),
                     settings(SPARK), "", Resources(cpu=1000), Resources(), None, None, None,
                     id="label-mismatch-no-profile"),
        pytest.param(spec(labels={"app": "spark"}, requests=Resources(cpu=1000)),
                     settings(SPARK, enabled=False), "", Resources(cpu=1000), Resources(), None, None, None,
                     id="colocation-disabled-only-validates"),
        pytest.param(spec(qos_class="BE", priority=5500, requests=Resources(cpu=500, memory=GI)),
                     SloManagerSettings(), "batch", Resources(batch_cpu=500, batch_memory=GI), Resources(),
                     "BE", "batch", 5500, id="default-profile-batch-be-pod"),
        pytest.param(spec(priority=9500, requests=Resources(cpu=500, memory=GI)),
                     SloManagerSettings(), "", Resources(cpu=500, memory=GI), Resources(), None, None, 9500,
                     id="default-profile-leaves-prod-pod"),
    ],
)
def test_admission_profiles(pod: PodSpec, cfg: SloManagerSettings, profile: str, want_requests: Resources,
                            want_limits: Resources, want_qos: str | None, want_prio: str | None,
                            want_priority: int | None) -> None:
    result = admit(pod, cfg, now=42.0)
    assert isinstance(result, PodAdmitted), result
    assert result.at == 42.0
    assert result.profile == profile
    assert result.spec.requests == want_requests
    assert result.spec.limits == want_limits
    assert result.spec.qos_class == want_qos
    assert result.spec.priority_class == want_prio
    assert result.spec.priority == want_priority


def test_profile_sets_labels_annotations_scheduler() -> None:
    result = admit(spec(labels={"app": "spark"}, annotations={"a": "1"}), settings(SPARK), now=0.0)
    assert isinstance(result, PodAdmitted)
    assert result.spec.scheduler_name == "colo-batch"
    assert result.spec.labels["colo.io/profile"] == "spark"
    assert result.spec.labels["app"] == "spark"
    assert result.spec.labels["koordinator.sh/qosClass"] == "BE"
    assert result.spec.annotations == {"a": "1", "owner": "data"}


def test_first_matching_profile_wins() -> None:
    broad = ColocationProfile(name="broad", qos_class="BE", priority_class="free")
    result = admit(spec(labels={"app": "spark"}), settings(SPARK, broad), now=0.0)
    assert isinstance(result, PodAdmitted) and result.profile == "spark"
    result = admit(spec(labels={"app": "other"}), settings(SPARK, broad), now=0.0)
    assert isinstance(result, PodAdmitted) and result.profile == "broad"
    assert result.spec.priority == 3500


@pytest.mark.parametrize("percent", [pytest.param(0, id="0"), pytest.param(30, id="30"),
                                     pytest.param(100, id="100")])
def test_probability_is_stable_and_proportional(percent: int) -> None:
    prof = ColocationProfile(name="half", probability_percent=percent, qos_class="BE", priority_class="batch")
    pods = [spec(uid=f"u{i}") for i in range(2000)]
    first = [admit(p, settings(prof), now=0.0) for p in pods]
    again = [admit(p, settings(prof), now=0.0) for p in pods]
    assert [r.profile for r in first] == [r.profile for r in again]  # type: ignore[union-attr]
    share = sum(1 for r in first if isinstance(r, PodAdmitted) and r.profile == "half") / len(pods)
    assert abs(share - percent / 100) < 0.04


def test_probability_bucket_independent_of_hash_seed() -> None:
    code = ("from colo_slo_manager.admission import probability_bucket as b;"
            "print([b('p', f'u{i}') for i in range(20)])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert outs == {str([probability_bucket("p", f"u{i}") for i in range(20)]) + "\n"}


@pytest.mark.parametrize(
    ("pod", "cfg", "fragments"),
    [
        pytest.param(spec(uid=""), settings(), ["uid must not be empty"], id="no-uid"),
        pytest.param(spec(name=""), settings(), ["name must not be empty"], id="no-name"),
        pytest.param(spec(uid="a b\n"), settings(), ["uid 'a b\\n' is not a valid identifier"], id="bad-uid"),
        pytest.param(spec(requests=Resources(cpu=-1)), settings(), ["request cpu must not be negative"],
                     id="negative-request"),
        pytest.param(spec(requests=Resources(cpu=3000), limits=Resources(cpu=2000)), settings(),
                     ["request cpu 3000 exceeds limit 2000"], id="request-above-limit"),
        pytest.param(spec(qos_class="BE", priority_class="prod"), settings(),
                     ["QoS class BE cannot have priority class prod"], id="be-prod"),
        pytest.param(spec(qos_class="LSR", priority_class="batch", requests=Resources(cpu=1500)), settings(),
                     ["QoS class LSR requires priority class prod, got batch",
                      "whole, non-zero number of cores, got 1500m"], id="lsr-batch-fractional-lists-both"),
        pytest.param(spec(qos_class="LS", requests=Resources(batch_cpu=1000)), settings(),
                     ["pods requesting batch-* resources must be BE"], id="batch-resources-not-be"),
        pytest.param(spec(priority_class="batch", priority=9500), settings(),
                     ["priority 9500 is outside the batch range"], id="priority-outside-class"),
        pytest.param(spec(labels={"app": "spark"}, qos_class="LSE", requests=Resources(cpu=2000)),
                     settings(ColocationProfile(name="bad", match_labels={"app": "spark"}, qos_class="LSE",
                                                priority_class="batch")),
                     ["profile bad:", "QoS class LSE requires priority class prod",
                      "whole, non-zero number of cores, got 0m"], id="profile-produces-invalid-combo"),
    ],
)
def test_admission_rejects_with_every_reason(pod: PodSpec, cfg: SloManagerSettings,
                                             fragments: list[str]) -> None:
    result = admit(pod, cfg, now=7.0)
    assert isinstance(result, PodRejected), result
    assert result.uid == pod.uid and result.at == 7.0
    for fragment in fragments:
        assert fragment in result.reason
