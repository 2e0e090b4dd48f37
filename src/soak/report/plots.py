"""Which series a report plots and summarises per phase, and how a long series is thinned.

Names are those of docs/architecture.md ("Time series"). A line may be split by a tag
(one line per API endpoint, per load class, per dig probe).
"""

from __future__ import annotations

from dataclasses import dataclass

from soak.analysis.rundata import Series
from soak.analysis.sliding import median_gap
from soak.report.svg import PLOT_WIDTH_PX

MiB = 1024**2
ALL = (("class", "all"),)
# A plot keeps at most this many buckets per line (the min and max of each, so a
# spike or a GC trough survives thinning): a week of samples stays a small page.
# One bucket per pixel column of the chart's plot area (a line spans at most the
# chart), so the drawing (svg.per_column) still sees each column's extremes.
PLOT_BUCKETS = PLOT_WIDTH_PX


@dataclass(frozen=True, slots=True)
class LineSpec:
    label: str
    measurement: str
    field: str
    tags: tuple[tuple[str, str], ...] = ()  # only tag sets holding these
    split_by: str | None = None  # one line per value of this tag, labelled "label value"
    exclude: tuple[str, ...] = ()  # split values left out (e.g. "all", plotted on its own)
    # A per-tick count drawn as a rate: the count over the tick interval (the median gap
    # between ticks), so the line agrees with the stored count of every tick.
    per_s: bool = False


@dataclass(frozen=True, slots=True)
class PlotSpec:
    id: str
    title: str
    unit: str
    lines: tuple[LineSpec, ...]
    scale: float = 1.0  # stored value / scale = plotted value
    titled_by_lines: bool = False  # the title names the lines drawn ("Threads" alone)


@dataclass(frozen=True, slots=True)
class PhaseMetric:
    key: str
    measurement: str
    field: str
    how: str  # "sum", "mean", "mean_max", "range" (min, max, last), "increase" (a counter)
    tags: tuple[tuple[str, str], ...] = ()


# Each plot's lines, in the order they are drawn: (plot id, line).
PLOT_LINES: tuple[tuple[str, LineSpec], ...] = (
    ("load", LineSpec("target", "load", "rate_target", ALL)),
    # From `sent`, not the stored `rate_achieved`: that one divides by the load engine's
    # own window, which jitters around the tick (503 sent in a 0.49 s window read as
    # 1,018 q/s); the tick grid is what every other figure uses.
    ("load", LineSpec("achieved", "load", "sent", ALL, per_s=True)),
    ("latency", LineSpec("avg", "load", "lat_avg_ms", ALL)),
    ("latency", LineSpec("p99", "load", "lat_p99_ms", ALL)),
    ("latency", LineSpec("p99", "load", "lat_p99_ms", split_by="class", exclude=("all",))),
    ("machine", LineSpec("busy", "host", "cpu_busy_ratio")),
    ("machine", LineSpec("iowait", "host", "cpu_iowait_ratio")),
    ("machine", LineSpec("steal", "host", "cpu_steal_ratio")),
    ("lost", LineSpec("lost", "load", "lost", ALL)),
    ("lost", LineSpec("late", "load", "late", ALL)),
    ("lost", LineSpec("wrong", "load", "wrong_answers", ALL)),
    ("memory", LineSpec("anonymous", "process", "rss_anon_bytes")),
    ("memory", LineSpec("file-backed", "process", "rss_file_bytes")),
    ("memory", LineSpec("total", "process", "rss_bytes")),
    ("heap", LineSpec("in use", "runtime", "heap_inuse_bytes")),
    ("heap", LineSpec("allocated", "runtime", "heap_alloc_bytes")),
    ("fds", LineSpec("fds", "process", "fds")),
    ("tasks", LineSpec("goroutines", "runtime", "goroutines")),
    ("tasks", LineSpec("threads", "process", "threads")),
    ("cpu", LineSpec("cpu", "process", "cpu_cores")),
    ("drops", LineSpec("dropped", "runtime", "querylog_dropped_total")),
    ("rows", LineSpec("", "files", "rows", split_by="path")),
    ("api", LineSpec("", "api", "latency_ms", split_by="endpoint")),
    ("dig", LineSpec("", "dig", "latency_ms", split_by="probe")),
)


def _lines(plot_id: str) -> tuple[LineSpec, ...]:
    return tuple(line for plot, line in PLOT_LINES if plot == plot_id)


# The plots, in the order the report shows them; each draws its lines of PLOT_LINES.
PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("load", "Load", "q/s", _lines("load")),
    PlotSpec("latency", "Latency", "ms", _lines("latency")),
    # Under latency: a slow window on a saturated machine is the machine's as much as the
    # server's (soak.samplers.host).
    PlotSpec(
        "machine",
        "The machine: CPU busy, iowait and steal",
        "% of all CPUs",
        _lines("machine"),
        scale=0.01,
    ),
    PlotSpec("lost", "Lost, late and wrong answers", "queries per tick", _lines("lost")),
    PlotSpec("memory", "Memory (RSS)", "MiB", _lines("memory"), scale=MiB),
    PlotSpec("heap", "Heap", "MiB", _lines("heap"), scale=MiB),
    PlotSpec("fds", "File descriptors", "open fds", _lines("fds")),
    PlotSpec("tasks", "Goroutines and threads", "count", _lines("tasks"), titled_by_lines=True),
    PlotSpec("cpu", "CPU", "cores", _lines("cpu")),
    PlotSpec("drops", "Query-log drops", "dropped (counter)", _lines("drops")),
    PlotSpec("rows", "Query log (rows)", "rows", _lines("rows")),
    PlotSpec("api", "API latency", "ms", _lines("api")),
    PlotSpec("dig", "Probe latency", "ms", _lines("dig")),
)

PHASE_METRICS: tuple[PhaseMetric, ...] = (
    # Load points are the ledger's one-second windows: a phase's rates are its windows'
    # sums over its windows' seconds, i.e. the mean of their per-second rates.
    PhaseMetric("rate_target_qps", "load", "rate_target", "mean", ALL),
    PhaseMetric("rate_achieved_qps", "load", "rate_achieved", "mean", ALL),
    PhaseMetric("due", "load", "due", "sum", ALL),
    PhaseMetric("sent", "load", "sent", "sum", ALL),
    PhaseMetric("completed", "load", "completed", "sum", ALL),
    PhaseMetric("lost", "load", "lost", "sum", ALL),
    PhaseMetric("abandoned", "load", "abandoned", "sum", ALL),
    PhaseMetric("wrong_answers", "load", "wrong_answers", "sum", ALL),
    PhaseMetric("lat_avg_ms", "load", "lat_avg_ms", "mean", ALL),
    PhaseMetric("lat_p99_ms", "load", "lat_p99_ms", "mean_max", ALL),
    # A replay's fidelity: how late its sends left after the capture's timing.
    PhaseMetric("send_offset_p50_us", "load", "send_offset_p50_us", "mean_max", ALL),
    PhaseMetric("send_offset_p99_us", "load", "send_offset_p99_us", "mean_max", ALL),
    PhaseMetric("send_offset_max_us", "load", "send_offset_max_us", "mean_max", ALL),
    # A replay's connections: opened, reused (queries on one already open), closed idle.
    PhaseMetric("conn_opened", "load", "conn_opened", "sum", ALL),
    PhaseMetric("conn_reused", "load", "conn_reused", "sum", ALL),
    PhaseMetric("conn_idled_out", "load", "conn_idled_out", "sum", ALL),
    PhaseMetric("cpu_cores", "process", "cpu_cores", "mean"),
    PhaseMetric("rss_anon_bytes", "process", "rss_anon_bytes", "range"),
    PhaseMetric("rss_file_bytes", "process", "rss_file_bytes", "range"),
    PhaseMetric("heap_inuse_bytes", "runtime", "heap_inuse_bytes", "range"),
    PhaseMetric("fds", "process", "fds", "range"),
    PhaseMetric("goroutines", "runtime", "goroutines", "range"),
    PhaseMetric("threads", "process", "threads", "range"),
    PhaseMetric("querylog_dropped", "runtime", "querylog_dropped_total", "increase"),
)


def median_step_ns(series: Series) -> int:
    """The usual gap between samples (the tick interval); 0 with fewer than two."""
    return median_gap([t for t, _ in series])


def with_gaps(points: list[list[float | None]], gap_s: float) -> list[list[float | None]]:
    """A [x, None] break wherever two points lie more than `gap_s` apart: missing ticks (a
    restart, a stall) are drawn as a gap, not a ramp across it."""
    out: list[list[float | None]] = []
    for point in points:
        last = out[-1][0] if out else None
        x = point[0]
        if last is not None and x is not None and x - last > gap_s:
            out.append([(last + x) / 2, None])
        out.append(point)
    return out


def thin(series: Series, buckets: int = PLOT_BUCKETS) -> Series:
    """At most 2 x buckets points: each bucket's minimum and maximum, in time order."""
    if len(series) <= 2 * buckets:
        return list(series)
    t0, t1 = series[0][0], series[-1][0]
    width = (t1 - t0) / buckets or 1
    out: Series = []
    current: list[tuple[int, float]] = []
    k_current = 0
    for t, v in series:
        k = min(buckets - 1, int((t - t0) / width))
        if k != k_current and current:
            out += _min_max(current)
            current = []
        k_current = k
        current.append((t, v))
    if current:
        out += _min_max(current)
    return out


def _min_max(bucket: list[tuple[int, float]]) -> Series:
    lo = min(bucket, key=lambda tv: tv[1])
    hi = max(bucket, key=lambda tv: tv[1])
    if lo is hi:
        return [lo]
    return [lo, hi] if lo[0] <= hi[0] else [hi, lo]
