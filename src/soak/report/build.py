"""build_report: a run's stored points and outcome into one JSON-able dict.

The dict is what every rendering reads (HTML, Markdown, JSON), in the shape
of a hand-written soak section: setup, start-up figures, a table per phase,
criteria, leak verdicts, events, and plots over time. Each stored series is
read once, summarised per phase and thinned for its plot, then dropped, so a
week of samples does not sit in memory all at once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from soak.analysis.judged import tally
from soak.analysis.latency import phase_histograms
from soak.analysis.rundata import Series, StoreReader, judged_from_ns, numeric
from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.sliding import counter_increments
from soak.clock import ns_to_s
from soak.report.classes import agent_table, class_table, probe_table
from soak.report.headline import ACTIVE_STATUSES
from soak.report.model import ENDED_EARLY, PhaseSpan, ReportInput, WhatGrew
from soak.report.plots import (
    PHASE_METRICS,
    PLOT_BUCKETS,
    PLOTS,
    LineSpec,
    PhaseMetric,
    median_step_ns,
    thin,
    with_gaps,
)
from soak.report.segments import version_segments
from soak.report.setup import setup_table

MAX_EVENTS = 1000
# Event kinds marked on the plots (every event is listed in the table).
MARKED_EVENT_KINDS = (
    "exited", "restarted", "gap", "error", "alert", "stop", "ticks_missed", "swap",
)  # fmt: skip

END_EVENT_KIND = "stop"  # the run's end, however it ended: marked, not as an error
TaggedSeries = list[tuple[dict[str, str], Series]]
_OPEN = 2**63 - 1  # the end of a phase still running


def iso(time_ns: int | None) -> str | None:
    if time_ns is None:
        return None
    return datetime.fromtimestamp(ns_to_s(time_ns), UTC).isoformat(timespec="seconds")


def build_report(
    store: StoreReader, inp: ReportInput, *, what_grew: WhatGrew | None = None
) -> dict[str, Any]:
    """Everything the renderings show, as plain JSON-able data; `what_grew` makes the
    "What grew" section (the results layer's), none without it."""
    fetched: dict[tuple[str, str], TaggedSeries] = {}
    last_ns = inp.started_ns

    def fetch(measurement: str, field: str) -> TaggedSeries:
        nonlocal last_ns
        key = (measurement, field)
        if key not in fetched:
            found = [(tags, numeric(s, 0)) for tags, s in store.series(inp.run_id, *key)]
            fetched[key] = found
            last_ns = max([last_ns] + [s[-1][0] for _, s in found if s])
        return fetched[key]

    spans = list(inp.phases)
    phase_rows: list[dict[str, Any]] = [_phase_head(p) for p in spans]
    plots: list[dict[str, Any]] = []
    # One series at a time: summarise per phase, thin for the plots, forget.
    for measurement, field in _series_keys():
        tagged = fetch(measurement, field)
        for metric in PHASE_METRICS:
            if (metric.measurement, metric.field) == (measurement, field):
                merged = _merge(tagged, metric.tags)
                for i, (row, span) in enumerate(zip(phase_rows, spans, strict=True)):
                    end = _OPEN if span.end_ns is None else span.end_ns
                    part = _within(merged, span.start_ns, end, first=i == 0)
                    row["metrics"][metric.key] = summarise(part, metric)
        _add_plot_lines(plots, measurement, field, tagged, inp.started_ns)
        fetched.pop((measurement, field))
    _phase_latency(store, inp.run_id, spans, phase_rows)
    end_ns = inp.ended_ns or last_ns
    for row, span in zip(phase_rows, spans, strict=True):
        span_end_ns = span.end_ns if span.end_ns is not None else end_ns
        row["end"] = iso(span_end_ns)
        row["duration_s"] = max(0.0, ns_to_s(span_end_ns - span.start_ns))
        sent = row["metrics"].get("sent")
        achieved = row["metrics"].get("rate_achieved_qps")
        # Runs stored before the ledger: their points are ticks, so sent over the duration.
        before_ledger = not isinstance(row["metrics"].get("due"), int | float) or achieved is None
        if before_ledger and isinstance(sent, int | float) and row["duration_s"] > 0:
            row["metrics"]["rate_achieved_qps"] = sent / row["duration_s"]
    events = _events(store, inp)
    verdicts = [_finite(dataclasses.asdict(v)) for v in inp.verdicts]
    judged_ns = judged_from_ns(warmup_end_ns(inp), inp.started_ns)
    return {
        "run": _run_section(inp, end_ns),
        "setup": setup_table(inp),
        "startup": dict(inp.startup),
        "phases": phase_rows,
        "passed": _passed(inp),
        "criteria": [_finite(dataclasses.asdict(c)) for c in inp.criteria],
        "verdicts": verdicts,
        "classes": [_finite(r) for r in class_table(store, inp.run_id, judged_ns)],
        "probes": probe_table(store, inp.run_id),
        "agents": [_finite(r) for r in agent_table(store, inp.run_id, judged_ns)],
        "what_grew": what_grew(store, inp, verdicts) if what_grew is not None else None,
        "segments": _segments(store, inp),
        "events": events[:MAX_EVENTS],
        "events_total": len(events),
        "plots": _ordered_plots(plots),
        "markers": _markers(spans, events, inp.started_ns),
        "x_max_s": max(1.0, ns_to_s(end_ns - inp.started_ns)),
        "judged_from_s": ns_to_s(warmup_end_ns(inp) - inp.started_ns),
    }


def _segments(store: StoreReader, inp: ReportInput) -> list[dict[str, Any]]:
    """One per version of a soak across an upgrade (soak.report.segments); none else."""
    if len(inp.versions) < 2:
        return []
    leaks = inp.leaks or LeaksConfig()
    found = version_segments(store, inp.run_id, inp.versions, leaks, warmup_end_ns(inp), inp.swaps)
    for segment in found:
        segment["leaks"] = [_finite(v) for v in segment["leaks"]]
        segment["load"] = _finite(segment["load"])
        segment["compared"] = [_finite(row) for row in segment["compared"]]
    return found


def warmup_end_ns(inp: ReportInput) -> int:
    """The end of the leading warm-up phases: criteria and the per-class table count the
    ticks after it (soak.analysis.rundata.judged_from_ns), the phases table every tick."""
    boundary = inp.started_ns
    for p in inp.phases:
        if not p.warmup or p.end_ns is None:
            break
        boundary = p.end_ns
    return boundary


# ---------------------------------------------------------------- sections


def _run_section(inp: ReportInput, end_ns: int) -> dict[str, Any]:
    return {
        "id": inp.run_id,
        "scenario": inp.scenario_name,
        "description": inp.description,
        "target": inp.target_name,
        "version": inp.version,
        "status": inp.status,
        "started": iso(inp.started_ns),
        "ended": iso(inp.ended_ns),
        "last_sample": iso(end_ns),
        "duration_s": ns_to_s(end_ns - inp.started_ns),
        "planned_s": inp.planned_s,
    }


def _passed(inp: ReportInput) -> bool:
    """No criterion failed, none went unjudged (unless the run passed by
    `criteria.not_judged: pass`) and the run was not cut short."""
    counts = tally(inp.criteria)
    if counts.failed or inp.status in ENDED_EARLY or inp.status in ACTIVE_STATUSES:
        return False
    return not counts.not_judged or inp.status == "passed"


def _phase_head(p: PhaseSpan) -> dict[str, Any]:
    return {"name": p.name, "warmup": p.warmup, "start": iso(p.start_ns), "metrics": {}}


def _phase_latency(
    store: StoreReader, run_id: str, spans: list[PhaseSpan], rows: list[dict[str, Any]]
) -> None:
    """Each phase's mean and p99 latency of all its queries: the merged histograms of its
    windows (soak.analysis.latency), the estimator of every latency figure of the run.
    The slowest window's p99 stays beside the p99 (the `max` of the per-window series)."""
    bounds = [(s.start_ns, _OPEN if s.end_ns is None else s.end_ns) for s in spans]
    hists = phase_histograms(store, run_id, bounds, {"class": "all"})
    for row, hist in zip(rows, hists, strict=True):
        latency = hist.latency_ms()
        if latency["p99"] is None:
            continue  # no histograms (a run stored before they were): the windows' figures
        row["metrics"]["lat_avg_ms"] = latency["avg"]
        p99 = row["metrics"].get("lat_p99_ms")
        row["metrics"]["lat_p99_ms"] = {
            **(p99 if isinstance(p99, dict) else {}),
            "p99": latency["p99"],
        }


def _events(store: StoreReader, inp: ReportInput) -> list[dict[str, Any]]:
    if inp.events is not None:
        raw = list(inp.events)
    else:
        raw = [
            {
                "time_ns": p.time_ns,
                "kind": p.tags.get("kind", ""),
                "message": p.fields.get("message", ""),
                "value": p.fields.get("value", 0.0),
            }
            for p in store.points(inp.run_id, "event")
        ]
    raw.sort(key=lambda e: int(e.get("time_ns", 0)))
    return [
        {
            "time": iso(int(e["time_ns"])),
            "offset_s": ns_to_s(int(e["time_ns"]) - inp.started_ns),
            "kind": str(e.get("kind", "")),
            "message": str(e.get("message", "")),
            "value": _num(e.get("value")),
        }
        for e in raw
    ]


def _markers(
    spans: list[PhaseSpan], events: list[dict[str, Any]], started_ns: int
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"x_s": ns_to_s(p.start_ns - started_ns), "label": p.name, "kind": "phase"} for p in spans
    ]
    marked = [e for e in events if e["kind"] in MARKED_EVENT_KINDS]
    out += [
        {
            "x_s": e["offset_s"],
            "label": f"{e['kind']}: {e['message']}",
            "kind": "end" if e["kind"] == END_EVENT_KIND else "event",
        }
        for e in marked[:200]
    ]
    return out


# ---------------------------------------------------------------- series


def _series_keys() -> list[tuple[str, str]]:
    keys = [(m.measurement, m.field) for m in PHASE_METRICS]
    keys += [(line.measurement, line.field) for plot in PLOTS for line in plot.lines]
    return list(dict.fromkeys(keys))


def _matches(tags: dict[str, str], wanted: Iterable[tuple[str, str]]) -> bool:
    return all(tags.get(k) == v for k, v in wanted)


def _merge(tagged: TaggedSeries, wanted: Iterable[tuple[str, str]]) -> Series:
    wanted = tuple(wanted)
    parts = [s for tags, s in tagged if _matches(tags, wanted)]
    if len(parts) == 1:
        return parts[0]
    return sorted(tv for s in parts for tv in s)


def _within(series: Series, start_ns: int, end_ns: int, *, first: bool = False) -> Series:
    """Samples of (start, end]: a tick's sample covers the interval that ends at its time."""
    return [(t, v) for t, v in series if start_ns < t <= end_ns or (first and t == start_ns)]


def summarise(series: Series, metric: PhaseMetric) -> Any:
    """One phase's figure for one metric; None when nothing was sampled."""
    if not series:
        return None
    values = [v for _, v in series]
    if metric.how == "sum":
        return sum(values)
    if metric.how == "mean":
        return sum(values) / len(values)
    if metric.how == "mean_max":
        return {"mean": sum(values) / len(values), "max": max(values)}
    if metric.how == "range":
        return {"min": min(values), "max": max(values), "last": values[-1]}
    if metric.how == "increase":
        return sum(v for _, v in counter_increments(series))
    raise ValueError(f"unknown summary {metric.how!r}")


def _add_plot_lines(
    plots: list[dict[str, Any]],
    measurement: str,
    field: str,
    tagged: TaggedSeries,
    started_ns: int,
) -> None:
    for spec in PLOTS:
        for line in spec.lines:
            if (line.measurement, line.field) != (measurement, field):
                continue
            for name, series in _line_series(line, tagged):
                if not series:
                    continue
                step_s = ns_to_s(median_step_ns(series))
                per = step_s if line.per_s and step_s > 0 else 1.0
                points: list[list[float | None]] = [
                    [round(ns_to_s(t - started_ns), 3), v / spec.scale / per]
                    for t, v in thin(series)
                ]
                # Thinning keeps two points a bucket: a gap is wider than a tick and a bucket.
                bucket_s = ns_to_s(series[-1][0] - series[0][0]) / PLOT_BUCKETS
                points = with_gaps(points, max(2.5 * step_s, 2.5 * bucket_s))
                plot = _plot_entry(plots, spec.id)
                plot["lines"].append({"name": name, "points": points})


def _line_series(line: LineSpec, tagged: TaggedSeries) -> list[tuple[str, Series]]:
    if line.split_by is None:
        return [(line.label, _merge(tagged, line.tags))]
    values = sorted(
        {
            tags.get(line.split_by, "")
            for tags, _ in tagged
            if _matches(tags, line.tags) and tags.get(line.split_by, "") not in line.exclude
        }
    )
    return [
        (f"{line.label} {value}".strip(), _merge(tagged, (*line.tags, (line.split_by, value))))
        for value in values
    ]


def _plot_entry(plots: list[dict[str, Any]], plot_id: str) -> dict[str, Any]:
    for plot in plots:
        if plot["id"] == plot_id:
            return plot
    spec = next(p for p in PLOTS if p.id == plot_id)
    plot = {"id": spec.id, "title": spec.title, "unit": spec.unit, "lines": []}
    plots.append(plot)
    return plot


def _ordered_plots(plots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In PLOTS order, each plot's lines in the order its spec names them."""
    order = {p.id: i for i, p in enumerate(PLOTS)}
    out = sorted(plots, key=lambda p: order[p["id"]])
    for plot in out:
        spec = PLOTS[order[plot["id"]]]
        rank = {line.label: i for i, line in enumerate(spec.lines)}
        plot["lines"].sort(key=lambda ln: rank.get(ln["name"], len(rank)))
        if spec.titled_by_lines:  # by what was measured: no goroutines for a C server
            plot["title"] = " and ".join(ln["name"] for ln in plot["lines"]).capitalize()
    return out


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _finite(d: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: non-finite floats become None."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
