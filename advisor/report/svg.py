"""Inline SVG charts for HTML reports: no scripts, no external assets."""

from __future__ import annotations

import math
from html import escape as _html_escape

from advisor.doc import Chart, Heatmap
from advisor.untrusted import printable

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")


def escape(text: str) -> str:
    """XML-escaped, control characters shown as escapes (they are not allowed in SVG at all)."""
    return _html_escape(printable(str(text)))


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


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks for a log axis, in log10 units: decades, plus 2x and 5x when the range is short."""
    first, last = math.floor(lo), math.ceil(hi)
    steps = (1.0,) if last - first > 2 else (1.0, 2.0, 5.0)
    out = [math.log10(m * 10 ** e) for e in range(first, last + 1) for m in steps]
    return [t for t in out if lo - 1e-9 <= t <= hi + 1e-9] or [lo]


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1000:
        return f"{v / 1000:.3g}k"
    return f"{v:.3g}"


def chart_svg(chart: Chart, width: int = 720, height: int = 300) -> str:
    """A line (or scatter) chart with axes, ticks and a legend right of the plot."""
    pts = [(x, y) for s in chart.series for x, y in zip(s.x, s.y)
           if y is not None and (not chart.log_x or x > 0) and (not chart.log_y or y > 0)]
    if not pts:
        return (f'<svg class="chart" role="img" xmlns="http://www.w3.org/2000/svg" width="{width}" height="40">'
                f'<text x="8" y="24">{escape(chart.title)}: no data</text></svg>')

    def tx(v: float) -> float:
        return math.log10(v) if chart.log_x else v

    def ty(v: float) -> float:
        return math.log10(v) if chart.log_y else v

    xs = [tx(x) for x, _ in pts]
    ys = [ty(y) for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = (min(ys) if chart.log_y else min(0.0, min(ys))), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    if y1 == y0:
        y1 = y0 + 1
    legend_w = min(260, 24 + 6.6 * max(len(s.label) for s in chart.series))
    ml, mr, mt, mb = 64, int(legend_w) + 16, 28, 44
    pw, ph = width - ml - mr, height - mt - mb

    def px(v: float) -> float:
        return ml + (tx(v) - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return mt + ph - (ty(v) - y0) / (y1 - y0) * ph

    parts = [f'<svg class="chart" role="img" aria-label="{escape(chart.title)}" xmlns="http://www.w3.org/2000/svg" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
             f'<text x="{ml}" y="18" class="title">{escape(chart.title)}</text>',
             f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#9ca3af"/>']
    for t in (_log_ticks(y0, y1) if chart.log_y else _ticks(y0, y1)):
        yv = 10 ** t if chart.log_y else t
        y = py(yv)
        parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_fmt(yv)}</text>')
    for t in (_log_ticks(x0, x1) if chart.log_x else _ticks(x0, x1)):
        xv = 10 ** t if chart.log_x else t
        x = px(xv)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt}" y2="{mt + ph}" stroke="#f3f4f6"/>')
        parts.append(f'<text x="{x:.1f}" y="{mt + ph + 16}" text-anchor="middle" class="tick">{_fmt(xv)}</text>')
    parts.append(f'<text x="{ml + pw / 2}" y="{height - 6}" text-anchor="middle" class="axis">'
                 f'{escape(chart.x_label)}</text>')
    parts.append(f'<text x="14" y="{mt + ph / 2}" text-anchor="middle" class="axis" '
                 f'transform="rotate(-90 14 {mt + ph / 2})">{escape(chart.y_label)}</text>')
    lx = ml + pw + 14
    for i, s in enumerate(chart.series):
        color = PALETTE[i % len(PALETTE)]
        coords = [(px(x), py(y)) for x, y in zip(s.x, s.y)
                  if y is not None and (not chart.log_x or x > 0) and (not chart.log_y or y > 0)]
        if chart.kind == "line" and len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            parts.append(f'<polyline class="series" fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        r = 3 if len(coords) > 1 else 5          # a lone operating point is drawn larger
        for x, y in coords:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}"/>')
        parts.append(f'<rect x="{lx}" y="{mt + 4 + i * 18}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{lx + 15}" y="{mt + 13 + i * 18}" class="legend">{escape(s.label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def heat_color(v: float | None, lo: float, hi: float) -> str:
    """Light red (slow) -> light green (fast) on a log scale, dark text stays readable; grey for
    'cannot run'."""
    if v is None:
        return "#e5e7eb"
    low = math.log(max(lo, 1e-9))
    f = 0.0 if hi <= lo else (math.log(max(v, 1e-9)) - low) / (math.log(hi) - low)
    f = min(1.0, max(0.0, f))
    return f"hsl({f * 125:.0f},70%,{80 - 8 * f:.0f}%)"


def _cell_text(v: float | None) -> str:
    if v is None:
        return "✗"
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def heatmap_svg(h: Heatmap, cell_w: int = 96, cell_h: int = 22) -> str:
    """The heat-map as inline SVG: one coloured cell per row x column with its value written in it."""
    vals = [v for row in h.values for v in row if v is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    label_w = max(120, 7 * max((len(r) for r in h.row_labels), default=10) + 16)
    top = 46
    width = max(label_w + cell_w * max(1, len(h.col_labels)) + 8, 7 * len(h.title + h.unit) + 40, 560)
    height = top + cell_h * len(h.row_labels) + 28
    unit = f" ({h.unit})" if h.unit else ""
    parts = [f'<svg class="chart heatmap" role="img" aria-label="{escape(h.title)}" xmlns="http://www.w3.org/2000/svg" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
             f'<text x="4" y="16" class="title">{escape(h.title)}{escape(unit)}</text>']
    for j, col in enumerate(h.col_labels):
        x = label_w + j * cell_w + cell_w / 2
        parts.append(f'<text x="{x:.0f}" y="{top - 8}" text-anchor="middle" class="axis">{escape(col)}</text>')
    for i, (label, row) in enumerate(zip(h.row_labels, h.values)):
        y = top + i * cell_h
        parts.append(f'<text x="{label_w - 8}" y="{y + cell_h * 0.68:.1f}" text-anchor="end" class="tick">'
                     f'{escape(label)}</text>')
        for j, v in enumerate(row):
            x = label_w + j * cell_w
            parts.append(f'<rect class="cell" x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" '
                         f'fill="{heat_color(v, lo, hi)}"><title>{escape(label)} / {escape(h.col_labels[j])}: '
                         f'{_cell_text(v)}</title></rect>')
            parts.append(f'<text x="{x + (cell_w - 2) / 2:.0f}" y="{y + cell_h * 0.68:.1f}" text-anchor="middle" '
                         f'class="cellval">{_cell_text(v)}</text>')
    y = top + cell_h * len(h.row_labels) + 18
    if vals:
        parts.append(f'<text x="4" y="{y}" class="legend">red = slowest ({_cell_text(lo)}), '
                     f'green = fastest ({_cell_text(hi)}), grey ✗ = does not run</text>')
    parts.append("</svg>")
    return "\n".join(parts)
