"""Profiler settings (environment prefix ``COLO_PROFILER``), defaults from REFERENCE.md §7."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from colo_profiler.predict import PeakPredictorConfig

ENV_PREFIX = "COLO_PROFILER"
"""Environment prefix of the profiler's own settings."""

Seconds = Annotated[float, msgspec.Meta(gt=0)]
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]
Price = Annotated[float, msgspec.Meta(ge=0, le=1000)]

_PREDICTOR = PeakPredictorConfig()
"""Defaults of the learned margin rule, shared with ``bench/prediction.py``'s ``ours``."""


class ProfilerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings of the profiler service; every default is REFERENCE.md §7 unless noted."""

    cpu_half_life_s: Seconds = 12 * 3600.0
    """Half-life of the CPU histograms, seconds (12 h)."""
    memory_half_life_s: Seconds = 24 * 3600.0
    """Half-life of the memory histograms, seconds (24 h)."""
    cpu_percentile: Fraction = 0.95
    """Percentile of the CPU peak (p95)."""
    memory_percentile: Fraction = 0.98
    """Percentile of the memory peak (p98)."""
    margin_percent: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 10
    """Safety margin on top of the percentile: peak = percentile × (100 + margin)/100."""
    cold_start_s: Annotated[float, msgspec.Meta(ge=0)] = 24 * 3600.0
    """Pods younger than this count at their full request (24 h)."""
    expiry_s: Seconds = 30 * 60.0
    """Models (pods, nodes) unseen in metrics for this long are dropped (30 min)."""
    publish_interval_s: Annotated[float, msgspec.Meta(ge=0)] = 60.0
    """Minimum time between two NodeProfiles of one node, seconds (one report interval)."""
    republish_interval_s: Annotated[float, msgspec.Meta(ge=0)] = 600.0
    """A due NodeProfile equal to the last one sent (all but ``at``) is only re-sent after this long, seconds;
    0 sends every due profile (this project's choice: consumers keep the newest profile per node)."""
    tick_interval_s: Seconds = 10.0
    """Period of tick() under the wall clock, seconds (this project's choice)."""
    cold_start_from_workload: bool = True
    """A pod without a usable model of its own (cold start) whose workload (namespace, app) has a warm model
    is predicted from the workload's peak, capped by its request (this project's choice); False = the
    reference: such a pod counts at its full request."""
    checkpoint_interval_s: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    """Period of the model checkpoint to Redis, seconds; one is also written on stop and restored on start.
    0 = checkpoints off: none written, none restored (REFERENCE.md §7 asks for checkpoints; the period is
    this project's choice)."""
    peak_method: Literal["reference", "adaptive"] = "reference"
    """How a warm pod's own CPU and memory peaks are made: "reference" = percentile × (100 + margin_percent)/100
    (REFERENCE.md §7); "adaptive" = percentile + a margin learned from the pod's own past misses
    (colo_profiler.adaptive; this project's, measured in docs/profiler.md "Prediction accuracy")."""
    margin_window_s: Seconds = 24 * 3600.0
    """Adaptive: the period one residual covers (prediction at its start, actual peak over it), seconds (a day,
    as bench/prediction.py)."""
    residual_window: Annotated[int, msgspec.Meta(ge=1, le=1000)] = _PREDICTOR.residual_window
    """Adaptive: residuals (periods) each margin is chosen from (28, PeakPredictorConfig)."""
    cpu_violation_price: Price = _PREDICTOR.violation_price
    """Adaptive: cost of one missed CPU peak, in requested CPU held for one period (0.5, PeakPredictorConfig);
    higher → fewer misses, more headroom."""
    memory_violation_price: Price = _PREDICTOR.violation_price
    """Adaptive: the same for memory (0.5, PeakPredictorConfig)."""
    min_margin: Annotated[float, msgspec.Meta(ge=0, le=10)] = _PREDICTOR.min_margin
    """Adaptive: added to every learned margin, fraction of the request (0.002, PeakPredictorConfig)."""
