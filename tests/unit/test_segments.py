"""A soak across an upgrade split into segments, one per version: by due second at the
swap, every window in exactly one segment (the segments' sent add up to the run's), the
latency of each from its own merged histograms, the leak verdicts of each fitted on its
own seconds (a version that leaks is found in its segment, the flat one is not blamed)."""

from __future__ import annotations

import json
from pathlib import Path

from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.segments import span_of, stamp_bounds, version_spans
from soak.clock import NS_PER_S
from soak.names import LAT_HIST_FIELD
from soak.points import Point
from soak.report import PhaseSpan, render_html, render_json, render_markdown
from soak.report.audit import ledger_sums
from soak.report.segments import version_segments
from soak.sinks.sqlite import SqliteStore
from tests.support.reports import T0, build, report_input, tags
from tests.unit.test_report_classes import window_histogram

S = NS_PER_S
RUN = "r-segments"
END_S = 120
SWAP_AT_S = 60.4  # the swap begins in second 60: seconds 60.. are the new version's
LEAKS = LeaksConfig(window_s=10.0, min_windows=3, startup_max_s=0, thresholds={"rss_bytes": 1e6})


def test_windows_are_split_by_due_second_at_the_swap() -> None:
    spans = version_spans(T0, T0 + END_S * S, "1", [(SWAP_AT_S, "2")])
    assert [(s.version, s.start_s, s.end_s) for s in spans] == [
        ("1", 0.0, 60.0),
        ("2", 60.0, 120.0),
    ]
    # The window of second 59 is stamped at 60 s: the old version's; second 60's is the new's.
    assert span_of(spans, T0 + 60 * S).version == "1"
    assert span_of(spans, T0 + 61 * S).version == "2"
    assert span_of(spans, T0 + 500 * S).version == "2"  # a window past the plan: the last
    assert stamp_bounds(spans, spans[0]) == (None, T0 + 60 * S)
    assert stamp_bounds(spans, spans[1]) == (T0 + 60 * S, None)


def write_run(store: SqliteStore) -> None:
    """120 one-second windows; the old version flat at 1 ms p99, the new one at 5 ms with
    its RSS growing 50 MB an hour from its start. The swap's second lost 40 queries."""
    points = []
    for second in range(END_S):
        t = T0 + (second + 1) * S
        new = second >= 60
        lost = 40 if second == 60 else 1
        fields: dict[str, float | str] = {"due": 100.0, "sent": 100.0, "skipped": 0.0}
        fields |= {"completed": float(100 - lost), "lost": float(lost), "abandoned": 0.0}
        p99_ms = (5.0 if new else 1.0) * (1 + second % 3 / 10)  # a little noise
        fields[LAT_HIST_FIELD] = window_histogram(100 - lost, p99_ms)
        fields |= {"lat_p50_ms": p99_ms / 4, "lat_p99_ms": p99_ms}
        points.append(Point("load", fields, t, {**tags(RUN), "class": "all"}))
        rss = 50e6 + (50e6 * (second - 60) / 3600 if new else 0.0)
        points.append(Point("process", {"rss_bytes": rss}, t, tags(RUN)))
    store.write(points)


def test_segments_add_up_to_the_run_and_tell_the_versions_apart(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    try:
        write_run(store)
        spans = version_spans(T0, T0 + END_S * S, "1", [(SWAP_AT_S, "2")])
        swap = {"at_s": SWAP_AT_S, "ready_s": 0.8, "status": "pass"}
        swaps = {1: swap | {"cases": [{"name": "ready", "status": "pass"}]}}
        old, new = version_segments(store, RUN, spans, LEAKS, T0, swaps)
        whole = ledger_sums(store, RUN)
    finally:
        store.close()
    assert old["load"]["sent"] + new["load"]["sent"] == whole.counts["sent"] == 12_000
    assert old["load"]["lost"] + new["load"]["lost"] == whole.counts["lost"]
    assert (old["load"]["seconds"], new["load"]["seconds"]) == (60, 60)
    assert new["load"]["lost"] == 59 + 40  # the swap's second is the new version's
    assert old["load"]["p99_ms"] < 2.0 < new["load"]["p99_ms"]
    (old_rss,) = old["leaks"]
    (new_rss,) = new["leaks"]
    assert old_rss["verdict"] == "ok"
    assert new_rss["verdict"] == "growing"
    assert (old["cases"], new["cases"]) == ([], [{"name": "ready", "status": "pass"}])
    # The swap from 60.4 s, ready 0.8 s later: seconds 60 and 61 (61.2 s is in 61).
    assert old["swap"] is None
    assert new["swap"] | {"cause": ""} == {
        "at_s": 60.4, "ready_s": 0.8, "status": "pass", "cause": "",
        "seconds": 2, "sent": 200, "lost": 41, "refused": 0,
    }  # fmt: skip
    # soak compare's statistics, the new version against the old: p99 five times worse.
    assert old["compared"] == []
    p99 = next(r for r in new["compared"] if r["name"] == "p99 latency")
    assert p99["verdict"] == "worse" and p99["diff_pct"] > 300
    low, high = p99["ci_pct"]
    assert 300 < low <= high
    rss = next(r for r in new["compared"] if r["name"] == "RSS")
    assert rss["verdict"] == "same"  # 50 MB an hour over a minute: 0.8 MB of 50


def test_a_run_of_one_version_has_no_segments(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    try:
        write_run(store)
        spans = version_spans(T0, T0 + END_S * S, "1", [])
        assert version_segments(store, RUN, spans, LEAKS, T0) == []
    finally:
        store.close()


def test_report_json_holds_the_segments(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    write_run(store)
    spans = version_spans(T0, T0 + END_S * S, "1", [(SWAP_AT_S, "2")])
    phases = [PhaseSpan("soak", T0, T0 + END_S * S)]
    swaps = {1: {"at_s": SWAP_AT_S, "ready_s": 0.8, "status": "pass", "cases": []}}
    inp = report_input(RUN, END_S, phases, versions=spans, leaks=LEAKS, swaps=swaps)
    report = build(store, inp)  # closes the store
    assert [s["version"] for s in report["segments"]] == ["1", "2"]
    assert sum(s["load"]["sent"] for s in report["segments"]) == 12_000
    assert json.loads(render_json(report))["segments"][1]["leaks"][0]["verdict"] == "growing"
    html, md = render_html(report), render_markdown(report)
    assert "<h2>Versions</h2>" in html and "<h3>Versions side by side</h3>" in html
    assert "<h3>2 against 1</h3>" in html and "<h3>Swap to 2: checks</h3>" not in html
    assert "## Versions: 2 against 1" in md
    assert "swaps.</p>" in html
    assert (
        "| its swap | \u2013 | ready 0.80 s after the stop; 41 of 200 lost in 2 s (0 refused) |"
        in md
    )
    side, against = [ln for ln in md.splitlines() if ln.startswith("| p99 latency (ms) |")]
    assert side == "| p99 latency (ms) | 1 | 5.02 |"  # the merged histograms' quantiles
    assert against.endswith("| worse |"), against
    assert "| leak: rss_bytes | ok +0 MiB/h | growing +47.7 MiB/h |" in md
