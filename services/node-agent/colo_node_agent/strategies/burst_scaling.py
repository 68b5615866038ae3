"""Which LS pods scale their CFS quota up or down this round (CPU burst ``cfsQuotaBurstOnly``/``auto``,
REFERENCE.md §5; Koordinator ``qosmanager/plugins/cpuburst``), chosen pod by pod so that the share pool does not
oscillate.

The reference turns every throttled pod up while the share pool is Idle and every pod down while it is in
Overload. When the pods together cross the threshold at ×1.2 but not at ×1.0, that flips the whole node between
Idle and Overload every round (14 pods of 1 core on 32 CPUs: 43.8 % ↔ 52.5 %). Here:

* **Up** (pool Idle only): throttled pods below their ceiling whose token bucket allows it, most throttled
  first (throttled share of periods, then use / quota), each only while the pool's projected use stays below the
  Overload threshold, counting the pod's expected extra use = the most the step lets it add: the quota added
  (a throttled pod takes what it is given), less if it already uses more than its quota. A pod that does not
  fit is skipped and the next one tried.
* **Hold** (Cooling, Unknown, or no reason to move): a pool between Cooling and Overload changes nothing, so
  the ups above land in a band the pool stays in.
* **Down**, pod by pod: a pod whose token bucket is empty (as the reference); a pod above its base that was not
  throttled for ``scale_down_unthrottled_rounds`` rounds in a row and whose use fits the lower quota (it gives
  back quota it does not use, without being throttled by it); and, while the pool is in Overload, pods above
  their base, least throttled first, only until the projected use is below the threshold (the use a pod loses
  is its use − its new quota, if positive).

Steps are the reference's: ×1.2 up, ×0.8 down (:data:`SCALE_UP`, :data:`SCALE_DOWN`), within [base, base ×
``quota_scale_max_percent``/100]; Overload ≥ ``share_pool_threshold_percent`` (50 %) of the pool, Cooling ≥ 90 %
of it (45 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from colo.messages import CPUBurstStrategy
from colo_node_agent.cgroups.resources import DEFAULT_PERIOD_US

Operation = Literal["up", "down", "remain", "reset"]
NodeState = Literal["overload", "cooling", "idle", "unknown"]

SCALE_UP, SCALE_DOWN = 1.2, 0.8
"""The reference's quota steps (Koordinator ``cfsIncreaseStep``, ``cfsDecreaseStep``)."""
COOLING_RATIO = 0.9
"""Cooling starts at this fraction of the Overload threshold (Koordinator ``sharePoolCoolingThresholdRatio``)."""


@dataclass(frozen=True)
class SharePool:
    """The LS share pool: ``capacity`` milli-cores (logical CPUs − LSE/LSR requests), ``used`` milli-cores (node
    use − LSE/LSR/BE pod use), None without a node metric."""

    capacity: int
    used: int | None

    def ratio(self) -> float | None:
        """used / capacity (1.0 for a pool without CPUs), None without a metric."""
        if self.used is None:
            return None
        return self.used / self.capacity if self.capacity > 0 else 1.0

    def state(self, threshold_percent: int) -> NodeState:
        """Overload ≥ threshold, Cooling ≥ threshold × :data:`COOLING_RATIO`, else Idle; Unknown without a
        metric (REFERENCE.md §5)."""
        ratio = self.ratio()
        if ratio is None:
            return "unknown"
        if ratio >= threshold_percent / 100:
            return "overload"
        if ratio >= threshold_percent / 100 * COOLING_RATIO:
            return "cooling"
        return "idle"


@dataclass(frozen=True)
class ScalingPod:
    """One LS pod for quota scaling. Quotas in µs per period (``quota_us`` > 0, the current one; ``base_us`` =
    limit × period/1000; ``ceil_us`` the ceiling), ``cpu_used`` milli-cores; ``throttled`` this round (None =
    unknown), ``throttled_ratio`` the throttled share of periods (0..1, orders throttled pods); ``allowed`` by
    its token bucket; ``unthrottled_rounds`` rounds in a row without throttling, this one included."""

    uid: str
    quota_us: int
    base_us: int
    ceil_us: int
    cpu_used: int
    throttled: bool | None
    throttled_ratio: float = 0.0
    allowed: bool = True
    unthrottled_rounds: int = 0


def step_up(p: ScalingPod) -> int:
    """The quota after one step up (µs), capped at the ceiling."""
    return min(int(p.quota_us * SCALE_UP), p.ceil_us)


def step_down(p: ScalingPod) -> int:
    """The quota after one step down (µs), floored at the base."""
    return max(int(p.quota_us * SCALE_DOWN), p.base_us)


def _milli(quota_us: int, period_us: int) -> int:
    return quota_us * 1000 // period_us


def _pressure(p: ScalingPod) -> tuple[float, float]:
    """How throttled a pod is: throttled share of periods, then use / quota."""
    return p.throttled_ratio, p.cpu_used / max(p.quota_us, 1)


def scaling_operations(pods: list[ScalingPod], pool: SharePool, policy: CPUBurstStrategy,
                       period_us: int = DEFAULT_PERIOD_US) -> dict[str, Operation]:
    """The operation of every pod this round (module doc): ``up``, ``down`` or ``remain``."""
    ops: dict[str, Operation] = {p.uid: "remain" for p in pods}
    threshold = pool.capacity * policy.share_pool_threshold_percent / 100
    projected = float(pool.used or 0)  # no metric: Unknown, which moves no pod for the pool's sake

    def down(p: ScalingPod) -> None:
        nonlocal projected
        ops[p.uid] = "down"
        projected -= max(p.cpu_used - _milli(step_down(p), period_us), 0)

    k = policy.scale_down_unthrottled_rounds
    for p in pods:
        if p.quota_us <= p.base_us:
            continue
        gives_back = k > 0 and p.unthrottled_rounds >= k and p.cpu_used <= _milli(step_down(p), period_us)
        if not p.allowed or gives_back:
            down(p)
    state = pool.state(policy.share_pool_threshold_percent)
    if state == "overload":
        above = [p for p in pods if p.quota_us > p.base_us and ops[p.uid] == "remain"]
        least_first = sorted(above, key=lambda p: (p.throttled is True, *_pressure(p), p.uid))
        for p in least_first:
            if projected < threshold:
                break
            down(p)
    elif state == "idle":
        wanting = [p for p in pods if p.throttled and p.allowed and p.quota_us < p.ceil_us and ops[p.uid] == "remain"]
        most_first = sorted(wanting, key=lambda p: (-_pressure(p)[0], -_pressure(p)[1], p.uid))
        for p in most_first:
            new = _milli(step_up(p), period_us)
            extra = max(min(new - _milli(p.quota_us, period_us), new - p.cpu_used), 0)
            if projected + extra < threshold:
                ops[p.uid] = "up"
                projected += extra
    return ops
