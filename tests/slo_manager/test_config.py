"""Composing the configuration from base (file + env) and key-value layers, without NATS (colo_slo_manager.config)."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo.settings import SettingsError
from colo_slo_manager.config import NOT_RELOADABLE, compose, load_base, overlay, parse_overlay, version_of
from colo_slo_manager.settings import BatchConfig, ColocationProfile, SloManagerSettings

KV = "kv colo-config/slo-manager"


def test_kv_layer_merges_field_by_field_over_the_base() -> None:
    base = SloManagerSettings(batch=BatchConfig(cpu_reclaim_threshold_percent=70), diff_threshold_percent=5)
    got = compose(base, b"batch: {cpu_policy: maxUsageRequest}\nnode_slo: {cpu_suppress: {threshold_percent: 50}}",
                  KV, base)
    s = got.settings
    assert (s.batch.cpu_policy, s.batch.cpu_reclaim_threshold_percent) == ("maxUsageRequest", 70)
    assert (s.node_slo.cpu_suppress.threshold_percent, s.node_slo.cpu_suppress.policy) == (50, "cpuset")
    assert s.diff_threshold_percent == 5 and got.restart_required == ()
    assert got.version == version_of(s) != version_of(base)


def test_kv_json_is_accepted_and_lists_replace_whole() -> None:
    base = SloManagerSettings(profiles=[ColocationProfile(name="a"), ColocationProfile(name="b")])
    got = compose(base, b'{"profiles": [{"name": "spark", "match_labels": {"app": "spark"}}]}', KV, base)
    assert [p.name for p in got.settings.profiles] == ["spark"]


@pytest.mark.parametrize("text", [None, b"", b"# nothing set\n"], ids=["no-key", "empty", "comment-only"])
def test_no_kv_value_is_the_base(text: bytes | None) -> None:
    base = SloManagerSettings(colocation_enabled=False)
    got = compose(base, text, KV, base)
    assert got.settings == base and got.version == version_of(base)


def test_every_problem_of_the_kv_layer_is_listed() -> None:
    base = SloManagerSettings()
    text = b"""
bogus: 1
batch: {cpu_policy: request, cpu_reclaim_threshold_percent: 150}
mid: {mode: sometimes}
node_pools:
  - {name: gpu, cpu_suppress: {threshold: 3}}
profiles:
  - {name: a, probability_percent: 101, match_expressions: [{key: app, operator: In}]}
"""
    with pytest.raises(SettingsError) as err:
        compose(base, text, KV, base)
    errors = err.value.errors
    joined = "\n".join(errors)
    for fragment in ("bogus", "cpu_policy", "cpu_reclaim_threshold_percent", "mid.mode", "cpu_suppress.threshold",
                     "probability_percent", "needs at least one value"):
        assert fragment in joined, fragment
    assert all(e.startswith(KV + ": ") for e in errors)
    assert len(errors) >= 7


@pytest.mark.parametrize(("text", "fragment"), [
    (b"batch: [unclosed", "invalid YAML/JSON"),
    (b"- a\n- b\n", "top level must be a mapping, got list"),
], ids=["not-yaml", "not-a-mapping"])
def test_unreadable_kv_value(text: bytes, fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        parse_overlay(text, KV)


def test_not_reloadable_fields_keep_their_running_values() -> None:
    running = SloManagerSettings(tick_interval_s=60.0)
    got = compose(running, b"tick_interval_s: 5\nconfig_reload: {file_poll_s: 1}\ndiff_threshold_percent: 20",
                  KV, running)
    assert got.restart_required == NOT_RELOADABLE
    assert got.settings.tick_interval_s == 60.0 and got.settings.config_reload == running.config_reload
    assert got.settings.diff_threshold_percent == 20


def test_version_ignores_key_order_and_follows_content() -> None:
    a = overlay(SloManagerSettings(), parse_overlay(b"profiles: [{name: x, labels: {a: '1', b: '2'}}]", KV), KV)
    b = overlay(SloManagerSettings(), parse_overlay(b"profiles: [{name: x, labels: {b: '2', a: '1'}}]", KV), KV)
    c = overlay(SloManagerSettings(), parse_overlay(b"profiles: [{name: x, labels: {a: '1', b: '3'}}]", KV), KV)
    assert version_of(a) == version_of(b) != version_of(c)


def test_base_is_file_then_environment(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text("batch: {cpu_reclaim_threshold_percent: 50, memory_policy: request}\n")
    env = {"COLO_SLO_MANAGER_BATCH__CPU_RECLAIM_THRESHOLD_PERCENT": "55",
           "COLO_SLO_MANAGER_CONFIG": "/elsewhere.yaml"}  # the path argument wins
    base = load_base(str(path), env)
    assert (base.batch.cpu_reclaim_threshold_percent, base.batch.memory_policy) == (55, "request")


def test_base_problems_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text("batch: {cpu_policy: nope}\ndiff_threshold_percent: -1\n")
    with pytest.raises(SettingsError) as err:
        load_base(str(path), {})
    assert len(err.value.errors) == 2 and all(e.startswith(str(path)) for e in err.value.errors)
    with pytest.raises(SettingsError, match="cannot read settings file"):
        load_base(str(tmp_path / "missing.yaml"), {})
