"""Checkpoint of a :class:`ProfileModel` as one compact blob, and its restore (REFERENCE.md §7: "checkpoint so a
restart loses nothing").

Blob = :data:`MAGIC` + CRC-32 of the rest (4 bytes, big-endian) + msgpack of an envelope: the format version, zlib(msgpack(:class:`Checkpoint` without
its weight arrays)), and per histogram bank the zlib'd flat indices of its non-zero weights (int64
differences, which zlib shrinks ~20×) and the float64 weights themselves, raw: decayed weights have random
mantissas, zlib gains under 20 % on them at several times the cost. So a restored model has bit-identical
weights and reference times, hence identical percentiles and predictions, and goes on identically. Free rows hold zeros, so only rows in use cost anything; a row keeps
its index, and the free list is rebuilt from the rows the pods, nodes and workloads use.

Format 2 adds the adaptive peak state (``peak_method = "adaptive"``, colo_profiler.adaptive): the margin window
and its length, and per pod its window bases and maxima, highest sample and past residuals (one raw float64
array, like the weights), so a restart keeps the learned margins (recomputed from the residuals with the current
prices). Restored into a "reference"
profiler the state is dropped; a stored window length other than the settings' keeps the residuals and opens
a fresh window. Format 1 blobs are refused like any other version.

Not stored: what was last published (a restarted profiler publishes every profile once) and samples still
buffered (:func:`dump` flushes first).

:func:`load` raises :class:`CheckpointError` for anything it cannot trust — bad magic, zlib or msgpack
errors, another format version, another bucket layout or half-life, rows out of range or shared, weights
outside rows in use or not finite — so the caller can log it and start empty.
"""

from __future__ import annotations

import zlib

import msgspec
import numpy as np

from colo.messages import PriorityClass, Usage
from colo_profiler.histogram import HistogramBank
from colo_profiler.model import (
    PRIORITY_CLASSES,
    NodeModel,
    PodModel,
    ProfileModel,
    WorkloadModel,
)
from colo_profiler.settings import ProfilerSettings

MAGIC = b"colo-profiler-checkpoint\n"
"""First bytes of every checkpoint blob."""
VERSION = 2
"""Format version; a blob of another version is refused."""
ZLIB_LEVEL = 1
"""Fastest zlib level (metadata and indices)."""


class CheckpointError(ValueError):
    """A checkpoint blob that cannot be restored (corrupt, incompatible or inconsistent)."""


class _Bank(msgspec.Struct, array_like=True):
    num_buckets: int
    starts_head: list[float]
    """The first two bucket starts and the last: enough to tell two layouts apart."""
    half_life_s: float | None
    ref: float | None
    capacity: int
    index_deltas: bytes
    """int64 little-endian: first flat index of a non-zero weight, then differences."""
    weights: bytes
    """float64 little-endian, one per index."""


class _Pod(msgspec.Struct, array_like=True):
    uid: str
    node: str
    cpu_request: int
    memory_request: int
    priority_class: PriorityClass | None
    started_at: float | None
    last_seen: float
    row: int
    workload: tuple[str, str] | None


class _Node(msgspec.Struct, array_like=True):
    name: str
    class_rows: list[int]
    """In :data:`PRIORITY_CLASSES` order."""
    system_row: int
    last_seen: float
    pods: list[str]


class _Workload(msgspec.Struct, array_like=True):
    namespace: str
    app: str
    row: int
    first_seen: float
    last_seen: float
    pods: list[str]


class _Adaptive(msgspec.Struct, array_like=True):
    window_s: float
    window: int | None
    residual_window: int
    uids: list[str]
    """The sampled pods, in the row order of ``state``."""
    state: bytes
    """float64 little-endian, shape ``(len(uids), 6 + 2 × residual_window)``: per pod the window base (CPU cores,
    memory bytes), window max, highest sample, then the CPU and the memory residuals (oldest first,
    right-aligned, NaN = none). Empty in the zlib'd meta; carried raw in the envelope."""


class Checkpoint(msgspec.Struct, array_like=True):
    """The stored form of a model (times in seconds, CPU in milli-cores, memory in bytes)."""

    version: int
    saved_at: float
    samples: int
    workload_samples: int
    cpu: _Bank
    memory: _Bank
    nodes: list[_Node]
    pods: list[_Pod]
    workloads: list[_Workload]
    allocatable: list[tuple[str, int, int]]
    """(node, cpu, memory) of every registered node."""
    adaptive: _Adaptive | None = None
    """Adaptive peak state; None when the profiler ran with ``peak_method = "reference"``."""


class _Envelope(msgspec.Struct, array_like=True):
    version: int
    meta: bytes
    """zlib(msgpack(Checkpoint)) with the banks' ``index_deltas`` and ``weights`` empty."""
    cpu_index: bytes
    """zlib of the CPU bank's ``index_deltas``."""
    cpu_weights: bytes
    memory_index: bytes
    memory_weights: bytes
    adaptive_state: bytes = b""
    """The adaptive ``state``, raw (random mantissas: zlib would gain little at a high cost)."""


_encoder = msgspec.msgpack.Encoder()
_envelope = msgspec.msgpack.Decoder(_Envelope)
_decoder = msgspec.msgpack.Decoder(Checkpoint)


def _head(bank: HistogramBank) -> list[float]:
    st = bank.buckets.starts
    return [float(st[1]), float(st[2]), float(st[-1])] if len(st) > 2 else [float(x) for x in st]


def _dump_bank(bank: HistogramBank, rows_end: int) -> _Bank:
    """``rows_end`` = 1 + the highest row in use: rows above are free, hence zero, and need no scan."""
    flat = bank.weights[:rows_end].reshape(-1)
    idx = np.flatnonzero(flat)
    deltas = np.diff(idx, prepend=0).astype("<i8")
    return _Bank(num_buckets=bank.buckets.num_buckets, starts_head=_head(bank), half_life_s=bank.half_life_s,
                 ref=bank.ref, capacity=int(bank.weights.shape[0]), index_deltas=deltas.tobytes(),
                 weights=flat[idx].astype("<f8").tobytes())


def snapshot(model: ProfileModel, at: float) -> Checkpoint:
    """The model as a :class:`Checkpoint` (buffered samples are flushed first); ``at`` = save time, seconds."""
    model.flush()
    rows_end = 1 + max([-1, *(n.system_row for n in model.nodes.values()),
                        *(r for n in model.nodes.values() for r in n.class_rows.values()),
                        *(p.row for p in model.pods.values()), *(w.row for w in model.workloads.values())])
    return Checkpoint(
        version=VERSION, saved_at=at, samples=model.samples, workload_samples=model.workload_samples,
        cpu=_dump_bank(model.cpu, rows_end), memory=_dump_bank(model.memory, rows_end),
        nodes=[_Node(n.name, [n.class_rows[c] for c in PRIORITY_CLASSES], n.system_row, n.last_seen,
                     list(n.pods)) for n in model.nodes.values()],
        pods=[_Pod(p.uid, p.node, p.cpu_request, p.memory_request, p.priority_class, p.started_at, p.last_seen,
                   p.row, p.workload) for p in model.pods.values()],
        workloads=[_Workload(w.key[0], w.key[1], w.row, w.first_seen, w.last_seen, list(w.pods))
                   for w in model.workloads.values()],
        allocatable=[(name, a.cpu, a.memory) for name, a in model.allocatable.items()],
        adaptive=_dump_adaptive(model),
    )


def _dump_adaptive(model: ProfileModel) -> _Adaptive | None:
    ad = model.adaptive
    if ad is None:
        return None
    pods = [p for p in model.pods.values() if p.row >= 0]
    rows = np.array([p.row for p in pods], dtype=np.intp)
    data = np.concatenate([ad.base[rows], ad.window_max[rows], ad.highest[rows], ad.residuals[0, rows],
                           ad.residuals[1, rows]], axis=1)
    return _Adaptive(ad.window_s, ad.window, ad.residual_window, [p.uid for p in pods],
                     data.astype("<f8").tobytes())


def _restore_adaptive(model: ProfileModel, stored: _Adaptive | None) -> None:
    ad = model.adaptive
    if ad is None or stored is None:
        return
    n, width = len(stored.uids), 6 + 2 * stored.residual_window
    if stored.residual_window < 1 or len(stored.state) != 8 * n * width:
        raise CheckpointError(f"adaptive peaks: state of {len(stored.state)} bytes does not fit {n} pods × "
                              f"{stored.residual_window} residuals")
    data = np.frombuffer(stored.state, dtype="<f8").reshape(n, width)
    rows: list[int] = []
    for uid in stored.uids:
        pod = model.pods.get(uid)
        if pod is None or pod.row < 0:
            raise CheckpointError(f"adaptive peaks of pod {uid!r}, which is unknown or unsampled")
        rows.append(pod.row)
    if len(set(rows)) != n:
        raise CheckpointError("adaptive peaks: a pod stored twice")
    residuals = data[:, 6:].reshape(n, 2, stored.residual_window)
    if np.isposinf(data[:, :6]).any() or np.isinf(residuals).any():
        raise CheckpointError("adaptive peaks: +inf state or non-finite residual")
    index = np.array(rows, dtype=np.intp)
    ad.window = stored.window if stored.window_s == ad.window_s else None
    if ad.window is not None:
        ad.base[index] = data[:, 0:2]
        ad.window_max[index] = data[:, 2:4]
    ad.highest[index] = data[:, 4:6]
    ad.set_residuals(index, 0, residuals[:, 0])
    ad.set_residuals(index, 1, residuals[:, 1])


def encode(cp: Checkpoint) -> bytes:
    """The blob of ``cp`` (see the module docstring)."""
    bare = msgspec.structs.replace(cp, cpu=msgspec.structs.replace(cp.cpu, index_deltas=b"", weights=b""),
                                   memory=msgspec.structs.replace(cp.memory, index_deltas=b"", weights=b""),
                                   adaptive=msgspec.structs.replace(cp.adaptive, state=b"") if cp.adaptive else None)
    body = _encoder.encode(_Envelope(
        version=cp.version, meta=zlib.compress(_encoder.encode(bare), ZLIB_LEVEL),
        cpu_index=zlib.compress(cp.cpu.index_deltas, ZLIB_LEVEL), cpu_weights=cp.cpu.weights,
        memory_index=zlib.compress(cp.memory.index_deltas, ZLIB_LEVEL), memory_weights=cp.memory.weights,
        adaptive_state=cp.adaptive.state if cp.adaptive else b""))
    return MAGIC + zlib.crc32(body).to_bytes(4, "big") + body


def dump(model: ProfileModel, at: float) -> bytes:
    """:func:`snapshot` then :func:`encode`."""
    return encode(snapshot(model, at))


def decode(blob: bytes) -> Checkpoint:
    """The :class:`Checkpoint` in ``blob``. Raises CheckpointError when it is not a readable checkpoint of
    this format version."""
    if not blob.startswith(MAGIC):
        raise CheckpointError("not a profiler checkpoint (bad magic)")
    body = memoryview(blob)[len(MAGIC) + 4:]
    if len(blob) < len(MAGIC) + 4 or zlib.crc32(body) != int.from_bytes(blob[len(MAGIC):len(MAGIC) + 4], "big"):
        raise CheckpointError("unreadable checkpoint: CRC-32 mismatch (truncated or damaged)")
    try:
        env = _envelope.decode(body)
        if env.version != VERSION:
            raise CheckpointError(f"checkpoint format {env.version}, this profiler reads {VERSION}")
        cp = _decoder.decode(zlib.decompress(env.meta))
        cpu = msgspec.structs.replace(cp.cpu, index_deltas=zlib.decompress(env.cpu_index), weights=env.cpu_weights)
        memory = msgspec.structs.replace(cp.memory, index_deltas=zlib.decompress(env.memory_index),
                                         weights=env.memory_weights)
    except (zlib.error, msgspec.DecodeError, UnicodeDecodeError) as exc:  # msgspec raises the last for bad UTF-8
        raise CheckpointError(f"unreadable checkpoint: {exc}") from exc
    if cp.version != VERSION:
        raise CheckpointError(f"checkpoint format {cp.version}, this profiler reads {VERSION}")
    adaptive = msgspec.structs.replace(cp.adaptive, state=env.adaptive_state) if cp.adaptive else None
    return msgspec.structs.replace(cp, cpu=cpu, memory=memory, adaptive=adaptive)


def _restore_bank(bank: HistogramBank, stored: _Bank, rows_used: set[int], what: str) -> None:
    if (stored.num_buckets, stored.starts_head, stored.half_life_s) != (
            bank.buckets.num_buckets, _head(bank), bank.half_life_s):
        raise CheckpointError(f"{what} histograms: stored layout/half-life ({stored.num_buckets} buckets, "
                              f"half-life {stored.half_life_s}) differ from the settings' "
                              f"({bank.buckets.num_buckets}, {bank.half_life_s})")
    if stored.capacity < 1 or (rows_used and max(rows_used) >= stored.capacity):
        raise CheckpointError(f"{what} histograms: capacity {stored.capacity} does not hold the rows in use")
    if len(stored.index_deltas) % 8 or len(stored.weights) != len(stored.index_deltas):
        raise CheckpointError(f"{what} histograms: index and weight arrays differ in length")
    if stored.ref is not None and not np.isfinite(stored.ref):
        raise CheckpointError(f"{what} histograms: reference time {stored.ref} is not finite")
    idx = np.cumsum(np.frombuffer(stored.index_deltas, dtype="<i8"))
    values = np.frombuffer(stored.weights, dtype="<f8")
    nb = bank.buckets.num_buckets
    size = stored.capacity * nb
    if idx.size and (idx[0] < 0 or idx[-1] >= size or (np.diff(idx) <= 0).any()):
        raise CheckpointError(f"{what} histograms: weight indices out of range or not increasing")
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise CheckpointError(f"{what} histograms: weights must be finite and positive")
    in_use = np.zeros(stored.capacity, dtype=bool)
    in_use[list(rows_used)] = True
    weights = np.zeros(size)
    weights[idx] = values
    try:
        bank.restore(weights.reshape(stored.capacity, nb), stored.ref, in_use)
    except ValueError as exc:
        raise CheckpointError(f"{what} histograms: {exc}") from exc


def restore(cp: Checkpoint, settings: ProfilerSettings | None = None) -> ProfileModel:
    """A new :class:`ProfileModel` with ``settings`` holding the state in ``cp``. Raises CheckpointError when
    ``cp`` does not fit the settings (bucket layout, half-lives) or is inconsistent."""
    model = ProfileModel(settings)
    owners: dict[int, str] = {}

    def claim(row: int, owner: str) -> int:
        if row < 0 or row in owners:
            raise CheckpointError(f"row {row} of {owner} is negative or already used by {owners.get(row)}")
        owners[row] = owner
        return row

    for n in cp.nodes:
        if len(n.class_rows) != len(PRIORITY_CLASSES) or n.name in model.nodes:
            raise CheckpointError(f"node {n.name!r}: duplicate or wrong number of class rows")
        rows = {c: claim(r, f"node {n.name}") for c, r in zip(PRIORITY_CLASSES, n.class_rows)}
        model.nodes[n.name] = NodeModel(n.name, rows, claim(n.system_row, f"node {n.name}"), n.last_seen,
                                        pods=set(n.pods))
    for w in cp.workloads:
        key = (w.namespace, w.app)
        if key in model.workloads:
            raise CheckpointError(f"workload {key} stored twice")
        model.workloads[key] = WorkloadModel(key, claim(w.row, f"workload {key}"), w.first_seen, w.last_seen)
    for p in cp.pods:
        if p.uid in model.pods:
            raise CheckpointError(f"pod {p.uid!r} stored twice")
        model.pods[p.uid] = PodModel(p.uid, p.node, p.cpu_request, p.memory_request, p.priority_class,
                                     p.started_at, p.last_seen, p.row, p.workload)
        if p.row != -1:
            claim(p.row, f"pod {p.uid}")
    for pod in model.pods.values():
        if pod.node not in model.nodes:
            model.waiting.setdefault(pod.node, set()).add(pod.uid)
    for w in cp.workloads:
        wl = model.workloads[(w.namespace, w.app)]
        for uid in w.pods:
            member = model.pods.get(uid)
            if member is None or member.workload != wl.key or member.row < 0 or member.wl is not None:
                raise CheckpointError(f"workload {wl.key}: member {uid!r} unknown, of another workload or unsampled")
            wl.pods.add(uid)
            member.wl = wl
    for name, cpu, memory in cp.allocatable:
        model.allocatable[name] = Usage(cpu=cpu, memory=memory)
        if name in model.nodes:
            model.nodes[name].allocatable = model.allocatable[name]
    used = set(owners)
    _restore_bank(model.cpu, cp.cpu, used, "CPU")
    _restore_bank(model.memory, cp.memory, used, "memory")
    if model.cpu.weights.shape[0] != model.memory.weights.shape[0]:
        raise CheckpointError("CPU and memory histograms differ in rows")
    if model.adaptive is not None:
        model.adaptive.grow(model.cpu.weights.shape[0])
    _restore_adaptive(model, cp.adaptive)
    model.samples, model.workload_samples = cp.samples, cp.workload_samples
    return model


def load(blob: bytes, settings: ProfilerSettings | None = None) -> ProfileModel:
    """:func:`decode` then :func:`restore`. Raises CheckpointError."""
    return restore(decode(blob), settings)
