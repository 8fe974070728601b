"""Inline SVG charts for HTML reports: no scripts, no external assets."""

from __future__ import annotations

import math
from html import escape

from advisor.doc import Chart, Heatmap

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _fmt(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v/1000:g}k"
    return f"{v:g}"


def chart_svg(chart: Chart, width: int = 640, height: int = 300) -> str:
    """A line (or scatter) chart with axes, ticks and a legend."""
    pts = [(x, y) for s in chart.series for x, y in zip(s.x, s.y) if y is not None]
    if not pts:
        return f'<svg class="chart" role="img" width="{width}" height="40"><text x="8" y="24">{escape(chart.title)}: no data</text></svg>'

    def tx(v: float) -> float:
        return math.log10(v) if chart.log_x and v > 0 else v

    def ty(v: float) -> float:
        return math.log10(v) if chart.log_y and v > 0 else v

    xs = [tx(x) for x, _ in pts]
    ys = [ty(y) for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = (min(0.0, min(ys)) if not chart.log_y else min(ys)), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    ml, mr, mt, mb = 64, 16, 28, 44
    pw, ph = width - ml - mr, height - mt - mb

    def px(v: float) -> float:
        return ml + (tx(v) - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return mt + ph - (ty(v) - y0) / (y1 - y0) * ph

    parts = [f'<svg class="chart" role="img" aria-label="{escape(chart.title)}" xmlns="http://www.w3.org/2000/svg" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
             f'<text x="{ml}" y="18" class="title">{escape(chart.title)}</text>',
             f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#9ca3af"/>']
    for t in _ticks(y0, y1):
        yv = 10 ** t if chart.log_y else t
        y = py(yv)
        parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_fmt(yv)}</text>')
    for t in _ticks(x0, x1):
        xv = 10 ** t if chart.log_x else t
        x = px(xv)
        parts.append(f'<text x="{x:.1f}" y="{mt + ph + 16}" text-anchor="middle" class="tick">{_fmt(xv)}</text>')
    parts.append(f'<text x="{ml + pw / 2}" y="{height - 6}" text-anchor="middle" class="axis">{escape(chart.x_label)}</text>')
    parts.append(f'<text x="14" y="{mt + ph / 2}" text-anchor="middle" class="axis" '
                 f'transform="rotate(-90 14 {mt + ph / 2})">{escape(chart.y_label)}</text>')
    for i, s in enumerate(chart.series):
        color = PALETTE[i % len(PALETTE)]
        coords = [(px(x), py(y)) for x, y in zip(s.x, s.y) if y is not None and (not chart.log_x or x > 0)]
        if chart.kind == "line" and len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            parts.append(f'<polyline class="series" fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for x, y in coords:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')
        parts.append(f'<rect x="{ml + pw - 150}" y="{mt + 8 + i * 16}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{ml + pw - 136}" y="{mt + 17 + i * 16}" class="legend">{escape(s.label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def heat_color(v: float | None, lo: float, hi: float) -> str:
    """Red (slow) -> green (fast); grey for 'cannot run'."""
    if v is None:
        return "#e5e7eb"
    f = 0.0 if hi <= lo else (math.log(max(v, 1e-9)) - math.log(max(lo, 1e-9))) / (math.log(hi) - math.log(max(lo, 1e-9)))
    f = min(1.0, max(0.0, f))
    r, g = int(220 - 170 * f), int(80 + 120 * f)
    return f"rgb({r},{g},90)"


def heatmap_html(h: Heatmap) -> str:
    vals = [v for row in h.values for v in row if v is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    head = "".join(f"<th>{escape(c)}</th>" for c in h.col_labels)
    rows = []
    for label, row in zip(h.row_labels, h.values):
        cells = "".join(
            f'<td class="heat" style="background:{heat_color(v, lo, hi)}">{"✗" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.3g}"}</td>'
            for v in row)
        rows.append(f"<tr><th>{escape(label)}</th>{cells}</tr>")
    unit = f" ({escape(h.unit)})" if h.unit else ""
    return (f'<table class="heatmap"><caption>{escape(h.title)}{unit}</caption>'
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
