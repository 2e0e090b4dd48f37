"""The report's "What grew" section: RSS by mapping, Go profile diffs, culprits, projections.

Read from the run's `memory_map` series (the smaps sampler) and its stored Go
profiles (the pprof sampler), both from the warm-up's end on; the maths is
soak.analysis.growth's. `culprits()` is also what an alert's `culprit`
annotation says, so the page and the report name the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.analysis import growth
from soak.analysis.growth import Growth
from soak.analysis.leaks import LeakVerdict
from soak.analysis.rundata import StoreReader, numeric
from soak.clock import ns_to_s
from soak.pproftext import Profile, parse_profile
from soak.profiles import first_and_latest, read_profile_text
from soak.report.model import ReportInput
from soak.report.plots import thin
from soak.runs.layout import profiles_dir

TOP = 10
MiB = 1024**2
RESOURCE_MEASUREMENTS = ("process", "runtime")


def _map_series(store: StoreReader, run_id: str) -> growth.MapSeries:
    out: growth.MapSeries = {}
    for tags, samples in store.series(run_id, "memory_map", "rss_bytes"):
        key = (tags.get("kind", "other"), tags.get("path", ""))
        out.setdefault(key, []).extend(numeric(samples, 0))
    return out


def _profiles(run_dir: Path | None, kind: str, since_ns: int) -> tuple[Profile, Profile] | None:
    if run_dir is None:
        return None
    folder = profiles_dir(run_dir)
    pair = first_and_latest(folder, kind, since_ns) or first_and_latest(folder, kind)
    if pair is None:
        return None
    try:
        return parse_profile(read_profile_text(pair[0])), parse_profile(read_profile_text(pair[1]))
    except (OSError, ValueError, EOFError):
        return None  # thinned or damaged meanwhile: the section says there is no diff


def _rows(grown: list[Growth]) -> list[dict[str, Any]]:
    return [
        {"name": g.name, "site": g.site, "start": g.start, "end": g.end, "delta": g.delta}
        for g in grown
    ]


def stacked_chart(series: growth.MapSeries, started_ns: int) -> dict[str, Any] | None:
    """One line per mapping group, each the top of its band (the sum of itself and the
    groups below it); the largest at the end is at the bottom."""
    if not series:
        return None
    last = {k: (s[-1][1] if s else 0.0) for k, s in series.items()}
    order = sorted(series, key=lambda k: (-last[k], k))
    values = {k: dict(s) for k, s in series.items()}
    times = sorted({t for s in series.values() for t, _ in s})
    below = dict.fromkeys(times, 0.0)
    lines = []
    for key in order:
        band = [(t, below[t] + values[key].get(t, 0.0)) for t in times]
        below = dict(band)
        points = [[round(ns_to_s(t - started_ns), 3), v / MiB] for t, v in thin(band)]
        lines.append({"name": f"{key[0]} {key[1]}", "points": points})
    return {"id": "memory_map", "title": "RSS by mapping (stacked)", "unit": "MiB", "lines": lines}


def _last(store: StoreReader, run_id: str, field: str) -> float | None:
    for measurement in RESOURCE_MEASUREMENTS:
        for _tags, samples in store.series(run_id, measurement, field)[:1]:
            values = numeric(samples, 0)
            if values:
                return values[-1][1]
    return None


@dataclass(frozen=True)
class Grown:
    """What grew from the warm-up's end: heap functions, goroutine stacks, mappings."""

    heap: list[Growth]
    goroutines: list[Growth]
    mappings: list[Growth]


def _grown(store: StoreReader, run_id: str, run_dir: Path | None, since_ns: int) -> Grown:
    """The top TOP of each, as an alert's culprit needs them."""
    pair = _profiles(run_dir, "heap", since_ns)
    heap = growth.heap_functions(*pair, top=TOP) if pair else []
    pair = _profiles(run_dir, "goroutine", since_ns)
    goroutines = growth.goroutine_stacks(*pair, top=TOP) if pair else []
    mappings = growth.mapping_growth(_map_series(store, run_id), since_ns, TOP)
    return Grown(heap, goroutines, mappings)


def culprits(
    store: StoreReader,
    run_id: str,
    verdicts: list[dict[str, Any]],
    *,
    run_dir: Path | None,
    since_ns: int,
    memory_limit_bytes: float | None,
    grown: Grown | None = None,
) -> dict[str, dict[str, Any]]:
    """resource -> {culprit, projection, hours_to_limit, limit} for every growing verdict;
    `grown`: what grew, where the caller has read it already."""
    growing = [v for v in verdicts if v.get("verdict") == "growing"]
    if not growing:
        return {}
    found = grown if grown is not None else _grown(store, run_id, run_dir, since_ns)
    fd_limit = _last(store, run_id, "fd_limit")
    out = {}
    for v in growing:
        resource = str(v["resource"])
        limit = growth.limit_for(resource, memory_limit_bytes, fd_limit)
        current = _last(store, run_id, resource)
        p = growth.project(resource, current, float(v.get("slope_per_hour") or 0.0), limit)
        out[resource] = {
            "culprit": growth.culprit(
                resource, heap=found.heap, goroutines=found.goroutines, mappings=found.mappings
            ),
            "projection": p.text,
            "hours_to_limit": p.hours_to_limit,
            "limit": p.limit,
        }
    return out


def what_grew(
    store: StoreReader,
    run_id: str,
    verdicts: list[dict[str, Any]],
    *,
    started_ns: int,
    since_ns: int,
    run_dir: Path | None,
    memory_limit_bytes: float | None,
) -> dict[str, Any]:
    series = _map_series(store, run_id)
    mappings = growth.mapping_growth(series, since_ns, top=len(series) or 1)
    heap_pair = _profiles(run_dir, "heap", since_ns)
    goroutine_pair = _profiles(run_dir, "goroutine", since_ns)
    heap = growth.heap_functions(*heap_pair, top=TOP) if heap_pair else []
    goroutines = growth.goroutine_stacks(*goroutine_pair, top=TOP) if goroutine_pair else []
    return {
        "chart": stacked_chart(series, started_ns),
        "mappings": _rows(mappings),
        "heap_functions": _rows(heap),
        "heap_stacks": _rows(growth.heap_stacks(*heap_pair, top=TOP)) if heap_pair else [],
        "goroutine_stacks": _rows(goroutines),
        "profiles": heap_pair is not None or goroutine_pair is not None,
        "memory_limit_bytes": memory_limit_bytes,
        "culprits": culprits(
            store,
            run_id,
            verdicts,
            run_dir=run_dir,
            since_ns=since_ns,
            memory_limit_bytes=memory_limit_bytes,
            grown=Grown(heap, goroutines, mappings),
        ),
    }


def report_section(
    store: StoreReader, inp: ReportInput, verdicts: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """RSS by mapping and Go profile diffs from the warm-up's end; None without either
    (build_report's `what_grew`)."""
    warmups = [p.end_ns for p in inp.phases if p.warmup and p.end_ns is not None]
    grew = what_grew(
        store,
        inp.run_id,
        verdicts,
        started_ns=inp.started_ns,
        since_ns=max(warmups, default=inp.started_ns),
        run_dir=inp.run_dir,
        memory_limit_bytes=inp.memory_limit_bytes,
    )
    return grew if grew["chart"] is not None or grew["profiles"] or grew["culprits"] else None


def verdict_culprits(
    store: StoreReader,
    run_id: str,
    verdicts: Sequence[LeakVerdict],
    *,
    run_dir: Path | None,
    since_ns: int,
    memory_limit_bytes: float | None,
) -> dict[str, dict[str, Any]]:
    """culprits() of live verdicts, for the alert's `culprit` and `projection` annotations."""
    as_dicts = [
        {"resource": v.resource, "verdict": v.verdict, "slope_per_hour": v.slope_per_hour}
        for v in verdicts
    ]
    return culprits(
        store,
        run_id,
        as_dicts,
        run_dir=run_dir,
        since_ns=since_ns,
        memory_limit_bytes=memory_limit_bytes,
    )
