"""The per-class table, the dig-probe counts and plot titles by what was measured."""

from __future__ import annotations

from pathlib import Path

from soak.histogram import LatencyHistogram
from soak.names import LAT_HIST_FIELD
from soak.points import Point
from soak.report import PhaseSpan, render_html, render_markdown
from soak.sinks.sqlite import SqliteStore
from tests.support.reports import T0, S, build, report_input, tags

RUN = "r-classes"


def window_histogram(answers: int, p99_ms: float) -> str:
    """A window's stored histogram: 99% of its answers at a quarter of p99, the rest at it."""
    h = LatencyHistogram()
    slow = max(1, answers // 100)
    h.record(round(p99_ms * 250), answers - slow)
    h.record(round(p99_ms * 1000), slow)
    return h.encode()


TAGS = tags(RUN)


def run_report(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    store = SqliteStore(tmp_path / "points.db")
    points = []
    for t_s in range(1, 21):
        t = T0 + t_s * S
        for cls, sent, lost, p99 in (
            ("all", 300, 2, 3.0),
            ("hit", 200, 0, 1.0),
            ("nx", 100, 2, 5.0),
        ):
            fields = {"sent": float(sent), "completed": float(sent - lost), "lost": float(lost)}
            fields |= {"lat_p50_ms": p99 / 4, "lat_p99_ms": p99, "wrong_answers": 0.0}
            fields[LAT_HIST_FIELD] = window_histogram(sent - lost, p99)
            fields |= {"rcode_noerror": float(sent - lost)} if cls != "nx" else {}
            fields |= {"rcode_nxdomain": float(sent - lost)} if cls != "hit" else {}
            points.append(Point("load", fields, t, {**TAGS, "class": cls}))
        points.append(Point("process", {"threads": 4.0}, t, TAGS))
        ok = t_s != 7
        fields = {"latency_ms": 2.0 + t_s / 10, "rcode": 0.0, "ok": ok}
        points.append(Point("dig", fields, t, {**TAGS, "probe": "www.example.test/A"}))
    store.write(points)
    return build(store, report_input(RUN, 20, [PhaseSpan("steady", T0, T0 + 20 * S)]))


def test_per_class_table_counts_sent_lost_latency_and_rcodes(tmp_path: Path) -> None:
    report = run_report(tmp_path)
    rows = {c["class"]: c for c in report["classes"]}
    assert list(rows) == ["all", "hit", "nx"]
    assert (rows["nx"]["sent"], rows["nx"]["lost"]) == (2000, 40)
    assert rows["hit"]["rcodes"] == {"NOERROR": 4000}
    assert rows["nx"]["p99_ms"] > rows["hit"]["p99_ms"]
    assert rows["all"]["sent"] == report["phases"][0]["metrics"]["sent"]
    md = render_markdown(report)
    assert "## Classes" in md and "NXDOMAIN 1,960" in md


def test_probe_successes_are_counted_per_probe(tmp_path: Path) -> None:
    report = run_report(tmp_path)
    assert report["probes"] == [
        {"probe": "www.example.test/A", "ok": 19, "total": 20, "max_latency_ms": 4.0}
    ]
    assert "19 of 20 (95.0%)" in render_html(report)


def test_a_server_without_goroutines_gets_a_threads_plot(tmp_path: Path) -> None:
    tasks = next(p for p in run_report(tmp_path)["plots"] if p["id"] == "tasks")
    assert tasks["title"] == "Threads"


def test_setup_names_soaks_own_version_and_the_reported_one(tmp_path: Path) -> None:
    from importlib import metadata

    setup = run_report(tmp_path)["setup"]
    assert setup["soak"] == metadata.version("soak")
    assert setup["Version reported"].startswith("not asked")


def test_setup_shows_the_version_the_target_reports(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    inp = report_input(RUN, 1, [], detected_version="unbound 1.19.3")
    assert build(store, inp)["setup"]["Version reported"] == "unbound 1.19.3"
