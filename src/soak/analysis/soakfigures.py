"""A soak run's figures for a comparison (soak.analysis.comparison): per-window values
of its load and its process over a span, the latency shown as the quantile of the span's
merged histograms. `soak compare` reads a run after its warm-up; a soak across an
upgrade compares its segments with them."""

from __future__ import annotations

from typing import Any

from soak.analysis.comparison import Figure, Figures
from soak.analysis.latency import span_latency_ms, stored_histograms

# The latency figures shown for a soak run: the quantile of its windows' merged
# histograms after the warm-up (soak.analysis.latency; the classes table's `all` row).
SHOWN_LATENCY = {"p50 latency": "p50", "p99 latency": "p99", "avg latency": "avg"}
# (measurement, field, figure name, kind, unit, scale)
SOAK_FIELDS = [
    ("load", "lat_p50_ms", "p50 latency", "latency", "ms", 1.0),
    ("load", "lat_p99_ms", "p99 latency", "tail", "ms", 1.0),
    ("load", "lat_avg_ms", "avg latency", "latency", "ms", 1.0),
    ("process", "cpu_cores", "server CPU", "cpu", "cores", 1.0),
    ("process", "rss_anon_bytes", "RssAnon", "memory", "MiB", 1 / 1024**2),
    ("process", "rss_bytes", "RSS", "memory", "MiB", 1 / 1024**2),
    ("process", "fds", "fds", "count", "", 1.0),
    ("process", "threads", "threads", "count", "", 1.0),
]


def _inside(t: int, since_ns: int, end_ns: int | None) -> bool:
    return t >= since_ns and (end_ns is None or t <= end_ns)


def soak_figures(
    store: Any, run_id: str, since_ns: int, interval_s: float, end_ns: int | None = None
) -> Figures:
    """Per-window values after the warm-up (latency shown as the quantile over them all,
    each window's value beside it for the noise test). A run's `load` points are its ledger: one
    closed one-second window each (with `due`), stored at the end of its second, so the
    window stored at the warm-up's end is the warm-up's, and a window's rate is its
    count over its one second, whatever the tick. Runs stored before the ledger (no
    `due`) have a point per tick: its count over the tick. `end_ns`: the last stamp
    counted (None: to the end), e.g. a segment of a soak across an upgrade."""
    out: Figures = {}
    all_class = {"class": "all"}
    windows = bool(store.series(run_id, "load", "due", all_class))
    window_s = 1.0 if windows else interval_s
    load_since_ns = since_ns + 1 if windows else since_ns
    completed = store.series(run_id, "load", "completed", all_class)
    if completed:
        values = [
            float(v) / window_s for t, v in completed[0][1] if _inside(t, load_since_ns, end_ns)
        ]
        out["answered q/s"] = Figure("throughput", "q/s", values)
    for measurement, fld, name, kind, unit, scale in SOAK_FIELDS:
        tags = all_class if measurement == "load" else None
        found = store.series(run_id, measurement, fld, tags)
        if found:
            since = load_since_ns if measurement == "load" else since_ns
            values = [float(v) * scale for t, v in found[0][1] if _inside(t, since, end_ns)]
            out[name] = Figure(kind, unit, values)
    latency = span_latency_ms(
        stored_histograms(store, run_id, all_class), load_since_ns - 1, end_ns
    )
    for name, key in SHOWN_LATENCY.items():
        if name in out and latency[key] is not None:
            out[name].shown = latency[key]
    return out
