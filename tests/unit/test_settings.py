"""Settings from environment and YAML (colo.settings): typed, nested, every error listed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from colo.settings import RuntimeSettings, SettingsError, load_runtime_settings, load_settings

Percent = Annotated[int, msgspec.Meta(ge=0, le=100)]


class LoadAware(msgspec.Struct, frozen=True, kw_only=True):
    cpu_threshold: Percent = 65
    enabled: bool = True


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    percent: Percent = 100


class Demo(msgspec.Struct, kw_only=True):
    batch_size: Annotated[int, msgspec.Meta(ge=1)] = 16
    interval_s: float = 1.0
    enabled: bool = True
    label: str = "x"
    weights: dict[str, int] = {}
    profiles: list[Profile] = []
    load_aware: LoadAware = LoadAware()
    tuned: LoadAware = LoadAware(cpu_threshold=40)
    backend: str = "sim"

    def __post_init__(self) -> None:
        if self.backend not in ("sim", "host"):
            raise ValueError(f"backend must be sim or host, got {self.backend!r}")


P = "COLO_DEMO"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, Demo(), id="defaults"),
        pytest.param({"COLO_DEMO_BATCH_SIZE": "64"}, Demo(batch_size=64), id="int"),
        pytest.param({"COLO_DEMO_INTERVAL_S": "0.5"}, Demo(interval_s=0.5), id="float"),
        pytest.param({"COLO_DEMO_ENABLED": "0"}, Demo(enabled=False), id="bool-0"),
        pytest.param({"COLO_DEMO_ENABLED": "false"}, Demo(enabled=False), id="bool-false"),
        pytest.param({"COLO_DEMO_ENABLED": "1"}, Demo(enabled=True), id="bool-1"),
        pytest.param({"COLO_DEMO_LABEL": "123"}, Demo(label="123"), id="numeric-string-stays-string"),
        pytest.param({"COLO_DEMO_WEIGHTS": '{"fit": 2}'}, Demo(weights={"fit": 2}), id="dict-json"),
        pytest.param({"COLO_DEMO_PROFILES": '[{"name": "be", "percent": 50}]'},
                     Demo(profiles=[Profile(name="be", percent=50)]), id="list-of-structs-json"),
        pytest.param({"COLO_DEMO_LOAD_AWARE__CPU_THRESHOLD": "80"},
                     Demo(load_aware=LoadAware(cpu_threshold=80)), id="nested"),
        pytest.param({"COLO_DEMO_TUNED__ENABLED": "false"},
                     Demo(tuned=LoadAware(cpu_threshold=40, enabled=False)), id="nested-keeps-parent-default"),
        pytest.param({"COLO_DEMO_LOAD_AWARE": '{"enabled": false}'},
                     Demo(load_aware=LoadAware(enabled=False)), id="nested-as-json"),
        pytest.param({"COLO_NATS_URL": "nats://x", "COLO_OTHER_THING": "1"}, Demo(),
                     id="other-prefixes-ignored"),
    ],
)
def test_env_values(env: dict[str, str], expected: Demo) -> None:
    assert load_settings(Demo, P, env=env) == expected


def test_every_error_is_listed() -> None:
    env = {
        "COLO_DEMO_BATCH_SIZE": "0",                     # constraint
        "COLO_DEMO_INTERVAL_S": "soon",                  # type
        "COLO_DEMO_ENABLED": "maybe",                    # bool
        "COLO_DEMO_BATCHSIZE": "3",                      # unknown (typo)
        "COLO_DEMO_LOAD_AWARE__CPU_THRESHOLD": "150",    # nested constraint
        "COLO_DEMO_LOAD_AWARE__TYPO": "1",               # nested unknown
        "COLO_DEMO_WEIGHTS": "{not json",                # JSON
        "COLO_DEMO_LABEL__X": "1",                       # nesting under a scalar
    }
    with pytest.raises(SettingsError) as info:
        load_settings(Demo, P, env=env)
    errors = info.value.errors
    assert len(errors) == 8, errors
    text = str(info.value)
    for fragment in ("batch_size", "COLO_DEMO_INTERVAL_S", "COLO_DEMO_ENABLED", "COLO_DEMO_BATCHSIZE",
                     "load_aware.cpu_threshold", "'typo'", "COLO_DEMO_WEIGHTS", "COLO_DEMO_LABEL__X"):
        assert fragment in text, fragment
    assert text.startswith("8 invalid Demo settings")


def test_post_init_error_is_reported() -> None:
    with pytest.raises(SettingsError, match="backend must be sim or host"):
        load_settings(Demo, P, env={"COLO_DEMO_BACKEND": "cloud"})


def test_yaml_then_env_on_top(tmp_path: Path) -> None:
    cfg = tmp_path / "demo.yaml"
    cfg.write_text("batch_size: 32\nlabel: from-yaml\nload_aware:\n  cpu_threshold: 70\n"
                   "profiles:\n  - name: be\n    percent: 20\n")
    env = {"COLO_DEMO_CONFIG": str(cfg), "COLO_DEMO_LABEL": "from-env"}
    got = load_settings(Demo, P, env=env)
    assert got == Demo(batch_size=32, label="from-env", load_aware=LoadAware(cpu_threshold=70),
                       profiles=[Profile(name="be", percent=20)])


@pytest.mark.parametrize(
    ("yaml_text", "fragments"),
    [
        pytest.param("batch_size: [1]\nbogus: 1\nload_aware:\n  nope: 2\n",
                     ["batch_size", "bogus: unknown setting", "load_aware.nope: unknown setting"],
                     id="yaml-type-and-unknown-keys"),
        pytest.param("profiles:\n  - percent: 20\n  - name: ok\n  - name: x\n    percent: 101\n    extra: 1\n",
                     ["profiles[0].name: required setting missing", "profiles[2].percent",
                      "profiles[2].extra: unknown setting"], id="every-list-item-error"),
        pytest.param("- a\n- b\n", ["top level must be a mapping"], id="not-a-mapping"),
        pytest.param("a: [unclosed\n", ["invalid YAML"], id="bad-yaml"),
        pytest.param("1: x\nload_aware:\n  true: 2\n  ~: 3\n",
                     ["(top level): key 1 must be a string", "load_aware: key True must be a string",
                      "load_aware: key None must be a string"], id="non-string-keys"),
    ],
)
def test_yaml_errors(tmp_path: Path, yaml_text: str, fragments: list[str]) -> None:
    cfg = tmp_path / "demo.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(SettingsError) as info:
        load_settings(Demo, P, env={}, yaml_path=str(cfg))
    assert len(info.value.errors) == len(fragments), info.value.errors
    for fragment in fragments:
        assert fragment in str(info.value)


def test_yaml_file_not_utf8_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "demo.yaml"
    cfg.write_bytes(b"batch_size: 3\nname: \xff\xfe\n")
    with pytest.raises(SettingsError, match="not UTF-8 text"):
        load_settings(Demo, P, env={}, yaml_path=str(cfg))


def test_missing_yaml_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read settings file"):
        load_settings(Demo, P, env={"COLO_DEMO_CONFIG": str(tmp_path / "missing.yaml")})


def test_required_field_missing() -> None:
    with pytest.raises(SettingsError, match="name: required setting missing"):
        load_settings(Profile, "COLO_PROFILE", env={"COLO_PROFILE_PERCENT": "5"})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, RuntimeSettings(), id="defaults"),
        pytest.param({"COLO_NATS_URL": "nats://h:1", "COLO_REDIS_URL": "redis://h:2/0", "COLO_SIM": "1",
                      "COLO_HTTP_PORT": "8080", "COLO_SCHEDULER_X": "ignored"},
                     RuntimeSettings(nats_url="nats://h:1", redis_url="redis://h:2/0", sim=True, http_port=8080),
                     id="overrides"),
    ],
)
def test_runtime_settings(env: dict[str, str], expected: RuntimeSettings) -> None:
    assert load_runtime_settings(env) == expected


def test_runtime_settings_errors_listed() -> None:
    with pytest.raises(SettingsError) as info:
        load_runtime_settings({"COLO_SIM": "perhaps", "COLO_HTTP_PORT": "eighty"})
    assert len(info.value.errors) == 2
    assert "COLO_SIM" in str(info.value) and "COLO_HTTP_PORT" in str(info.value)


def test_runtime_defaults_match_contract() -> None:
    s = RuntimeSettings()
    assert (s.nats_url, s.redis_url, s.http_host, s.http_port, s.sim, s.store_prefix, s.log_level) == (
        "nats://127.0.0.1:4222", "redis://127.0.0.1:6379/0", "127.0.0.1", 0, False, "colo", "INFO")


def test_post_init_problems_are_listed_with_type_errors() -> None:
    """A type error in one field no longer hides the ``__post_init__`` checks of the others: the struct
    is checked with the fields that converted (defaults for the rest)."""
    env = {"COLO_DEMO_INTERVAL_S": "soon", "COLO_DEMO_BACKEND": "cloud",
           "COLO_DEMO_LOAD_AWARE__CPU_THRESHOLD": "x"}
    with pytest.raises(SettingsError) as info:
        load_settings(Demo, P, env=env)
    text = str(info.value)
    assert len(info.value.errors) == 3, info.value.errors
    for fragment in ("COLO_DEMO_INTERVAL_S", "load_aware.cpu_threshold", "backend must be sim or host"):
        assert fragment in text, fragment
