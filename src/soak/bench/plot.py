"""The latency-against-rate plot: p50 per offered rate (knee steps and fixed rates) per class."""

from __future__ import annotations

from typing import Any

from soak.report.svg import Chart, Line, render_chart


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
    chart = Chart("p50 latency against offered rate", "ms", lines, x_unit="offered q/s", dots=True)
    return render_chart(chart)
