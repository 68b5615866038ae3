"""Size and time of a profiler checkpoint: ``python bench/profiler_checkpoint.py [--nodes 1000] [--pods 30]``.

Builds a model of ``nodes`` × ``pods`` pods (every pod in one of 10 workloads per node, a day of hourly
reports plus an hour of minute reports, so rows hold realistic spreads of buckets), then times
:func:`checkpoint.snapshot` (on the event loop in the service), :func:`checkpoint.encode` (a worker thread in
the service) and :func:`checkpoint.load`, and checks the restored model predicts the same. Baseline, in the same
process: the dense banks (every weight of both banks, zlib level 1), as a checkpoint without the sparse
encoding would be. ``--adaptive-days N`` builds the model with ``peak_method = "adaptive"`` and adds one report
per node per day for N more days, so each pod holds up to N residuals per resource (28 = the full history).
Ends with a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
import zlib

import numpy as np

from colo.messages import NodeMetric, PodMetric, Usage
from colo_profiler import checkpoint
from colo_profiler.model import ProfileModel
from colo_profiler.settings import ProfilerSettings


def build(nodes: int, pods: int, seed: int = 5, adaptive_days: int = 0) -> ProfileModel:
    """The model after a day of hourly and an hour of minute reports from every node (then, adaptive, one report
    per node per day for ``adaptive_days`` days)."""
    rng = np.random.default_rng(seed)
    model = ProfileModel(ProfilerSettings(peak_method="adaptive", expiry_s=100 * 86400.0) if adaptive_days
                         else None)
    for i in range(nodes):
        model.node_registered(f"n{i}", Usage(cpu=64000, memory=256 << 30))
        for j in range(pods):
            model.pod_bound(f"n{i}-p{j}", f"n{i}", 4000, 8 << 30, "prod" if j % 2 else "batch", at=0.0,
                            workload=(f"ns{i % 20}", f"app{j % 10}"))
    base = rng.gamma(2.0, 600.0, (nodes, pods))
    times = [3600.0 * k for k in range(24)] + [86400.0 + 60.0 * k for k in range(60)]
    times += [86400.0 * (2 + d) + 60.0 for d in range(adaptive_days)]
    for t in times:
        noise = rng.gamma(8.0, 1 / 8.0, (nodes, pods))
        cpu = (base * noise).astype(int)
        mem = (base * (1 << 20) * (1 + noise / 4)).astype(int)
        for i in range(nodes):
            model.ingest(NodeMetric(node=f"n{i}", at=t, system_usage=Usage(cpu=800, memory=2 << 30),
                                    pods=[PodMetric(uid=f"n{i}-p{j}", cpu=int(cpu[i, j]), memory=int(mem[i, j]))
                                          for j in range(pods)]))
    model.flush()
    return model


def best_of(n: int, fn: object) -> tuple[float, object]:
    """Fastest of ``n`` runs of ``fn()`` in seconds, and its result."""
    best, out = float("inf"), None
    for _ in range(n):
        start = time.perf_counter()
        out = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    """Build, checkpoint, restore, compare; print figures and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--adaptive-days", type=int, default=0, help="peak_method adaptive with N days of residuals")
    args = ap.parse_args()
    model = build(args.nodes, args.pods, adaptive_days=args.adaptive_days)
    now = 86400.0 * (2 + args.adaptive_days) if args.adaptive_days else 86400.0 + 3600.0
    snap_s, cp = best_of(args.repeats, lambda: checkpoint.snapshot(model, now))
    enc_s, blob = best_of(args.repeats, lambda: checkpoint.encode(cp))  # type: ignore[arg-type]
    assert isinstance(blob, bytes)
    load_s, restored = best_of(args.repeats, lambda: checkpoint.load(blob, model.settings))
    assert isinstance(restored, ProfileModel)
    names = sorted(model.nodes)
    same = (restored.profiles(names, now) == model.profiles(names, now)
            and restored.workload_profiles(now) == model.workload_profiles(now))

    def dense() -> bytes:
        return zlib.compress(model.cpu.weights.tobytes() + model.memory.weights.tobytes(), 1)

    dense_s, dense_blob = best_of(args.repeats, dense)
    assert isinstance(dense_blob, bytes)
    nonzero = int(np.count_nonzero(model.cpu.weights) + np.count_nonzero(model.memory.weights))
    rows = model.cpu.rows_in_use
    print(f"{args.nodes} nodes × {args.pods} pods, {len(model.workloads)} workloads: {rows:,} rows per bank, "
          f"{nonzero:,} non-zero weights")
    print(f"checkpoint {len(blob) / 1e6:.2f} MB: snapshot {snap_s * 1e3:.0f} ms + encode {enc_s * 1e3:.0f} ms; "
          f"restore {load_s * 1e3:.0f} ms; identical predictions: {same}")
    print(f"dense banks baseline: {len(dense_blob) / 1e6:.2f} MB in {dense_s * 1e3:.0f} ms")
    print(json.dumps({"nodes": args.nodes, "pods_per_node": args.pods, "adaptive_days": args.adaptive_days,
                      "rows": rows, "nonzero_weights": nonzero,
                      "checkpoint_bytes": len(blob), "snapshot_s": round(snap_s, 4), "encode_s": round(enc_s, 4),
                      "restore_s": round(load_s, 4), "identical": same, "dense_bytes": len(dense_blob),
                      "dense_s": round(dense_s, 4), "size_vs_dense": round(len(blob) / len(dense_blob), 3),
                      "time_vs_dense": round((snap_s + enc_s) / dense_s, 3)}))


if __name__ == "__main__":
    main()
