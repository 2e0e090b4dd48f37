"""Reports built from points written into a real SqliteStore (a file in a temp dir)."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

from soak.analysis.criteria import evaluate_criteria
from soak.analysis.leaks import leak_verdict
from soak.analysis.rundata import run_data_from_store
from soak.analysis.scenario_sections import CriteriaConfig
from soak.clock import NS_PER_S
from soak.histogram import LatencyHistogram
from soak.names import LAT_HIST_FIELD
from soak.points import Point, event_point
from soak.report import (
    PhaseSpan,
    ReportInput,
    build_report,
    render_html,
    render_json,
    render_markdown,
)
from soak.report.plots import PLOT_BUCKETS, thin
from soak.report.svg import (
    BOTTOM,
    HEIGHT,
    PLOT_WIDTH_PX,
    TOP,
    Chart,
    Line,
    nice_step,
    render_chart,
    time_step_s,
)
from soak.results.grew import report_section
from soak.sinks.sqlite import SqliteStore

S = NS_PER_S
MiB = 1024**2
T0 = 1_790_000_000 * S
RUN = "r-synthetic"
TAGS = {"soak": RUN, "scenario": "recursor-mix", "target": "pdns-recursor", "version": "4.8.4"}
WARMUP_S, STEADY_S, TICK_S = 600, 7200, 10
RESTART_AT_S = 3600


def synthetic_points(seed: int = 7) -> list[Point]:
    """A 2 h 10 min run at 10 s ticks: load per class, process and runtime insides, API
    latency, and a kill with a restart an hour in (lost queries, a memory drop)."""
    rng = random.Random(seed)
    points: list[Point] = []
    for i in range((WARMUP_S + STEADY_S) // TICK_S):
        t_s = (i + 1) * TICK_S
        t_ns = T0 + t_s * S
        down = RESTART_AT_S <= t_s < RESTART_AT_S + 20
        since_start = t_s - (RESTART_AT_S + 20 if t_s >= RESTART_AT_S + 20 else 0)
        for cls, share in (("all", 1.0), ("cached", 0.7), ("miss", 0.3)):
            sent = 2000 * TICK_S * share
            lost = sent if down else 0.0
            fields: dict[str, float | int | str | bool] = {
                "sent": sent,
                "completed": sent - lost,
                "lost": lost,
                "late": 0.0,
                "rate_target": 2000 * share,
                "rate_achieved": 2000 * share * (1 + rng.gauss(0, 0.002)),
                "wrong_answers": 0.0,
            }
            if not down:
                base = 0.2 if cls == "cached" else 1.1 if cls == "miss" else 0.45
                # the window's histogram: 98% near `base`, 2% about four times slower
                hist = LatencyHistogram()
                answered = int(sent - lost)
                hist.record(round(base * (1 + rng.gauss(0, 0.05)) * 1000), answered * 98 // 100)
                slow_us = round(4 * base * (1 + abs(rng.gauss(0, 0.2))) * 1000)
                hist.record(slow_us, answered - answered * 98 // 100)
                latency = hist.latency_ms()
                fields["lat_avg_ms"] = latency["avg"] or 0.0
                fields["lat_p99_ms"] = latency["p99"] or 0.0
                fields[LAT_HIST_FIELD] = hist.encode()
            points.append(Point("load", fields, t_ns, {**TAGS, "class": cls}))
        saw = 40 * MiB * ((t_s % 420) / 420)
        anon = 300 * MiB + min(since_start, 1800) / 1800 * 60 * MiB + saw + rng.gauss(0, MiB)
        file_b = 100 * MiB + min(since_start, 3000) * 0.1 * MiB
        if not down:
            points.append(
                Point(
                    "process",
                    {
                        "rss_anon_bytes": anon,
                        "rss_file_bytes": file_b,
                        "rss_bytes": anon + file_b,
                        "fds": 40 + rng.randint(0, 2),
                        "threads": 12,
                        "cpu_cores": 0.45 + rng.gauss(0, 0.03),
                    },
                    t_ns,
                    TAGS,
                )
            )
            points.append(
                Point(
                    "runtime",
                    {
                        "goroutines": 104 + rng.randint(0, 1),
                        "heap_inuse_bytes": 160 * MiB + saw,
                        "querylog_dropped_total": 0.0,
                    },
                    t_ns,
                    TAGS,
                )
            )
        if t_s % 60 == 0:
            for endpoint, ms in (("GET /stats/summary", 13 + t_s / 20), ("GET /healthz", 0.8)):
                points.append(
                    Point(
                        "api",
                        {"latency_ms": ms, "status": 200, "ok": True},
                        t_ns,
                        {**TAGS, "endpoint": endpoint},
                    )
                )
    events = [
        (0, "started", "target pdns-recursor started"),
        (0.4, "ready", "target ready after 0.40 s"),
        (0.5, "phase", "phase warmup started"),
        (WARMUP_S, "phase", "phase steady started"),
        (RESTART_AT_S, "exited", "target killed by signal 9 (SIGKILL)"),
        (RESTART_AT_S + 20, "restarted", "target restarted (1)"),
        (WARMUP_S + STEADY_S, "stop", "run ended: completed"),
    ]
    points += [
        event_point(kind, msg, T0 + round(at * S)).with_tags(TAGS) for at, kind, msg in events
    ]
    return points


def write_run(path: Path) -> SqliteStore:
    store = SqliteStore(path)
    store.write(synthetic_points())
    return store


def report_input(store: SqliteStore) -> ReportInput:
    warm_end = T0 + WARMUP_S * S
    end = T0 + (WARMUP_S + STEADY_S) * S
    verdicts = []
    for resource in ("rss_anon_bytes", "fds"):
        (_, samples), *_ = store.series(RUN, "process", resource)
        after = [(t, float(v)) for t, v in samples if t >= warm_end]
        verdicts.append(
            leak_verdict(
                [t / S for t, _ in after],
                [v for _, v in after],
                resource=resource,
                threshold_per_hour=5 * MiB if resource.endswith("_bytes") else 1.0,
                window_s=300,
                min_windows=6,
                p_value_max=0.05,
            )
        )
    data = run_data_from_store(store, RUN, warm_end, run_start_ns=T0, verdicts=verdicts)
    criteria = evaluate_criteria(
        CriteriaConfig(p99_ms_max={"cached": 2.0}, api_latency_ms_max={"GET /healthz": 50}),
        data,
    )
    return ReportInput(
        run_id=RUN,
        scenario_name="recursor-mix",
        target_name="pdns-recursor",
        version="4.8.4",
        target_desc="process: pdns_recursor --config-dir=/tmp/x (threads=1)",
        started_ns=T0,
        ended_ns=end,
        status="failed",
        phases=[
            PhaseSpan("warmup", T0, warm_end, True),
            PhaseSpan("steady", warm_end, end, False),
        ],
        startup={"ready_s": 0.4, "idle_rss_bytes": 310 * MiB},
        criteria=criteria,
        verdicts=verdicts,
        host={"name": "test-host", "cpus": "2", "memory": "8.0 GiB"},
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    store = write_run(tmp_path_factory.mktemp("report") / "points.db")
    try:
        return build_report(store, report_input(store), what_grew=report_section)
    finally:
        store.close()


def test_phases_summarise_load_and_insides(report: dict) -> None:  # type: ignore[type-arg]
    warm, steady = report["phases"]
    assert (warm["name"], warm["warmup"], steady["name"]) == ("warmup", True, "steady")
    assert steady["duration_s"] == STEADY_S
    m = steady["metrics"]
    assert m["rate_target_qps"] == pytest.approx(2000)
    assert m["rate_achieved_qps"] == pytest.approx(2000, rel=0.01)
    assert m["lost"] == pytest.approx(2 * 2000 * TICK_S)  # the 20 s while it was down
    assert m["sent"] == pytest.approx(STEADY_S * 2000)
    assert m["fds"]["min"] >= 40 and m["fds"]["max"] <= 42
    assert m["threads"] == {"min": 12, "max": 12, "last": 12}
    assert m["goroutines"]["min"] == 104
    assert m["lat_p99_ms"]["max"] >= m["lat_p99_ms"]["mean"]
    # The phase's p99 of all its queries, from the windows' merged histograms.
    assert 1.8 * 0.94 <= m["lat_p99_ms"]["p99"] <= m["lat_p99_ms"]["max"]
    assert m["querylog_dropped"] == 0
    assert warm["metrics"]["sent"] == pytest.approx(WARMUP_S * 2000)


def test_criteria_verdicts_and_events_are_carried(report: dict) -> None:  # type: ignore[type-arg]
    assert report["passed"] is False
    failed = {c["name"] for c in report["criteria"] if not c["ok"]}
    assert {"lost_ratio", "restarts"} <= failed  # the kill: 20 s of loss, one restart
    assert "api_latency_ms[GET /healthz]" not in failed
    kinds = [e["kind"] for e in report["events"]]
    assert kinds[:2] == ["started", "ready"] and "restarted" in kinds
    assert report["events_total"] == 7
    marked = [m for m in report["markers"] if m["kind"] == "event"]
    assert {m["label"].split(":")[0] for m in marked} == {"exited", "restarted"}
    # The normal end of the run is marked, not as an error.
    (end,) = [m for m in report["markers"] if m["kind"] == "end"]
    assert end["label"] == "stop: run ended: completed"
    assert {v["resource"] for v in report["verdicts"]} == {"rss_anon_bytes", "fds"}


def test_plots_hold_every_series_family(report: dict) -> None:  # type: ignore[type-arg]
    plots = {p["id"]: p for p in report["plots"]}
    expected = ["load", "latency", "lost", "memory", "heap", "fds", "tasks", "cpu", "drops"]
    assert list(plots) == [*expected, "api"]
    assert [ln["name"] for ln in plots["memory"]["lines"]] == ["anonymous", "file-backed", "total"]
    assert [ln["name"] for ln in plots["latency"]["lines"]] == [
        "avg",
        "p99",
        "p99 cached",
        "p99 miss",
    ]
    assert {ln["name"] for ln in plots["api"]["lines"]} == {"GET /healthz", "GET /stats/summary"}
    anon = plots["memory"]["lines"][0]["points"]
    assert 300 < min(v for _, v in anon if v is not None) < 400  # in MiB
    # The target was down for two ticks: a gap in the line, not a ramp across it.
    gaps = [x for x, v in anon if v is None]
    assert len(gaps) == 1 and RESTART_AT_S < gaps[0] < RESTART_AT_S + 30
    assert anon[0][0] == pytest.approx(TICK_S)  # seconds from the run's start
    assert "dig" not in plots  # never sampled: no empty plot


def test_json_round_trips(report: dict) -> None:  # type: ignore[type-arg]
    text = render_json(report)
    assert json.loads(text) == json.loads(json.dumps(report))


def test_markdown_tables(report: dict) -> None:  # type: ignore[type-arg]
    md = render_markdown(report)
    assert md.startswith("# Soak recursor-mix: pdns-recursor 4.8.4")
    assert "**FAILED" in md
    assert "| Rate target, q/s | 2,000 | 2,000 |" in md
    assert re.search(r"\| lost_ratio \| run \| .* \| FAIL \|", md)
    assert "| rss_anon_bytes |" in md
    assert "killed by signal 9" in md


def test_html_is_self_contained_with_plots(report: dict) -> None:  # type: ignore[type-arg]
    html = render_html(report)
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)
    paths = re.findall(r'<path class="series" data-series="([^"]+)" data-points="(\d+)"', html)
    names = {n for n, _ in paths}
    assert {"target", "achieved", "anonymous", "file-backed", "fds", "threads"} <= names
    assert all(int(n) > 10 for _, n in paths)
    assert html.count("<svg") == len(report["plots"])
    assert 'class="phase"' in html and 'class="event"' in html
    assert "test-host" in html and "310.0 MiB" in html


def test_thin_keeps_extremes_and_bounds_size() -> None:
    series = [(i, math.sin(i / 50) + (10.0 if i == 5001 else 0.0)) for i in range(20000)]
    thinned = thin(series, buckets=100)
    assert len(thinned) <= 200
    assert max(v for _, v in thinned) == max(v for _, v in series)  # the spike survives
    assert [t for t, _ in thinned] == sorted(t for t, _ in thinned)


def test_a_day_of_1s_ticks_draws_its_one_tick_spike_in_as_many_points_as_columns() -> None:
    day_s, spike_s = 86_400, 51_237
    rng = random.Random(5)
    series = [(t * S, 300.0 + 50 * (t % 420) / 420 + rng.random()) for t in range(day_s)]
    series[spike_s] = (spike_s * S, 700.0)
    thinned = thin(series)
    assert len(thinned) <= 2 * PLOT_BUCKETS and (spike_s * S, 700.0) in thinned
    line = Line("anonymous", [(t / S, v) for t, v in thinned])
    svg = render_chart(Chart("Memory", "MiB", [line], x_max_s=day_s))
    path = re.search(r'data-points="(\d+)" d="M([^"]+)"', svg)
    assert path is not None
    drawn = [tuple(map(float, xy.split(","))) for xy in path.group(2).split(" L")]
    assert int(path.group(1)) == len(drawn) <= 2 * (PLOT_WIDTH_PX + 1)
    assert len({math.floor(x) for x, _ in drawn}) > 0.9 * PLOT_WIDTH_PX  # the whole day drawn
    spike_y = round(TOP + (HEIGHT - TOP - BOTTOM) * (1 - 700 / 800), 1)  # y axis 0..800
    assert min(y for _, y in drawn) == spike_y
    assert sum(1 for _, y in drawn if y < spike_y + 50) == 1  # nothing else near it


def test_axis_steps() -> None:
    assert nice_step(100) == 20
    assert nice_step(0.7) == 0.2
    assert time_step_s(7800) == 1800
    assert time_step_s(120) == 15
