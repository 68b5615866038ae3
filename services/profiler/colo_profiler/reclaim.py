"""Prod-reclaimable resources of one node, for one resource (REFERENCE.md §7).

Pure integer arithmetic: CPU in milli-cores or memory in bytes, the caller picks.
"""

from __future__ import annotations

from collections.abc import Sequence


def pod_based_reclaimable(requests: Sequence[int], peaks: Sequence[int], allocatable: int | None) -> int:
    """Σ over prod pods of max(request − peak, 0), capped by allocatable − Σ peaks, floored at 0.

    ``requests[i]``/``peaks[i]`` belong to the same prod pod (a cold-start pod's peak is
    its request, so it reclaims nothing). ``allocatable`` None = unknown node, no cap.
    Raises ValueError when the sequences differ in length. Source: REFERENCE.md §7.
    """
    if len(requests) != len(peaks):
        raise ValueError(f"{len(requests)} requests but {len(peaks)} peaks")
    reclaimable = sum(max(r - p, 0) for r, p in zip(requests, peaks))
    if allocatable is not None:
        reclaimable = min(reclaimable, allocatable - sum(peaks))
    return max(reclaimable, 0)


def class_based_reclaimable(prod_request_sum: int, system_peak: int, prod_class_peak: int,
                            allocatable: int | None) -> int:
    """Σ prod requests − (system peak + prod-class peak), capped by allocatable − that peak, ≥ 0.

    ``allocatable`` None = unknown node, no cap. Source: REFERENCE.md §7.
    """
    peak = system_peak + prod_class_peak
    reclaimable = prod_request_sum - peak
    if allocatable is not None:
        reclaimable = min(reclaimable, allocatable - peak)
    return max(reclaimable, 0)


def prod_reclaimable(requests: Sequence[int], peaks: Sequence[int], warm_request_sum: int,
                     system_peak: int, prod_class_peak: int, allocatable: int | None) -> int:
    """ProdReclaimable = min(pod-based, class-based), ≥ 0 (REFERENCE.md §7).

    ``requests``/``peaks`` per prod pod (see :func:`pod_based_reclaimable`);
    ``warm_request_sum`` the Σ requests of prod pods past cold start: a cold pod's
    request is not offered by the class-based estimate either, while its usage is
    already inside the prod-class peak (conservative on purpose).
    """
    return min(
        pod_based_reclaimable(requests, peaks, allocatable),
        class_based_reclaimable(warm_request_sum, system_peak, prod_class_peak, allocatable),
    )
