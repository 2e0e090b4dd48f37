"""One accounting: the criteria, the phases table and the plots count the same queries."""

from __future__ import annotations

from pathlib import Path

from soak.analysis.criteria import evaluate_criteria
from soak.analysis.rundata import run_data_from_store
from soak.analysis.scenario_sections import CriteriaConfig
from soak.points import Point
from soak.report import PhaseSpan, render_html, render_markdown
from soak.report.audit import audit
from soak.sinks.sqlite import SqliteStore
from tests.support.reports import T0, S, build, report_input, tags

RUN = "r-count"
TAGS = tags(RUN)
WARM_S, END_S, RATE = 30, 150, 500.0
GAP = range(100, 106)  # the service restarted: no ticks stored


def sent_at(t_s: int) -> float:
    return 503.0 if t_s == 43 else RATE


def write(store: SqliteStore) -> None:
    points = []
    for t_s in range(1, END_S + 1):
        if t_s in GAP:
            continue
        # The load engine's window jitters around the tick: its own rate reads 300 q/s on
        # the first tick and 1,018 q/s where 503 were sent in a 0.49 s window.
        achieved = {1: 300.0, 43: 1018.0}.get(t_s, RATE)
        fields = {"sent": sent_at(t_s), "completed": sent_at(t_s), "lost": 0.0}
        fields |= {"rate_target": RATE, "rate_achieved": achieved, "wrong_answers": 0.0}
        points.append(Point("load", fields, T0 + t_s * S, {**TAGS, "class": "all"}))
    store.write(points)


def report_of(store: SqliteStore) -> dict:  # type: ignore[type-arg]
    """The report of the run written into `store` (closes it): its criteria and phases."""
    warm_end = T0 + WARM_S * S
    data = run_data_from_store(store, RUN, warm_end, run_start_ns=T0)
    criteria = evaluate_criteria(CriteriaConfig(lost_ratio_max=0.01), data)
    phases = [
        PhaseSpan("warmup", T0, warm_end, True),
        PhaseSpan("steady", warm_end, T0 + END_S * S),
    ]
    return build(store, report_input(RUN, END_S, phases, criteria=criteria))


def run_report(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    store = SqliteStore(tmp_path / "points.db")
    write(store)
    return report_of(store)


def test_criteria_count_the_phases_after_the_warm_up(tmp_path: Path) -> None:
    report = run_report(tmp_path)
    warm, steady = report["phases"]
    steady_sent = sum(sent_at(t) for t in range(WARM_S + 1, END_S + 1) if t not in GAP)
    assert steady["metrics"]["sent"] == steady_sent
    lost = next(c for c in report["criteria"] if c["name"] == "lost_ratio" and c["window"] == "run")
    assert f"0 of {steady_sent:,.0f} queries lost" in lost["message"]
    assert warm["metrics"]["sent"] == WARM_S * RATE
    # The phase's rate is what it sent over how long it ran: 15,000 in 30 s is 500 q/s.
    assert warm["metrics"]["rate_achieved_qps"] == RATE
    assert report["judged_from_s"] == WARM_S
    assert "count the ticks after it" in render_markdown(report)


def test_the_achieved_rate_plot_agrees_with_each_ticks_sent(tmp_path: Path) -> None:
    load = next(p for p in run_report(tmp_path)["plots"] if p["id"] == "load")
    achieved = next(ln for ln in load["lines"] if ln["name"] == "achieved")
    by_x = {x: v for x, v in achieved["points"] if v is not None}
    assert by_x[43.0] == 503.0
    assert max(by_x.values()) == 503.0


def test_missing_ticks_are_drawn_as_a_gap(tmp_path: Path) -> None:
    report = run_report(tmp_path)
    load = next(p for p in report["plots"] if p["id"] == "load")
    for line in load["lines"]:
        breaks = [x for x, v in line["points"] if v is None]
        assert len(breaks) == 1 and GAP.start < breaks[0] < GAP.stop, line["name"]
    html = render_html(report)
    path = next(ln for ln in html.splitlines() if 'data-series="achieved"' in ln)
    assert path.count("M") == 2  # two segments: before and after the gap


def write_ledger(store: SqliteStore, seconds: int, *, broken_at: int | None = None) -> None:
    """One-second windows of the ledger at RATE; `broken_at`: a window that says it
    completed more than it sent."""
    points = []
    for t_s in range(1, seconds + 1):
        completed = RATE + 5 if t_s == broken_at else RATE
        fields = {"due": RATE, "sent": RATE, "skipped": 0.0, "completed": completed}
        fields |= {"lost": 0.0, "rate_target": RATE, "rate_achieved": RATE}
        points.append(Point("load", fields, T0 + t_s * S, {**TAGS, "class": "all"}))
    store.write(points)


def ledger_report(tmp_path: Path, broken_at: int | None = None) -> tuple[SqliteStore, dict]:  # type: ignore[type-arg]
    store = SqliteStore(tmp_path / "points.db")
    write_ledger(store, END_S, broken_at=broken_at)
    report = report_of(store)  # closes it
    return SqliteStore(tmp_path / "points.db"), report


def test_the_audit_finds_every_table_in_agreement_with_the_ledger(tmp_path: Path) -> None:
    store, report = ledger_report(tmp_path)
    totals = {"due": END_S * RATE, "sent": END_S * RATE, "completed": END_S * RATE, "lost": 0}
    try:
        assert audit(store, RUN, report, totals) == []
    finally:
        store.close()
    warm, steady = report["phases"]
    assert warm["metrics"]["due"] + steady["metrics"]["due"] == END_S * RATE
    assert steady["metrics"]["rate_achieved_qps"] == steady["metrics"]["rate_target_qps"] == RATE
    (gen,) = [c for c in report["criteria"] if c["name"] == "generator"]
    assert gen["value"] == 1.0  # sent over due: never above 1


def test_the_audit_names_each_figure_that_disagrees(tmp_path: Path) -> None:
    store, report = ledger_report(tmp_path, broken_at=40)
    report["classes"][0]["sent"] += 1  # a table that counted one query twice
    totals = {"sent": END_S * RATE - 7, "completed": END_S * RATE + 5}  # a stale result.json
    try:
        found = audit(store, RUN, report, totals)
    finally:
        store.close()
    assert any(line.startswith(f"window at {T0 + 40 * S}: completed + lost") for line in found)
    assert "completed 75,005 above sent" in found
    assert "classes `all`: sent 60,001 != ledger 60,000" in found
    assert "result.json load_totals: sent 74,993 != ledger 75,000" in found
    assert not any(line.startswith("phases") for line in found)  # the phases agree
    report["accounting"] = found
    assert "- classes `all`: sent 60,001 != ledger 60,000" in render_markdown(report)
