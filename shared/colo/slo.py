"""Valid values of the node QoS strategies of a NodeSLO (REFERENCE.md §5), checked in one place.

Ranges are Koordinator's NodeSLO validation (percent fields 0..100, ``vm.watermark_scale_factor``
10..400, resctrl L3 ranges and MBA percent) plus the consistency of paired thresholds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colo.messages import (
    BEBudgetStrategy,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    MemoryQoSClass,
    MemoryQoSStrategy,
    NetQoSStrategy,
    OOMStrategy,
    ResctrlStrategy,
    SystemStrategy,
)

WATERMARK_SCALE_RANGE = (10, 400)
"""Accepted ``vm.watermark_scale_factor`` (Koordinator's SystemStrategy validation)."""

STRATEGY_FIELDS = ("cpu_suppress", "memory_evict", "cpu_evict", "cpu_burst", "memory_qos", "resctrl", "blkio",
                   "system", "oom", "net_qos", "be_budget")
"""NodeSLO fields whose values :func:`strategy_problems` checks."""


def strategies_of(slo: object) -> dict[str, Any]:
    """The checked strategy fields of a NodeSLO-shaped object (NodeSLO, a service's default policy)."""
    return {name: getattr(slo, name) for name in STRATEGY_FIELDS if hasattr(slo, name)}


def _range(out: list[str], name: str, value: int | None, lo: int = 0, hi: int = 100) -> None:
    if value is not None and not lo <= value <= hi:
        out.append(f"{name} must be within {lo}..{hi}, got {value}")


def _memory_qos_problems(m: MemoryQoSStrategy, where: str) -> list[str]:
    out: list[str] = []
    classes: list[tuple[str, MemoryQoSClass | None]] = [
        (where, MemoryQoSClass(min_percent=m.min_percent, low_percent=m.low_percent,
                               throttling_percent=m.throttling_percent)),
        (f"{where}.lsr", m.lsr), (f"{where}.ls", m.ls), (f"{where}.be", m.be)]
    for name, c in classes:
        if c is not None:
            for field in ("min_percent", "low_percent", "throttling_percent"):
                _range(out, f"{name}.{field}", getattr(c, field))
    return out


def strategy_problems(values: Mapping[str, Any], where: str = "") -> list[str]:
    """Every out-of-range value among the strategies of ``values`` (NodeSLO field name → strategy
    struct; other fields and missing ones are skipped), each prefixed ``<where>.`` when ``where`` is set.
    The node agent refuses a NodeSLO with any of them; the slo-manager refuses the configuration that
    would render one.

    Percents within 0..100; memory eviction ``lower_percent`` ≤ ``threshold_percent``; CPU eviction
    ``lower_percent`` ≤ ``upper_percent``; cool-downs and ``memory_evict.pressure_hold_s`` ≥ 0 s and
    ``cpu_evict.window_s`` > 0 s; CPU burst ``burst_percent`` ≥ 0, ``quota_scale_max_percent`` ≥ 100,
    ``quota_burst_period_s`` ≥ −1, ``scale_down_unthrottled_rounds`` ≥ 0; resctrl
    0 ≤ L3 start < end ≤ 100 and MBA 1..100; BE block I/O devices ``MAJOR:MINOR``, once each, limits ≥ 0;
    system (when enabled) ``min_free_kbytes_factor`` > 0 and ``watermark_scale_factor`` within
    :data:`WATERMARK_SCALE_RANGE`; the ``oom`` and ``net_qos`` checks of :func:`isolation_problems`; BE budget
    ``target_increase_percent`` a finite number > 0, ``max_percent`` within 0..100 and (when enabled) at or
    above ``cpu_suppress.threshold_percent`` (its floor), ``step_percent`` within 1..100, ``hold_s`` a finite
    number ≥ 0.
    """
    out: list[str] = []
    w = f"{where}." if where else ""
    cs = values.get("cpu_suppress")
    if isinstance(cs, CPUSuppressStrategy):
        _range(out, f"{w}cpu_suppress.threshold_percent", cs.threshold_percent)
        _range(out, f"{w}cpu_suppress.min_percent", cs.min_percent)
    me = values.get("memory_evict")
    if isinstance(me, MemoryEvictStrategy):
        _range(out, f"{w}memory_evict.threshold_percent", me.threshold_percent)
        _range(out, f"{w}memory_evict.lower_percent", me.lower_percent)
        if me.lower_percent is not None and me.lower_percent > me.threshold_percent:
            out.append(f"{w}memory_evict.lower_percent {me.lower_percent} must not exceed "
                       f"threshold_percent {me.threshold_percent}")
        if me.cooldown_s < 0:
            out.append(f"{w}memory_evict.cooldown_s must be >= 0, got {me.cooldown_s}")
        if not 0 <= me.pressure_hold_s < float("inf"):  # NaN fails both ways: the hold would never end
            out.append(f"{w}memory_evict.pressure_hold_s must be a finite number >= 0, got {me.pressure_hold_s}")
    ce = values.get("cpu_evict")
    if isinstance(ce, CPUEvictStrategy):
        for field in ("upper_percent", "lower_percent", "usage_threshold_percent"):
            _range(out, f"{w}cpu_evict.{field}", getattr(ce, field))
        if ce.lower_percent > ce.upper_percent:
            out.append(f"{w}cpu_evict.lower_percent {ce.lower_percent} must not exceed "
                       f"upper_percent {ce.upper_percent}")
        if ce.window_s <= 0:
            out.append(f"{w}cpu_evict.window_s must be > 0, got {ce.window_s}")
        if ce.cooldown_s < 0:
            out.append(f"{w}cpu_evict.cooldown_s must be >= 0, got {ce.cooldown_s}")
    cb = values.get("cpu_burst")
    if isinstance(cb, CPUBurstStrategy):
        if cb.burst_percent < 0:
            out.append(f"{w}cpu_burst.burst_percent must be >= 0, got {cb.burst_percent}")
        if cb.quota_scale_max_percent < 100:
            out.append(f"{w}cpu_burst.quota_scale_max_percent must be >= 100, got {cb.quota_scale_max_percent}")
        _range(out, f"{w}cpu_burst.share_pool_threshold_percent", cb.share_pool_threshold_percent)
        if cb.quota_burst_period_s < -1:
            out.append(f"{w}cpu_burst.quota_burst_period_s must be >= -1 (-1 = no cap), "
                       f"got {cb.quota_burst_period_s}")
        if cb.scale_down_unthrottled_rounds < 0:
            out.append(f"{w}cpu_burst.scale_down_unthrottled_rounds must be >= 0 (0 = never), "
                       f"got {cb.scale_down_unthrottled_rounds}")
    mq = values.get("memory_qos")
    if isinstance(mq, MemoryQoSStrategy):
        out += _memory_qos_problems(mq, f"{w}memory_qos")
    rc = values.get("resctrl")
    if isinstance(rc, ResctrlStrategy):
        for name, cfg in (("lsr", rc.lsr), ("ls", rc.ls), ("be", rc.be)):
            if not 0 <= cfg.l3_start_percent < cfg.l3_end_percent <= 100:
                out.append(f"{w}resctrl.{name}: need 0 <= l3_start_percent < l3_end_percent <= 100, "
                           f"got {cfg.l3_start_percent}..{cfg.l3_end_percent}")
            _range(out, f"{w}resctrl.{name}.mba_percent", cfg.mba_percent, lo=1)
    bio = values.get("blkio")
    if isinstance(bio, BlkIOStrategy):
        seen: set[str] = set()
        for lim in bio.be:
            parts = lim.device.split(":")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                out.append(f"{w}blkio.be device {lim.device!r} must be 'MAJOR:MINOR'")
            if lim.device in seen:
                out.append(f"{w}blkio.be device {lim.device} listed twice")
            seen.add(lim.device)
            if min(lim.read_bps, lim.write_bps, lim.read_iops, lim.write_iops) < 0:
                out.append(f"{w}blkio.be device {lim.device}: limits must be >= 0 (0 = none)")
    sy = values.get("system")
    if isinstance(sy, SystemStrategy) and sy.enabled:
        if sy.min_free_kbytes_factor <= 0:
            out.append(f"{w}system.min_free_kbytes_factor must be > 0, got {sy.min_free_kbytes_factor}")
        _range(out, f"{w}system.watermark_scale_factor", sy.watermark_scale_factor, *WATERMARK_SCALE_RANGE)
    bb = values.get("be_budget")
    if isinstance(bb, BEBudgetStrategy):
        out += _be_budget_problems(bb, cs if isinstance(cs, CPUSuppressStrategy) else None, f"{w}be_budget")
    return out + isolation_problems(values, w)


def _be_budget_problems(bb: BEBudgetStrategy, cs: CPUSuppressStrategy | None, where: str) -> list[str]:
    out: list[str] = []
    if not 0 < bb.target_increase_percent < float("inf"):
        out.append(f"{where}.target_increase_percent must be a finite number > 0, got {bb.target_increase_percent}")
    _range(out, f"{where}.max_percent", bb.max_percent)
    _range(out, f"{where}.step_percent", bb.step_percent, lo=1)
    if not 0 <= bb.hold_s < float("inf"):
        out.append(f"{where}.hold_s must be a finite number >= 0, got {bb.hold_s}")
    if bb.enabled and cs is not None and bb.max_percent < cs.threshold_percent:
        out.append(f"{where}.max_percent {bb.max_percent} must not be below cpu_suppress.threshold_percent "
                   f"{cs.threshold_percent} (the budget's floor)")
    return out


IFNAME_MAX = 15
"""Longest network interface name the kernel accepts (``IFNAMSIZ`` - 1)."""


def _ifname_ok(name: str) -> bool:
    return 0 < len(name) <= IFNAME_MAX and name not in (".", "..") and not any(
        c in name for c in "/: \t\n") and name.isprintable()


def isolation_problems(values: Mapping[str, Any], w: str = "") -> list[str]:
    """Every problem of the ``oom`` and ``net_qos`` strategies among ``values``, prefixed ``w``
    (docs/node-agent.md "OOM priority", "Network QoS"): OOM scores within -1000..1000 and ordered
    ``lsr_score_adj`` < ``ls_max_score_adj`` < ``be_score_adj``; network QoS, when enabled, an interface name
    the kernel accepts, rates > 0 bits/s and ``ls_bps`` + ``be_bps`` <=
    ``total_bps`` (HTB guarantees only what the parent class holds)."""
    out: list[str] = []
    oom = values.get("oom")
    if isinstance(oom, OOMStrategy):
        for field in ("lsr_score_adj", "ls_max_score_adj", "be_score_adj"):
            _range(out, f"{w}oom.{field}", getattr(oom, field), -1000, 1000)
        if not oom.lsr_score_adj < oom.ls_max_score_adj < oom.be_score_adj:
            out.append(f"{w}oom: need lsr_score_adj < ls_max_score_adj < be_score_adj (BE killed first, "
                       f"LSE/LSR last), got {oom.lsr_score_adj}, {oom.ls_max_score_adj}, {oom.be_score_adj}")
    nq = values.get("net_qos")
    if isinstance(nq, NetQoSStrategy) and nq.enabled:
        if not _ifname_ok(nq.interface):
            out.append(f"{w}net_qos.interface must be a network interface name (1..{IFNAME_MAX} characters, "
                       f"no '/', ':' or spaces), got {nq.interface!r}")
        for field in ("total_bps", "ls_bps", "be_bps"):
            if getattr(nq, field) <= 0:
                out.append(f"{w}net_qos.{field} must be > 0 bits/s when enabled, got {getattr(nq, field)}")
        if nq.ls_bps + nq.be_bps > nq.total_bps:
            out.append(f"{w}net_qos: ls_bps + be_bps ({nq.ls_bps + nq.be_bps}) must not exceed total_bps "
                       f"({nq.total_bps})")
    return out
