"""How much of an assigned pod's estimate a node metric does not contain yet (REFERENCE.md §4, with the
window of §2; §11 "Bursts of placements before the next metric overshoot thresholds unless recent
assignments are estimated").

A NodeMetric's node usage is a mean over its aggregation window ``[at − window_s, at]`` (300 s by
default), while its per-pod figures are each pod's mean over its own samples in that window, i.e. over
its life while it is younger than the window (the node agent's sim and host backends both). A pod
running steadily at ``used`` since ``t_start`` therefore adds about ``used × (at − t_start) / window_s``
to the node figure, not ``used``: a metric 90 s after a burst holds 30 % of the burst's usage.

The gap of a pod, per resource, is what the estimator adds on top of the node figure:

* no usage reported for the pod (not in the metric's pod list, or no metric): its estimate;
* reported, and running for the whole window before the metric (``at − t_start ≥ window_s``): 0,
  its usage is all in the node figure (Koordinator's "reflected in the metric");
* reported, younger than the window: ``max(estimate, used) − floor(used × (at − t_start) / window_s)``,
  the pod's expected usage (its estimate, or the usage it already shows when that is higher) less
  the share of its usage the node figure holds. When the pod's window is full this is the
  reference's ``max(estimate − used, 0)``; it is never negative.

Against a sum of per-pod figures instead of the node figure (LoadAware's prod-only usage), a reported
pod's usage is all there: its gap is the reference's ``max(estimate − used, 0)`` while the pod is
younger than the window, 0 after (``windowed=False``).

``t_start`` is the pod's assignment (bind) time: a pod starting later than its bind holds less of the
window than assumed by the delay's share. Times are rounded to milliseconds so that the share is
computed exactly in integers.
"""

from __future__ import annotations


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def unreported_gap(estimate: int, used: int | None, assigned_at: float, metric_at: float, window_s: float,
                   windowed: bool = True) -> int:
    """The gap of one resource (milli-cores or bytes, as ``estimate`` and ``used``) of a pod assigned at
    clock second ``assigned_at``, for a metric taken at ``metric_at`` over ``window_s`` seconds; ``used``
    is the pod's reported usage in that metric, None when it reported none. ``windowed``: against the
    node's windowed mean (True) or against the pod's own figure (module docstring). Raises ValueError
    for a NaN time when ``used`` is given."""
    if used is None:
        return estimate
    window = _ms(window_s)
    elapsed = _ms(metric_at) - _ms(assigned_at)
    if elapsed >= window:
        return 0
    if not windowed:
        return max(estimate - used, 0)
    contained = used * elapsed // window if elapsed > 0 else 0
    return max(estimate, used) - contained


def pod_gap(estimate: tuple[int, int], used: tuple[int, int] | None, assigned_at: float,
            metric_at: float, window_s: float, windowed: bool = True) -> tuple[int, int]:
    """(cpu milli-cores, memory bytes) :func:`unreported_gap` of both resources at once (the node
    table's loop over a node's pods: one pass instead of two calls)."""
    if used is None:
        return estimate
    window = round(window_s * 1000)
    elapsed = round(metric_at * 1000) - round(assigned_at * 1000)
    if elapsed >= window:
        return 0, 0
    ec, em = estimate
    uc, um = used
    if not windowed:
        return max(ec - uc, 0), max(em - um, 0)
    if elapsed <= 0:
        return max(ec, uc), max(em, um)
    return max(ec, uc) - uc * elapsed // window, max(em, um) - um * elapsed // window
