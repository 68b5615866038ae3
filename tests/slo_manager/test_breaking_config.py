"""The slo-manager's hot-reloaded configuration under what operators do to it: odd YAML, a file that is not
UTF-8, NaN durations, YAML alias bombs, a large value, the bucket deleted and recreated, nats-server restarted
(real NATS via the fixtures or an own server; no mocks)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from colo import subjects
from colo.bus import Bus
from colo.clock import VirtualClock
from colo.embedded import start_nats
from colo.messages import ConfigRejected, PodSpec, Resources
from colo.settings import SettingsError
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_slo_manager import reload
from colo_slo_manager.admission import basic_problems
from colo_slo_manager.config import Composed, compose, load_base
from colo_slo_manager.reload import ConfigWatcher
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

KEY = "slo-manager"


def _policy(threshold: int) -> bytes:
    return f"node_slo: {{cpu_suppress: {{threshold_percent: {threshold}}}}}\n".encode()


def _alias_bomb(levels: int) -> str:
    """``levels`` nested YAML aliases, ten references each: a few hundred bytes standing for 10**(levels+1) values."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(levels):
        prev, name = chr(97 + i), chr(98 + i)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    return "\n".join(lines) + f"\nprofiles: *{chr(97 + levels)}\n"


# ---------------------------------------------------------------------- pure: what the layers may hold

@pytest.mark.parametrize("text, fragment", [
    pytest.param(b"1: 2\n", "(top level): key 1 must be a string", id="int-key"),
    pytest.param(b"true: 1\n", "(top level): key True must be a string", id="bool-key"),
    pytest.param(b"~: 1\n", "(top level): key None must be a string", id="null-key"),
    pytest.param(b"batch: {1: maxUsageRequest}\n", "batch: key 1 must be a string", id="nested-int-key"),
    pytest.param(b"node_pools: [{name: a, node_selector: {pool: a}, 5: 1}]\n", "node_pools[0]: key 5 must be",
                 id="pool-int-key"),
    pytest.param(b"max_publish_age_s: .nan\n", "max_publish_age_s must be a finite number > 0", id="nan-age"),
    pytest.param(b"metric_stale_reset_s: .nan\n", "metric_stale_reset_s must be a finite number > 0",
                 id="nan-stale-reset"),
    pytest.param(b"metric_stale_reset_s: .inf\n", "metric_stale_reset_s must be a finite number > 0",
                 id="inf-stale-reset"),
    pytest.param(b"tick_interval_s: .nan\n", "tick_interval_s must be a finite number > 0", id="nan-tick"),
    pytest.param(b"config_reload: {file_poll_s: .nan}\n", "file_poll_s must be a finite number >= 0",
                 id="nan-poll"),
    pytest.param(_alias_bomb(6).encode(), "values after expanding YAML aliases", id="alias-bomb"),
    # A block scalar (`- |`) ends in a newline, which a `$`-anchored pattern lets through: the profile never matched.
    pytest.param(b"profiles: [{name: x, match_expressions: [{key: app, operator: In, values: [\"web\\n\"]}], "
                 b"qos_class: BE, priority_class: batch}]\n", "'web\\n' is not a valid label value",
                 id="label-value-newline"),
    pytest.param(b"profiles: [{name: x, match_expressions: [{key: \"app\\n\", operator: Exists}], qos_class: BE, "
                 b"priority_class: batch}]\n", "'app\\n' is not a valid label key", id="label-key-newline"),
    pytest.param(b"profiles: [{name: x, match_labels: {app: \"web\\n\"}, qos_class: BE, priority_class: batch}]\n",
                 "not a valid", id="match-labels-newline"),
    pytest.param(b"config_reload: {kv_key: \"slo-manager\\n\"}\n", "config_reload.kv_key", id="kv-key-newline"),
])
def test_kv_value_rejected_with_a_settings_error(text: bytes, fragment: str) -> None:
    base = load_base(None, {})
    with pytest.raises(SettingsError) as err:
        compose(base, text, "kv b/k", base)
    joined = "\n".join(err.value.errors)
    assert fragment in joined
    assert all(e.startswith("kv b/k: ") for e in err.value.errors)
    assert len(joined) < 2000  # the alias bomb is refused before any value is expanded into a message


@pytest.mark.parametrize("content, fragment", [
    pytest.param(b"1: x\n", "key 1 must be a string", id="int-key"),
    pytest.param(b"batch: {cpu_policy: \xff\xfe}\n", "invalid YAML/JSON", id="not-utf8"),
])
def test_file_rejected_with_a_settings_error(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "slo-manager.yaml"
    path.write_bytes(content)
    with pytest.raises(SettingsError) as err:
        load_base(str(path), {})
    assert fragment in err.value.errors[0] and err.value.errors[0].startswith(str(path))


@pytest.mark.parametrize("field", ["uid", "name", "namespace"])
def test_admission_refuses_identifiers_ending_in_a_newline(field: str) -> None:
    pod = PodSpec(**{"uid": "p1", "name": "p1", "namespace": "default", field: "p1\n"},  # type: ignore[arg-type]
                  requests=Resources(cpu=1000))
    assert any(field in p and "not a valid identifier" in p for p in basic_problems(pod))
    assert basic_problems(msgspec.structs.replace(pod, **{field: "p1"})) == []


def test_aliases_of_ordinary_size_still_work() -> None:
    base = load_base(None, {})
    text = b"x: &t {threshold_percent: 50}\n"  # an unknown key is still reported as such
    with pytest.raises(SettingsError, match="x: unknown setting"):
        compose(base, text, "kv", base)
    ok = compose(base, b"node_slo: {cpu_suppress: &t {threshold_percent: 50}}\nnode_pools: "
                       b"[{name: a, node_selector: {p: a}, cpu_suppress: *t}]\n", "kv", base)
    assert ok.settings.node_pools[0].cpu_suppress is not None


# ---------------------------------------------------------------------- watcher against real NATS

class Seen:
    """What a watcher handed over: ("applied", trigger, threshold) or ("rejected", trigger, first error)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    async def applied(self, c: Composed, trigger: str) -> None:
        self.events.append(("applied", trigger, c.settings.node_slo.cpu_suppress.threshold_percent))

    async def rejected(self, errors: list[str], trigger: str) -> None:
        self.events.append(("rejected", trigger, errors[0]))


def _watcher(bucket: str, seen: Seen, path: Path | None = None) -> ConfigWatcher:
    env = {"COLO_SLO_MANAGER_CONFIG_RELOAD__KV_BUCKET": bucket, "COLO_SLO_MANAGER_CONFIG_RELOAD__FILE_POLL_S": "0.05"}
    base = load_base(str(path) if path else None, env)
    return ConfigWatcher(base, path=str(path) if path else None, env=env, on_applied=seen.applied,
                         on_rejected=seen.rejected)


def _threshold(w: ConfigWatcher) -> int:
    return int(w.current.settings.node_slo.cpu_suppress.threshold_percent)


async def _until(cond: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.mark.integration
async def test_watch_survives_a_value_the_loader_chokes_on(bus_factory: BusFactory) -> None:
    bucket = f"cfg-{uuid.uuid4().hex[:10]}"
    admin = await bus_factory("test-admin")
    bus = await bus_factory("slo-manager")
    seen = Seen()
    w = _watcher(bucket, seen)
    await w.start(bus)
    try:
        kv = await admin.key_value(bucket)
        await kv.put(KEY, b"1: 2\n")
        await w.wait_attempts(1)
        await kv.put(KEY, _policy(44))
        await w.wait_attempts(2)
        assert [e[:2] for e in seen.events] == [("rejected", "kv"), ("applied", "kv")]
        assert _threshold(w) == 44
    finally:
        await w.stop()
        await admin.js.delete_key_value(bucket)


@pytest.mark.integration
async def test_file_not_utf8_rejected_then_fixed(bus_factory: BusFactory, tmp_path: Path) -> None:
    path = tmp_path / "slo-manager.yaml"
    path.write_bytes(_policy(50))
    seen = Seen()
    w = _watcher("", seen, path)
    await w.start(None)
    try:
        path.write_bytes(b"node_slo: {cpu_suppress: {threshold_percent: \xff}}\n")
        await w.wait_attempts(1)
        path.write_bytes(_policy(41))
        await w.wait_attempts(2)
        assert [e[:2] for e in seen.events] == [("rejected", "file"), ("applied", "file")]
        assert _threshold(w) == 41
    finally:
        await w.stop()


@pytest.mark.integration
async def test_large_value_composed_off_the_event_loop(bus_factory: BusFactory) -> None:
    """A value of 600 profiles takes about a second to parse and validate; the loop keeps running meanwhile."""
    bucket = f"cfg-{uuid.uuid4().hex[:10]}"
    admin = await bus_factory("test-admin")
    bus = await bus_factory("slo-manager")
    seen = Seen()
    w = _watcher(bucket, seen)
    await w.start(bus)
    beats = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal beats
        while not stop.is_set():
            beats += 1
            await asyncio.sleep(0.01)

    profiles = "".join(f"  - {{name: p{i}, match_expressions: [{{key: app, operator: In, values: [a{i}]}}], "
                       "qos_class: BE, priority_class: batch}\n" for i in range(600))
    try:
        kv = await admin.key_value(bucket)
        task = asyncio.create_task(heartbeat())
        await kv.put(KEY, f"profiles:\n{profiles}".encode())
        await _until(lambda: w._lock.locked() or w.attempts > 0, "the attempt to begin")
        before = beats
        await w.wait_attempts(1)
        during = beats - before
        stop.set()
        await task
        assert seen.events and seen.events[0][0] == "applied"
        assert len(w.current.settings.profiles) == 600
        assert during >= 5, f"the event loop ran {during} times while the value was composed"
    finally:
        await w.stop()
        await admin.js.delete_key_value(bucket)


@pytest.mark.integration
async def test_bucket_deleted_and_recreated_watch_resumes(bus_factory: BusFactory,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reload, "KV_RESYNC_S", 0.5)
    bucket = f"cfg-{uuid.uuid4().hex[:10]}"
    admin = await bus_factory("test-admin")
    bus = await bus_factory("slo-manager")
    seen = Seen()
    w = _watcher(bucket, seen)
    await w.start(bus)
    try:
        kv = await admin.key_value(bucket)
        await kv.put(KEY, _policy(44))
        await _until(lambda: _threshold(w) == 44, "the first value")
        await admin.js.delete_key_value(bucket)
        await _until(lambda: _threshold(w) == SloManagerSettings().node_slo.cpu_suppress.threshold_percent,
                     "the fall back to the base once the bucket is gone")
        kv = await admin.key_value(bucket)
        await kv.put(KEY, _policy(33))
        await _until(lambda: _threshold(w) == 33, "a value put in the recreated bucket")
    finally:
        await w.stop()
        await admin.js.delete_key_value(bucket)


@pytest.mark.integration
async def test_nats_restart_watch_resumes_and_keeps_the_last_good(tmp_path: Path) -> None:
    store_dir = str(tmp_path / "js")
    server = start_nats(store_dir=store_dir)
    port = int(server.url.rsplit(":", 1)[1])
    bus = await Bus.connect(server.url, "slo-manager")
    admin = await Bus.connect(server.url, "test-admin")
    seen = Seen()
    w = _watcher("cfg", seen)
    try:
        await w.start(bus)
        kv = await admin.key_value("cfg")
        await kv.put(KEY, _policy(44))
        await _until(lambda: _threshold(w) == 44, "the first value")
        server.stop()
        await asyncio.sleep(0.5)
        assert _threshold(w) == 44  # the server gone: the last good stays
        server = start_nats(port=port, store_dir=store_dir)
        await _until(lambda: bus.nc.stats["reconnects"] >= 1 and admin.nc.stats["reconnects"] >= 1, "reconnects")
        assert _threshold(w) == 44
        kv = await admin.key_value("cfg")
        await kv.put(KEY, _policy(22))
        await _until(lambda: _threshold(w) == 22, "a value put after the restart")
        assert [e[0] for e in seen.events] == ["applied", "applied"]
    finally:
        await w.stop()
        await admin.close()
        await bus.close()
        server.stop()


@pytest.mark.integration
async def test_rejection_of_thousands_of_problems_still_announced(bus_factory: BusFactory, store: Store) -> None:
    """5,000 unknown keys (44 kB) are 5,000 problems, 1.1 MB as one ConfigRejected: over NATS's max payload."""
    bucket = f"cfg-{uuid.uuid4().hex[:10]}"
    env = {"COLO_SLO_MANAGER_CONFIG_RELOAD__KV_BUCKET": bucket}
    admin = await bus_factory("test-admin")
    bus = await bus_factory("slo-manager")
    client = await bus_factory("test-client")
    rejected: list[ConfigRejected] = []

    async def collect(msg: ConfigRejected) -> None:
        rejected.append(msg)

    await client.subscribe(subjects.CONFIG_REJECTED, collect, durable="rejected")
    service = SloManagerService(load_base(None, env), env=env)
    await service.start(service_context(bus, store, VirtualClock(1000.0)))
    try:
        kv = await admin.key_value(bucket)
        await kv.put(KEY, "".join(f"k{i}: 1\n" for i in range(5000)).encode())
        assert service.config is not None
        await service.config.wait_attempts(1)
        await _until(lambda: len(rejected) == 1, "the rejection announced")
        errors = rejected[0].errors
        assert len(errors) == 101 and "k0: unknown setting" in errors[0]
        assert errors[-1].startswith("… and 4900 more problems")
        assert service.config_rejected == 1
    finally:
        await service.stop()
        await admin.js.delete_key_value(bucket)


@pytest.mark.integration
async def test_sources_name_the_layers_in_force_not_the_rejected_ones(bus_factory: BusFactory,
                                                                      tmp_path: Path) -> None:
    bucket = f"cfg-{uuid.uuid4().hex[:10]}"
    path = tmp_path / "slo-manager.yaml"
    path.write_bytes(_policy(50))
    admin = await bus_factory("test-admin")
    bus = await bus_factory("slo-manager")
    seen = Seen()
    w = _watcher(bucket, seen, path)
    await w.start(bus)
    try:
        kv = await admin.key_value(bucket)
        revision = await kv.put(KEY, _policy(44))
        await w.wait_attempts(1)
        good = dict(w.sources)
        assert good["kv"].endswith(f"revision {revision}")
        await kv.put(KEY, b"batch: {cpu_policy: sometimes}\n")
        await w.wait_attempts(2)
        path.write_bytes(b"mid: {mode: sometimes}\n")
        await w.wait_attempts(3)
        assert [e[:2] for e in seen.events] == [("applied", "kv"), ("rejected", "kv"), ("rejected", "file")]
        assert w.sources == good and _threshold(w) == 44  # before: the rejected revision and file hash
    finally:
        await w.stop()
        await admin.js.delete_key_value(bucket)
