"""GPU requests of a pod manifest (DeviceShare; docs/gpu.md "Pod GPU requests").

Container ``resources.requests`` (and ``limits``, which must then equal the requests) may name:

* ``nvidia.com/gpu: N`` — N whole GPUs (N ≥ 1);
* ``koordinator.sh/gpu-core: P`` and/or ``koordinator.sh/gpu-memory-ratio: P`` — percent of one GPU
  (1..100), or whole GPUs as a multiple of 100 (Koordinator's DeviceShare convention); when both are given
  the larger share is booked (the scheduler books one share per device);
* ``colo.io/gpu-milli: M`` — M milli-GPU of one GPU (1..1000), the Alibaba GPU trace's ``gpu_milli``.

At most one container may request GPUs, and ``nvidia.com/gpu`` excludes the share names. The annotation
``colo.io/gpu-spec`` restricts the GPU model (``|``-separated model names, e.g. ``V100M16|V100M32``, the
trace's ``gpu_spec``; the models are those of ``NodeSpec.gpus``). Every problem is reported with its path.
"""

from __future__ import annotations

from typing import Any

from colo.manifests.base import Ctx, join
from colo.messages import GPURequest

WHOLE = "nvidia.com/gpu"
CORE = "koordinator.sh/gpu-core"
MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
MILLI = "colo.io/gpu-milli"
GPU_RESOURCES = (WHOLE, CORE, MEMORY_RATIO, MILLI)
"""The resource names read as GPU requests (module doc)."""
GPU_SPEC_ANNOTATION = "colo.io/gpu-spec"
"""Annotation restricting a pod's GPU model (module doc)."""
MAX_GPUS_PER_POD = 8
"""Most GPUs one pod may request (the largest gpu-v2023 node has 8)."""


def split_gpu(ctx: Ctx, obj: Any, path: str) -> tuple[Any, dict[str, int]]:
    """(``obj`` without the GPU names, GPU name → non-negative integer amount). Amounts that are not whole
    non-negative numbers are errors at ``path.<name>``."""
    if not isinstance(obj, dict):
        return obj, {}
    rest = {k: v for k, v in obj.items() if k not in GPU_RESOURCES}
    out: dict[str, int] = {}
    for name in GPU_RESOURCES:
        if name not in obj:
            continue
        value = obj[name]
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit():
            ctx.err(join(path, name), f"expected a whole non-negative number, got {value!r}")
            continue
        out[name] = int(text)
    return rest, out


def gpu_request(ctx: Ctx, requests: dict[str, int], limits: dict[str, int], path: str,
                annotations: dict[str, str], annotations_path: str) -> GPURequest | None:
    """The pod's :class:`GPURequest` from one container's GPU ``requests``/``limits`` at ``path``
    (``…resources``) and its annotations; None when it requests none. Problems go to ``ctx`` with paths."""
    spec = annotations.get(GPU_SPEC_ANNOTATION, "")
    models = [m.strip() for m in spec.split("|") if m.strip()]
    for name, lim in limits.items():
        if requests.get(name, lim) != lim:
            ctx.err(join(join(path, "limits"), name), f"GPU limit {lim} must equal the request {requests[name]}")
    amounts = {**limits, **requests}
    amounts = {k: v for k, v in amounts.items() if v}
    rp = join(path, "requests")
    if not amounts:
        if models:
            ctx.err(join(annotations_path, GPU_SPEC_ANNOTATION), "set on a pod that requests no GPU")
        return None
    if WHOLE in amounts:
        n = amounts[WHOLE]
        if len(amounts) > 1:
            others = ", ".join(k for k in amounts if k != WHOLE)
            ctx.err(join(rp, WHOLE), f"cannot be combined with {others} (whole GPUs or a share, not both)")
            return None
        if n > MAX_GPUS_PER_POD:
            ctx.err(join(rp, WHOLE), f"at most {MAX_GPUS_PER_POD} GPUs per pod, got {n}")
            return None
        return GPURequest(count=n, milli=1000, models=models)
    if MILLI in amounts:
        m = amounts[MILLI]
        if len(amounts) > 1:
            ctx.err(join(rp, MILLI), "cannot be combined with " + ", ".join(k for k in amounts if k != MILLI))
            return None
        if m > 1000:
            ctx.err(join(rp, MILLI), f"a share of one GPU is 1..1000 milli, got {m} (whole GPUs: {WHOLE})")
            return None
        return GPURequest(count=1, milli=m, models=models)
    pct = max(amounts.get(CORE, 0), amounts.get(MEMORY_RATIO, 0))
    name = CORE if amounts.get(CORE, 0) >= amounts.get(MEMORY_RATIO, 0) else MEMORY_RATIO
    if pct > 100:
        if pct % 100:
            ctx.err(join(rp, name), f"above 100 percent must be a multiple of 100 (whole GPUs), got {pct}")
            return None
        if pct // 100 > MAX_GPUS_PER_POD:
            ctx.err(join(rp, name), f"at most {MAX_GPUS_PER_POD} GPUs per pod, got {pct // 100}")
            return None
        return GPURequest(count=pct // 100, milli=1000, models=models)
    return GPURequest(count=1, milli=pct * 10, models=models)
