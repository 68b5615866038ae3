"""ProdReclaimable = min(pod-based, class-based) (REFERENCE.md §7)."""

from __future__ import annotations

import pytest

from colo_profiler.reclaim import class_based_reclaimable, pod_based_reclaimable, prod_reclaimable

# requests, peaks, warm_request_sum, system_peak, prod_class_peak, allocatable, pod_based, class_based, result
CASES = [
    ("pod-based-smaller", [4000, 4000], [3000, 2500], 8000, 500, 4000, None, 2500, 3500, 2500),
    ("class-based-smaller", [4000, 4000], [1000, 1000], 8000, 1000, 3000, None, 6000, 4000, 4000),
    ("peak-above-request-clamps-pod", [4000, 2000], [5000, 500], 6000, 0, 5500, None, 1500, 500, 500),
    ("pod-cap-by-allocatable", [6000, 6000], [1000, 1000], 12000, 0, 2000, 5000, 3000, 3000, 3000),
    ("class-cap-by-allocatable", [6000, 6000], [1000, 1000], 12000, 500, 1500, 4000, 2000, 2000, 2000),
    ("cold-pod-reclaims-nothing", [4000, 4000], [4000, 1000], 4000, 0, 1200, None, 3000, 2800, 2800),
    ("all-cold", [4000], [4000], 0, 100, 900, None, 0, 0, 0),
    ("over-committed-floor-zero", [8000], [7000], 8000, 0, 7000, 6000, 0, 0, 0),
    ("no-prod-pods", [], [], 0, 300, 0, 10000, 0, 0, 0),
]


@pytest.mark.parametrize(
    ("requests", "peaks", "warm", "system", "prod", "alloc", "pod_based", "class_based", "expected"),
    [c[1:] for c in CASES], ids=[c[0] for c in CASES],
)
def test_prod_reclaimable(requests: list[int], peaks: list[int], warm: int, system: int, prod: int,
                          alloc: int | None, pod_based: int, class_based: int, expected: int) -> None:
    assert pod_based_reclaimable(requests, peaks, alloc) == pod_based
    assert class_based_reclaimable(warm, system, prod, alloc) == class_based
    assert prod_reclaimable(requests, peaks, warm, system, prod, alloc) == expected


def test_length_mismatch_raises() -> None:
    with pytest.raises(ValueError):
        pod_based_reclaimable([1, 2], [1], None)
