"""Checkpoint of the profile model: model → bytes → model gives identical predictions and goes on identically;
anything unusable is refused with CheckpointError (the service then starts empty)."""

from __future__ import annotations

import zlib

import msgspec
import numpy as np
import pytest
from profiler_helpers import DAY, GI, busy_series, feed

from colo.messages import Usage
from colo_profiler import checkpoint
from colo_profiler.checkpoint import CheckpointError
from colo_profiler.model import ProfileModel
from colo_profiler.settings import ProfilerSettings

SETTINGS = {
    "default": ProfilerSettings(),
    # half-lives short enough that three days of samples re-base the reference time
    "rebased": ProfilerSettings(cpu_half_life_s=1800.0, memory_half_life_s=2400.0, cold_start_s=DAY / 2,
                                expiry_s=3 * DAY),
}


def rich_model(settings: ProfilerSettings) -> ProfileModel:
    """Four reporting nodes, a registered silent one, pods of workloads in two namespaces, cold and warm pods,
    a pod waiting for its node's first report, an ended pod and an expired workload."""
    m = ProfileModel(settings)
    for i in range(5):
        m.node_registered(f"n{i}", Usage(cpu=32000 + i, memory=64 * GI))
    for i in range(4):
        for j in range(6):
            app = f"app{j % 3}" if j < 5 else ""
            m.pod_bound(f"n{i}-p{j}", f"n{i}", 1000 * (j + 1), (j + 1) * GI, "prod" if j % 2 == 0 else "batch",
                        at=-DAY if j < 4 else 2.8 * DAY, workload=(f"ns{j % 2}", app) if app else None)
    m.pod_bound("waiting", "n4", 2000, GI, "prod", at=3 * DAY - 60, workload=("ns0", "app0"))
    m.pod_bound("gone-soon", "n0", 500, GI, "prod", at=0.0, workload=("ns1", "old"))
    feed(m, "n0", 0.0, 3, (100, GI), {"gone-soon": (300, GI)})
    for nm in busy_series(seed=3, nodes=4, pods_per_node=6, rounds=3 * 48, start=0.0, step=1800.0):
        m.ingest(nm)
    m.pod_ended("n1-p0")
    m.expire(3 * DAY - 600)  # "gone-soon" and workload ns1/old expire unless expiry_s is long
    return m


def assert_same_predictions(a: ProfileModel, b: ProfileModel, now: float) -> None:
    names = sorted(a.nodes)
    assert names == sorted(b.nodes)
    assert a.profiles(names, now) == b.profiles(names, now)
    assert a.workload_profiles(now) == b.workload_profiles(now)
    assert (a.samples, a.workload_samples) == (b.samples, b.workload_samples)


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
def test_round_trip_gives_identical_predictions_and_continues_identically(settings: ProfilerSettings) -> None:
    a = rich_model(settings)
    blob = checkpoint.dump(a, at=3 * DAY)
    b = checkpoint.load(blob, settings)
    for bank_a, bank_b in ((a.cpu, b.cpu), (a.memory, b.memory)):
        assert bank_a.ref == bank_b.ref
        assert np.array_equal(bank_a.weights, bank_b.weights)
        assert bank_a.rows_in_use == bank_b.rows_in_use
    assert b.waiting == a.waiting == {"n4": {"waiting"}}
    assert {k: w.pods for k, w in a.workloads.items()} == {k: w.pods for k, w in b.workloads.items()}
    for now in (3 * DAY, 3.2 * DAY, 5 * DAY):  # cold pods turn warm at different times
        assert_same_predictions(a, b, now)
    profs = a.profiles(sorted(a.nodes), 3 * DAY)
    assert any(p.from_workload for prof in profs for p in prof.pods)
    assert any(prof.prod_reclaimable.cpu > 0 for prof in profs)
    # more samples, a new node (whose report lets the waiting pod in), a pod moving, an ending, expiry
    later = busy_series(seed=4, nodes=5, pods_per_node=7, rounds=20, start=3 * DAY, step=600.0)
    for m in (a, b):
        m.pod_bound("n2-p1", "n3", 2000, GI, "batch", at=3 * DAY, workload=("ns1", "app1"))
        for nm in later:
            m.ingest(nm)
        assert "waiting" in m.nodes["n4"].pods and not m.waiting
        m.pod_ended("n0-p2")
        m.expire(3 * DAY + 20 * 600.0)
    for now in (3 * DAY + 12000.0, 6 * DAY):
        assert_same_predictions(a, b, now)


def test_settings_used_only_at_query_time_may_change() -> None:
    a = rich_model(SETTINGS["default"])
    other = ProfilerSettings(cpu_percentile=0.9, margin_percent=15, cold_start_s=3600.0)
    b = checkpoint.load(checkpoint.dump(a, 0.0), other)
    a.settings = other
    assert_same_predictions(a, b, 3 * DAY)


def test_blob_is_compact() -> None:
    """Only rows in use and their non-zero buckets are stored: far below the dense banks."""
    a = rich_model(SETTINGS["default"])
    blob = checkpoint.dump(a, 0.0)
    dense = a.cpu.weights.nbytes + a.memory.weights.nbytes
    assert len(blob) < dense / 10


def _blob(**change: object) -> bytes:
    """A checkpoint of the rich model with top-level fields of the Checkpoint replaced."""
    cp = checkpoint.snapshot(rich_model(SETTINGS["default"]), 0.0)
    return checkpoint.encode(msgspec.structs.replace(cp, **change))


def _good() -> checkpoint.Checkpoint:
    return checkpoint.snapshot(rich_model(SETTINGS["default"]), 0.0)


def _dup_row() -> bytes:
    cp = _good()
    pods = list(cp.pods)
    pods[0] = msgspec.structs.replace(pods[0], row=pods[1].row)
    return checkpoint.encode(msgspec.structs.replace(cp, pods=pods))


def _orphan_weights() -> bytes:
    cp = _good()
    sampled = [p for p in cp.pods if p.row >= 0 and p.workload is None]
    return checkpoint.encode(msgspec.structs.replace(cp, pods=[p for p in cp.pods if p is not sampled[0]]))


def _row_out_of_range() -> bytes:
    cp = _good()
    return checkpoint.encode(msgspec.structs.replace(cp, cpu=msgspec.structs.replace(cp.cpu, capacity=3)))


def _bad_member() -> bytes:
    cp = _good()
    wls = list(cp.workloads)
    wls[0] = msgspec.structs.replace(wls[0], pods=[*wls[0].pods, "nobody"])
    return checkpoint.encode(msgspec.structs.replace(cp, workloads=wls))


def _nan_weight() -> bytes:
    cp = _good()
    w = np.frombuffer(cp.memory.weights, dtype="<f8").copy()
    w[0] = np.nan
    return checkpoint.encode(msgspec.structs.replace(cp, memory=msgspec.structs.replace(cp.memory,
                                                                                        weights=w.tobytes())))


def _framed(body: bytes) -> bytes:
    """``body`` with a correct magic and CRC: what is inside must still be checked."""
    return checkpoint.MAGIC + zlib.crc32(body).to_bytes(4, "big") + body


def _flipped() -> bytes:
    blob = bytearray(checkpoint.dump(rich_model(SETTINGS["default"]), 0.0))
    blob[len(blob) // 2] ^= 0xFF
    return bytes(blob)


@pytest.mark.parametrize(("make", "reason"), [
    (lambda: b"", "bad magic"),
    (lambda: b"\x00garbage" * 10, "bad magic"),
    (lambda: checkpoint.MAGIC + b"not a crc nor msgpack", "unreadable"),
    (lambda: checkpoint.dump(rich_model(SETTINGS["default"]), 0.0)[:-100], "unreadable"),
    (_flipped, "unreadable"),
    (lambda: _framed(b"\x93\x01\x02\x03"), "unreadable"),
    (lambda: _framed(bytes([0x96, checkpoint.VERSION]) + b"\xc4\x03abc\xc4\x00\xc4\x00\xc4\x00\xc4\x00"),
     "unreadable"),
    (lambda: _blob(version=checkpoint.VERSION + 1), "format"),
    (_dup_row, "already used"),
    (_orphan_weights, "rows not in use"),
    (_row_out_of_range, "capacity"),
    (_bad_member, "member 'nobody'"),
    (_nan_weight, "finite"),
], ids=["empty", "garbage", "no-crc", "truncated", "flipped-byte", "wrong-shape", "meta-not-zlib", "other-version",
        "row-used-twice", "weights-in-free-row", "row-beyond-capacity", "unknown-workload-member", "nan-weight"])
def test_unusable_checkpoint_refused(make: object, reason: str) -> None:
    with pytest.raises(CheckpointError, match=reason):
        checkpoint.load(make(), SETTINGS["default"])  # type: ignore[operator]


def test_other_half_life_refused() -> None:
    blob = checkpoint.dump(rich_model(SETTINGS["default"]), 0.0)
    with pytest.raises(CheckpointError, match="half-life"):
        checkpoint.load(blob, ProfilerSettings(cpu_half_life_s=3600.0))
