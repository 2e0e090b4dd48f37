"""The latency-against-rate plot: p50 per offered rate (knee steps and fixed rates) per class."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from soak.report.svg import (
    BOTTOM,
    HEIGHT,
    LEFT,
    PALETTE,
    RIGHT,
    TOP,
    WIDTH,
    Line,
    _legend,
    _y_axis,
    format_value,
    nice_step,
    y_range,
)


def rate_points(row: dict[str, Any]) -> list[tuple[float, float]]:
    """(offered q/s, p50 ms) of a class's knee steps and fixed-rate runs, by rate."""
    pts: list[tuple[float, float]] = []
    knee = row.get("knee") or {}
    for s in knee.get("steps", []):
        if s.get("p50_ms") is not None:
            pts.append((s["offered_qps"], s["p50_ms"]))
    for r in row.get("fixed", []):
        if r["latency_ms"].get("p50") is not None:
            pts.append((r["offered_qps"], r["latency_ms"]["p50"]))
    return sorted(pts)


def latency_chart(classes: list[dict[str, Any]]) -> str:
    lines = [Line(f"{c['name']} p50", rate_points(c)) for c in classes]
    lines = [ln for ln in lines if ln.points]
    if not lines:
        return "<p>No open-loop steps to plot.</p>"
    x_max = max(x for ln in lines for x, _ in ln.points) or 1.0
    x_step = nice_step(x_max)
    x_max = math.ceil(x_max / x_step) * x_step
    y_lo, y_hi = y_range(lines)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + plot_w * x / x_max

    def py(y: float) -> float:
        return TOP + plot_h * (1 - (y - y_lo) / (y_hi - y_lo))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'width="100%" role="img" aria-label="p50 latency against offered rate">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="frame"/>',
    ]
    out += _y_axis(y_lo, y_hi, "ms", py, plot_w)
    x = 0.0
    while x <= x_max + 1e-9:
        anchor = "end" if x + x_step > x_max + 1e-9 else "middle"  # the last stays inside
        out.append(
            f'<text x="{px(x):.1f}" y="{HEIGHT - 14}" text-anchor="{anchor}">'
            f"{format_value(x)}</text>"
        )
        x += x_step
    out.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 2}" text-anchor="end">offered q/s</text>')
    for i, line in enumerate(lines):
        color = PALETTE[i % len(PALETTE)]
        pts = [(px(a), py(b)) for a, b in line.points if math.isfinite(b)]
        d = "M" + " L".join(f"{a:.1f},{b:.1f}" for a, b in pts)
        out.append(
            f'<path class="series" data-series="{escape(line.name)}" data-points="{len(pts)}" '
            f'd="{d}" stroke="{color}" fill="none" stroke-width="1.5"/>'
        )
        out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{color}"/>' for a, b in pts]
    out += _legend(lines)
    out.append("</svg>")
    return "\n".join(out)
