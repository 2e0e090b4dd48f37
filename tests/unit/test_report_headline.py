"""A run cut short says so first; a criterion without enough data is `not judged`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from soak.analysis.criteria import evaluate_criteria
from soak.analysis.judged import so_far
from soak.analysis.leaks import LeakVerdict
from soak.analysis.rundata import run_data_from_store
from soak.analysis.scenario_sections import CriteriaConfig
from soak.points import Point
from soak.report import PhaseSpan, render_html, render_markdown
from soak.report.headline import headline
from soak.report.tables import criteria_rows, verdict_rows
from soak.results.reportinput import ran_phases
from soak.runs import timeline
from soak.sinks.sqlite import SqliteStore
from tests.support.reports import T0, S, build, report_input, tags

RUN = "r-stopped"
TAGS = tags(RUN)
WARM_S, STOP_S, PLANNED_S = 20, 42, 120


def stopped_report(tmp_path: Path, status: str = "stopped") -> dict:  # type: ignore[type-arg]
    store = SqliteStore(tmp_path / "points.db")
    points = []
    for t_s in range(1, STOP_S + 1):
        fields = {"sent": 500.0, "completed": 500.0, "lost": 0.0, "rate_target": 500.0}
        fields |= {"rate_achieved": 500.0, "wrong_answers": 0.0, "lat_p99_ms": 1.0}
        points.append(Point("load", fields, T0 + t_s * S, {**TAGS, "class": "all"}))
        points.append(Point("process", {"rss_bytes": 1e8}, T0 + t_s * S, TAGS))
    store.write(points)
    warm_end = T0 + WARM_S * S
    # 22 s after the warm-up: three leak windows, fewer than the six a verdict needs.
    verdict = LeakVerdict("rss_bytes", "insufficient", 0.0, 1.0, 3, 1e6)
    data = run_data_from_store(store, RUN, warm_end, run_start_ns=T0, verdicts=[verdict])
    criteria = evaluate_criteria(CriteriaConfig(lost_ratio_max=0.01), data)
    phases = [
        PhaseSpan("warmup", T0, warm_end, True),
        PhaseSpan("steady", warm_end, T0 + STOP_S * S),
    ]
    inp = report_input(
        RUN,
        STOP_S,
        phases,
        status=status,
        criteria=criteria,
        verdicts=[verdict],
        planned_s=PLANNED_S,
    )
    return build(store, inp)


def test_a_stopped_run_says_so_first_and_counts_what_was_not_judged(tmp_path: Path) -> None:
    report = stopped_report(tmp_path)
    line = headline(report)
    assert line.startswith("STOPPED after 0:42 of 2:00"), line
    assert "PASSED" not in line and "all" not in line
    assert "not judged" in line
    assert report["passed"] is False
    leak = next(c for c in report["criteria"] if c["name"] == "leak[rss_bytes]")
    assert (leak["ok"], leak["judged"]) == (False, False)
    _, rows = criteria_rows(report)
    (row,) = [r for r in rows if r[0] == "leak[rss_bytes]"]
    assert (row[2], row[4]) == ("\u2013", "not judged")  # no figure: a dash
    assert "STOPPED after 0:42 of 2:00" in render_markdown(report)


def test_a_completed_run_with_a_criterion_not_judged_is_not_judged(tmp_path: Path) -> None:
    report = stopped_report(tmp_path, status="not_judged")
    line = headline(report)
    why = "leak[rss_bytes] (too few windows (3, fewer than leaks.min_windows))"
    assert line == f"NOT JUDGED — 4 of 5 criteria pass, 1 not judged: {why}", line
    assert report["passed"] is False
    # The scenario let criteria not judged pass (`criteria.not_judged: pass`): still named.
    allowed = stopped_report(tmp_path / "allowed", status="passed")
    assert headline(allowed).startswith("PASSED (criteria.not_judged: pass) — 4 of 5")
    assert why in headline(allowed) and allowed["passed"] is True


def test_a_running_run_says_running_and_what_has_no_data_yet(tmp_path: Path) -> None:
    """Fetched during the warm-up: no load samples after it yet. RUNNING, and the criteria
    without data read `not judged yet`, never FAILED."""
    store = SqliteStore(tmp_path / "points.db")
    store.write([Point("process", {"rss_bytes": 1e8}, T0 + t * S, TAGS) for t in range(1, 6)])
    data = run_data_from_store(store, RUN, T0 + WARM_S * S, run_start_ns=T0)
    criteria = so_far(evaluate_criteria(CriteriaConfig(lost_ratio_max=0.01), data))
    phases = [PhaseSpan("warmup", T0, None, True)]
    inp = report_input(RUN, 5, phases, status="running", criteria=criteria, planned_s=120)
    report = build(store, dataclasses.replace(inp, ended_ns=None))
    line = headline(report)
    assert line.startswith("RUNNING after 0:05 of 2:00 — so far: "), line
    assert "FAILED" not in line and "failed" not in line, line
    _, rows = criteria_rows(report)
    assert {r[0]: r[4] for r in rows if r[0] in ("lost_ratio", "wrong_answers")} == {
        "lost_ratio": "not judged yet",
        "wrong_answers": "not judged yet",
    }
    assert report["passed"] is False
    assert '<p class="headline running">RUNNING' in render_html(report)


def test_an_ok_beside_a_recent_slope_above_its_threshold_says_what_it_is_of(
    tmp_path: Path,
) -> None:
    report = stopped_report(tmp_path, status="passed")
    rising = {"resource": "rss_bytes", "verdict": "ok", "slope_per_hour": 1e5, "p_value": 0.3}
    rising |= {"threshold_per_hour": 1e6, "recent_slope_per_hour": 4e6, "windows": 6}
    flat = {**rising, "resource": "fds", "recent_slope_per_hour": 0.0}
    header, rows = verdict_rows({**report, "verdicts": [rising, flat], "what_grew": None})
    shown = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert shown["rss_bytes"]["Verdict"] == "ok (whole run)"
    assert "recent slope" in shown["rss_bytes"]["Note"]
    assert "above the threshold" in shown["rss_bytes"]["Note"]
    assert (shown["fds"]["Verdict"], shown["fds"]["Note"]) == ("ok", "\u2013")


def test_phase_rows_show_what_ran_not_what_was_planned(tmp_path: Path) -> None:
    steady = stopped_report(tmp_path)["phases"][1]
    assert steady["duration_s"] == STOP_S - WARM_S
    assert steady["metrics"]["sent"] == (STOP_S - WARM_S) * 500


def test_ran_phases_cut_the_phase_a_stop_fell_in() -> None:
    spans = [
        timeline.PhaseSpan(0, "warmup", T0, T0 + 30 * S, 500, True),
        timeline.PhaseSpan(1, "steady", T0 + 30 * S, T0 + 130 * S, 500, False),
        timeline.PhaseSpan(2, "cool", T0 + 130 * S, T0 + 150 * S, 500, False),
    ]
    stopped = ran_phases(spans, T0 + 42 * S, ended=True)
    assert [(p.name, p.end_ns) for p in stopped] == [
        ("warmup", T0 + 30 * S),
        ("steady", T0 + 42 * S),
    ]
    running = ran_phases(spans, T0 + 42 * S, ended=False)
    assert running[-1].end_ns is None


def test_an_abandoned_run_is_never_headlined_as_a_pass(tmp_path: Path) -> None:
    """Its foreground command died (SIGKILL): what ran is reported, never PASSED."""
    report = stopped_report(tmp_path, status="abandoned")
    assert headline(report).startswith("ABANDONED after 0:42 of 2:00"), headline(report)
    assert report["passed"] is False
