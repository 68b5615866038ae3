"""Inline SVG line charts of the demo report (no plotting dependency).

Lines that coincide stay visible: every series has a colour, a dash pattern and a marker
(:class:`LineStyle`); solid lines are drawn first and dashed ones over them, so a dashed line shows the line
it covers through its gaps; each series puts its markers at its own phase of the points, so coinciding
series do not hide each other's markers. The legend keys colour, dash and marker with a sample of each line.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

Points = list[tuple[float, float]]
"""(hours of virtual time, value) pairs of one series."""


@dataclass(frozen=True)
class LineStyle:
    """How one series is drawn: ``color`` (CSS), ``dash`` (SVG ``stroke-dasharray``, "" = solid) and
    ``marker`` (``circle``, ``square``, ``triangle``, ``diamond`` or ``none``)."""

    color: str
    dash: str = ""
    marker: str = "circle"


DASHED = "6,3"
"""The dash pattern of baseline series (and of the second part of a pair, e.g. mid, runtime)."""

RUN_STYLES: dict[str, LineStyle] = {
    "baseline": LineStyle("#7f7f7f", DASHED, "circle"),
    "colo": LineStyle("#1f77b4", "", "square"),
    "colo-adaptive": LineStyle("#2ca02c", "6,2,1,2", "diamond"),
    "colo-adaptive-mem": LineStyle("#ff7f0e", "1,2", "triangle"),
}
"""Every chart draws baseline grey and dashed with circles, colo blue and solid with squares, colo-adaptive
green dash-dotted with diamonds, colo-adaptive-mem orange dotted with triangles."""

FALLBACK = LineStyle("#d62728", "2,2", "triangle")
"""The style of a series with none given (a run of another name)."""

MARKERS_PER_SERIES = 8
"""About how many markers a series gets (more would clutter a 6 h chart of 361 points)."""

LEGEND_ROW_PX = 15
LEGEND_SAMPLE_PX = 26


def nice_step(span: float, target: int = 4) -> float:
    """A 1, 2, 2.5 or 5 × 10^k step that cuts ``span`` into about ``target`` intervals."""
    if span <= 0:
        return 1.0
    raw = span / target
    mag: float = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def marker(kind: str, x: float, y: float, color: str, r: float = 3.0) -> str:
    """One marker of ``kind`` centred on (x, y) px, white-filled so that a line under it shows its shape."""
    common = f'fill="white" stroke="{color}" stroke-width="1.3"'
    if kind == "square":
        return f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" {common}/>'
    if kind == "triangle":
        return (f'<polygon points="{x:.1f},{y - r - 0.5:.1f} {x - r:.1f},{y + r - 0.5:.1f} '
                f'{x + r:.1f},{y + r - 0.5:.1f}" {common}/>')
    if kind == "diamond":
        return (f'<polygon points="{x:.1f},{y - r - 0.5:.1f} {x + r + 0.5:.1f},{y:.1f} {x:.1f},{y + r + 0.5:.1f} '
                f'{x - r - 0.5:.1f},{y:.1f}" {common}/>')
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" {common}/>'
    return ""


def _legend(names: list[str], styles: dict[str, LineStyle], x0: float, y0: float,
            width: float) -> tuple[list[str], float]:
    """Legend entries (line sample with dash and marker, then the name) wrapped to ``width`` px; returns the
    SVG parts and the height used."""
    parts: list[str] = []
    x, y = x0, y0
    for name in names:
        st = styles[name]
        w = LEGEND_SAMPLE_PX + 6 + 6.2 * len(name) + 14
        if x > x0 and x + w > x0 + width:
            x, y = x0, y + LEGEND_ROW_PX
        dash = f' stroke-dasharray="{st.dash}"' if st.dash else ""
        parts.append(f'<g class="legend-entry" data-series="{html.escape(name)}" data-dash="{st.dash or "solid"}">'
                     f'<line x1="{x:.1f}" x2="{x + LEGEND_SAMPLE_PX:.1f}" y1="{y - 4:.1f}" y2="{y - 4:.1f}" '
                     f'stroke="{st.color}" stroke-width="2"{dash}/>'
                     f'{marker(st.marker, x + LEGEND_SAMPLE_PX / 2, y - 4, st.color)}'
                     f'<text x="{x + LEGEND_SAMPLE_PX + 5:.1f}" y="{y:.1f}">{html.escape(name)}</text></g>')
        x += w
    return parts, y - y0 + LEGEND_ROW_PX


def svg_chart(title: str, series: dict[str, Points], y_label: str, y_max: float | None = None,
              styles: dict[str, LineStyle] | None = None, width: int = 600, height: int = 260) -> str:
    """An inline SVG line chart of ``series`` (name → (hours, value) points) against virtual hours.

    ``styles`` gives a series' :class:`LineStyle`; by default :data:`RUN_STYLES` of its name, else
    :data:`FALLBACK`. ``y_max`` fixes the top of the y axis (e.g. 1.0 for fractions), else it is the data's
    maximum rounded up to a :func:`nice_step`. Height grows with the rows the legend needs.
    """
    all_styles = {name: (styles or {}).get(name) or RUN_STYLES.get(name, FALLBACK) for name in series}
    pad_l, pad_r, pad_b = 50, 10, 30
    legend, legend_h = _legend(list(series), all_styles, pad_l, 32, width - pad_l - pad_r)
    pad_t = 24 + legend_h
    height += round(legend_h) - LEGEND_ROW_PX
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    ys = [y for pts in series.values() for _, y in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    span = y_max if y_max is not None else max(max(ys), 1e-9) * 1.05
    step = nice_step(span)
    top = step * math.ceil(span / step)
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def px(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * w

    def py(y: float) -> float:
        return pad_t + h - min(max(y / top, 0.0), 1.0) * h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<text x="{pad_l}" y="14" font-weight="bold">{html.escape(title)}</text>',
             f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>']
    v = 0.0
    while v <= top + step / 2:
        y = py(v)
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{pad_l - 4}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
        v = round(v + step, 10)
    x_step = nice_step(x1 - x0, target=6)
    x = math.ceil(x0 / x_step) * x_step
    while x <= x1 + 1e-9:
        parts.append(f'<text x="{px(x):.1f}" y="{pad_t + h + 12}" text-anchor="middle">{x:g}</text>')
        x = round(x + x_step, 10)
    parts.append(f'<text x="{pad_l + w / 2}" y="{height - 4}" text-anchor="middle">hours (virtual time)</text>')
    parts.append(f'<text x="12" y="{pad_t + h / 2}" transform="rotate(-90 12 {pad_t + h / 2})" '
                 f'text-anchor="middle">{html.escape(y_label)}</text>')
    names = list(series)
    # solid first, dashed over them: where two lines coincide the dashed one's gaps show the solid one
    order = sorted(range(len(names)), key=lambda i: (bool(all_styles[names[i]].dash), i))
    for rank, i in enumerate(order):
        name, pts = names[i], series[names[i]]
        st = all_styles[name]
        if not pts:
            continue
        dash = f' stroke-dasharray="{st.dash}"' if st.dash else ""
        path = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in pts)
        parts.append(f'<polyline class="series" data-series="{html.escape(name)}" fill="none" stroke="{st.color}" '
                     f'stroke-width="1.6"{dash} points="{path}"/>')
        every = max(1, len(pts) // MARKERS_PER_SERIES)
        phase = (rank * every) // max(1, len(names))  # each series its own phase: coinciding markers side by side
        parts.extend(marker(st.marker, px(a), py(b), st.color) for a, b in pts[phase::every])
    parts.extend(legend)
    parts.append("</svg>")
    return "".join(parts)
