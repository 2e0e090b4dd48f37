"""Line charts as inline SVG: no JavaScript, no external assets, readable when printed.

Pure: a chart is made from plain data (x in seconds from the run's start,
y in the plot's unit) and returned as an SVG string. Each series is one
<path class="series" data-series="NAME" data-points="N">, so a test can find
the plotted data in the DOM. A line draws at most two points per pixel column
(its lowest and highest), however long the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

Scale = Callable[[float], float]  # data to SVG coordinates

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")

WIDTH, HEIGHT = 1000, 260
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 30, 34
PLOT_WIDTH_PX = WIDTH - LEFT - RIGHT


@dataclass
class Line:
    name: str
    # (seconds from run start, value in the plot's unit); a None value is a gap
    points: Sequence[tuple[float, float | None]]


@dataclass
class Marker:
    x_s: float
    label: str
    # "phase" (dashed grey line), "event" (red tick at the top) or "end" (the run's
    # end: a dark tick, not an error)
    kind: str = "phase"


@dataclass
class Chart:
    title: str
    unit: str
    lines: list[Line]
    markers: list[Marker] = field(default_factory=list)
    x_max_s: float | None = None  # the run's length: all charts share the time axis
    # None: x is seconds since the run's start; else x is a plain value with this label
    # (e.g. "offered q/s" for the bench's latency-against-rate plot).
    x_unit: str | None = None
    dots: bool = False  # a dot on every point (few points, each a measurement)


def nice_step(span: float, target_ticks: int = 5) -> float:
    """1, 2 or 5 times a power of ten, giving about target_ticks ticks over span."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / target_ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def time_step_s(span_s: float) -> float:
    """A tick step that reads as time: seconds, minutes, hours, days."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
                 21600, 43200, 86400, 172800):  # fmt: skip
        if span_s / step <= 8:
            return float(step)
    return 86400.0 * math.ceil(span_s / 86400 / 8)


def format_offset(x_s: float, step_s: float) -> str:
    s = round(x_s)
    if step_s < 60:
        return f"{s // 60}:{s % 60:02d}"
    if step_s < 86400:
        return f"{s // 3600}:{s // 60 % 60:02d}"
    return f"{s / 86400:g}d"


def format_value(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def y_range(lines: Sequence[Line]) -> tuple[float, float]:
    ys = [y for line in lines for _, y in line.points if y is not None and math.isfinite(y)]
    if not ys:
        return 0.0, 1.0
    lo, hi = min(ys), max(ys)
    lo = min(lo, 0.0)  # from zero: a 1% wobble must not look like a cliff
    if hi == lo:
        hi, lo = hi + (abs(hi) * 0.1 or 1.0), lo - (abs(lo) * 0.1 if lo else 0.0)
    step = nice_step(hi - lo)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step


def render_chart(chart: Chart) -> str:
    x_max = chart.x_max_s or max((x for ln in chart.lines for x, _ in ln.points), default=1.0)
    x_max = max(x_max, 1.0)
    if chart.x_unit is not None:  # a value axis ends on a round tick
        x_max = math.ceil(x_max / nice_step(x_max)) * nice_step(x_max)
    y_lo, y_hi = y_range(chart.lines)
    plot_w, plot_h = PLOT_WIDTH_PX, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + plot_w * x / x_max

    def py(y: float) -> float:
        return TOP + plot_h * (1 - (y - y_lo) / (y_hi - y_lo))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="100%" role="img" aria-label="{escape(chart.title)}">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="frame"/>',
    ]
    out += _y_axis(y_lo, y_hi, chart.unit, py, plot_w)
    out += _x_axis(x_max, px) if chart.x_unit is None else _value_axis(x_max, chart.x_unit, px)
    out += _markers(chart.markers, px, x_max)
    for i, line in enumerate(chart.lines):
        color = PALETTE[i % len(PALETTE)]
        segments = [per_column(seg) for seg in _segments(line.points, px, py, x_max)]
        pts = [pt for seg in segments for pt in seg]
        if not pts:
            continue
        d = " ".join("M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in seg) for seg in segments)
        out.append(
            f'<path class="series" data-series="{escape(line.name)}" data-points="{len(pts)}" '
            f'd="{d}" stroke="{color}" fill="none" stroke-width="1.5"/>'
        )
        if chart.dots:
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>' for x, y in pts]
    out += _legend(chart.lines)
    out.append("</svg>")
    return "\n".join(out)


def _segments(
    points: Sequence[tuple[float, float | None]], px: Scale, py: Scale, x_max: float
) -> list[list[tuple[float, float]]]:
    """The line's runs of drawable points: a None or non-finite value (a gap) breaks it."""
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None or not math.isfinite(y):
            if out[-1]:
                out.append([])
        elif 0 <= x <= x_max:
            out[-1].append((px(x), py(y)))
    return [seg for seg in out if seg]


def per_column(pts: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """At most two points per pixel column: its lowest and highest, in drawing order.

    A week of 1-s samples draws as many points as the chart is wide, and a
    single-sample spike (or trough) is still drawn.
    """
    out: list[tuple[float, float]] = []
    column: list[tuple[float, float]] = []
    for pt in pts:
        if column and math.floor(pt[0]) != math.floor(column[0][0]):
            out += _extremes(column)
            column = []
        column.append(pt)
    return out + _extremes(column) if column else out


def _extremes(column: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(column) <= 2:
        return column
    lo = min(range(len(column)), key=lambda i: column[i][1])
    hi = max(range(len(column)), key=lambda i: column[i][1])
    return [column[i] for i in sorted({lo, hi})]


def _y_axis(y_lo: float, y_hi: float, unit: str, py: Scale, plot_w: float) -> list[str]:
    step = nice_step(y_hi - y_lo)
    out = []
    n = round((y_hi - y_lo) / step)
    for i in range(n + 1):
        y = y_lo + i * step
        yy = py(y)
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">'
            f"{escape(format_value(y))}</text>"
        )
    mid_y = TOP + (HEIGHT - TOP - BOTTOM) / 2
    out.append(
        f'<text transform="translate(14 {mid_y:.0f}) rotate(-90)" text-anchor="middle" '
        f'class="unit">{escape(unit)}</text>'
    )
    return out


def _x_axis(x_max: float, px: Scale) -> list[str]:
    step = time_step_s(x_max)
    out = []
    x = 0.0
    while x <= x_max + 1e-9:
        xx = px(x)
        out.append(
            f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" class="grid"/>'
        )
        out.append(
            f'<text x="{xx:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" class="tick">'
            f"{format_offset(x, step)}</text>"
        )
        x += step
    out.append(
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 4}" text-anchor="end" class="unit">'
        "time since start</text>"
    )
    return out


def _value_axis(x_max: float, unit: str, px: Scale) -> list[str]:
    step = nice_step(x_max)
    out = []
    x = 0.0
    while x <= x_max + 1e-9:
        anchor = "end" if x + step > x_max + 1e-9 else "middle"  # the last stays inside
        out.append(
            f'<text x="{px(x):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="{anchor}" '
            f'class="tick">{format_value(x)}</text>'
        )
        x += step
    out.append(
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 4}" text-anchor="end" class="unit">'
        f"{escape(unit)}</text>"
    )
    return out


def _markers(markers: Sequence[Marker], px: Scale, x_max: float) -> list[str]:
    out = []
    for m in markers:
        if not 0 <= m.x_s <= x_max:
            continue
        xx = px(m.x_s)
        label = escape(m.label)
        if m.kind == "phase":
            out.append(
                f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                f'class="phase"><title>{label}</title></line>'
            )
            out.append(f'<text x="{xx + 3:.1f}" y="{TOP + 11}" class="phase-label">{label}</text>')
        else:  # an event (red), or the run's end (dark: not an error)
            cls = "end" if m.kind == "end" else "event"
            out.append(
                f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{TOP}" y2="{TOP + 10}" '
                f'class="{cls}"><title>{label}</title></line>'
            )
    return out


def _legend(lines: Sequence[Line]) -> list[str]:
    out = []
    x = LEFT
    for i, line in enumerate(lines):
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x}" y="8" width="12" height="4" fill="{color}"/>')
        out.append(f'<text x="{x + 16}" y="14" class="legend">{escape(line.name)}</text>')
        x += 24 + 7 * len(line.name)
    return out
