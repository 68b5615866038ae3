"""BE CPU eviction by satisfaction (REFERENCE.md §5, oracle O10; off by default).

For a sample (BE limit = CPU the BE group may use, BE used, BE request = Σ BE CPU requests; milli-cores): when
used/limit ≥ usage threshold and satisfaction = limit/request ≤ lower%, release request × upper%/100 − limit
(= request × (upper% − satisfaction)). The window average needs samples covering ≥ window/3; the result is the
smaller of the window and current results. Victims: BE pods by priority ascending, then usage/request
descending, until their requests cover the release; cool-down 20 s after an eviction.
"""

from __future__ import annotations

from dataclasses import dataclass

from colo.messages import CPUEvictStrategy
from colo_node_agent.strategies.types import Eviction, EvictPlan, PodView


@dataclass(frozen=True)
class BECPUSample:
    """BE CPU at one time (or averaged over a window): ``limit``, ``used``, ``request`` in milli-cores."""

    limit: int
    used: int
    request: int


def _release(s: BECPUSample, policy: CPUEvictStrategy) -> int:
    if s.limit <= 0 or s.request <= 0:
        return 0
    if s.used * 100 < policy.usage_threshold_percent * s.limit:
        return 0
    if s.limit * 100 > policy.lower_percent * s.request:
        return 0
    return max(s.request * policy.upper_percent // 100 - s.limit, 0)


def be_cpu_release(window: BECPUSample | None, current: BECPUSample | None, policy: CPUEvictStrategy) -> int:
    """Milli-cores of BE request to release: min of the window and current results (O10)."""
    if window is None:
        return 0
    out = _release(window, policy)
    if current is not None:
        out = min(out, _release(current, policy))
    return out


def window_average(samples: list[BECPUSample], sample_interval_s: float,
                   policy: CPUEvictStrategy) -> BECPUSample | None:
    """Average of ``samples`` (oldest first), or None when they cover less than a third of the window."""
    if not samples or len(samples) * sample_interval_s < policy.window_s / 3:
        return None
    n = len(samples)
    return BECPUSample(sum(s.limit for s in samples) // n, sum(s.used for s in samples) // n,
                       sum(s.request for s in samples) // n)


def cpu_evict(window: BECPUSample | None, current: BECPUSample | None, pods: list[PodView],
              policy: CPUEvictStrategy, last_evict_at: float | None = None, now: float = 0.0) -> EvictPlan:
    """Choose BE victims whose CPU requests cover the release (milli-cores)."""
    if not policy.enabled:
        return EvictPlan()
    release = be_cpu_release(window, current, policy)
    if release <= 0:
        return EvictPlan()
    if last_evict_at is not None and now - last_evict_at < policy.cooldown_s:
        return EvictPlan(release, skipped="cool-down")

    def key(p: PodView) -> tuple[int, float, str]:
        return (p.priority, -(p.cpu_used / p.cpu_request if p.cpu_request else 0.0), p.uid)

    out: list[Eviction] = []
    freed = 0
    for p in sorted((p for p in pods if p.qos == "BE"), key=key):
        if freed >= release:
            break
        out.append(Eviction(p.uid, "Evicted", f"BE CPU satisfaction low: releasing {release}m"))
        freed += p.cpu_request
    return EvictPlan(release, out)
