"""The report's "What grew" section: RSS by mapping, Go profile diffs, culprits, projections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soak.analysis.leaks import LeakVerdict
from soak.clock import NS_PER_S
from soak.points import Point
from soak.profiles import write_profile
from soak.report import PhaseSpan, ReportInput, build_report, render_html, render_markdown
from soak.results.grew import report_section
from soak.runs.layout import profiles_dir
from soak.sinks.sqlite import SqliteStore

S = NS_PER_S
MiB = 1024**2
T0 = 1_790_000_000 * S
RUN = "r-grew"
TAGS = {"soak": RUN, "scenario": "refdns-demo", "target": "refdns", "version": "dev"}
PPROF = Path(__file__).resolve().parents[1] / "fixtures" / "pprof"
WARM_S, END_S = 60, 600


def points(with_maps: bool) -> list[Point]:
    out = []
    for t_s in range(10, END_S + 1, 10):
        t = T0 + t_s * S
        db = 2 * MiB * t_s / 10  # the query log's pages: file-backed, growing
        heap = 40 * MiB + 0.1 * MiB * t_s
        out.append(Point("process", {"rss_bytes": heap + db + 12 * MiB, "fds": 30}, t, TAGS))
        out.append(Point("process", {"fd_limit": 1024}, t, TAGS))
        out.append(Point("runtime", {"goroutines": 10 + 5 * t_s}, t, TAGS))
        if not with_maps:
            continue
        for kind, path, rss in (
            ("heap", "[heap+anon]", heap),
            ("lib", "[libraries]", 12 * MiB),
            ("file", "/data/querylog.db", db),
        ):
            fields = {
                "rss_bytes": rss,
                "pss_bytes": rss,
                "anon_bytes": rss if kind == "heap" else 0,
            }
            out.append(Point("memory_map", fields, t, {**TAGS, "kind": kind, "path": path}))
    return out


def verdict(resource: str, slope: float, name: str = "growing") -> LeakVerdict:
    return LeakVerdict(resource, name, slope, 0.001, 9, 1.0)


def build(tmp_path: Path, *, with_maps: bool, with_profiles: bool) -> dict[str, Any]:
    store = SqliteStore(tmp_path / "points.db")
    store.write(points(with_maps))
    run_dir = tmp_path / "run"
    if with_profiles:
        for t_s, n in ((0, 1), (WARM_S, 1), (END_S, 2)):
            for kind in ("heap", "goroutine"):
                text = (PPROF / f"refdns-leak-{kind}-{n}.txt").read_bytes()
                write_profile(profiles_dir(run_dir), T0 + t_s * S, "interval", kind, text)
    inp = ReportInput(
        run_id=RUN,
        scenario_name="refdns-demo",
        target_name="refdns",
        version="dev",
        target_desc="process: refdns -leak",
        started_ns=T0,
        ended_ns=T0 + END_S * S,
        status="passed",
        phases=[
            PhaseSpan("warmup", T0, T0 + WARM_S * S, True),
            PhaseSpan("steady", T0 + WARM_S * S, T0 + END_S * S),
        ],
        startup={},
        criteria=[],
        verdicts=[
            verdict("rss_bytes", 800 * MiB),
            verdict("goroutines", 18000),
            verdict("heap_inuse_bytes", 36 * MiB),
            verdict("fds", 0.0, "ok"),
        ],
        host={"name": "h"},
        run_dir=run_dir,
        memory_limit_bytes=2048 * MiB,
    )
    try:
        return build_report(store, inp, what_grew=report_section)
    finally:
        store.close()


def test_what_grew_names_mappings_functions_stacks_and_culprits(tmp_path: Path) -> None:
    report = build(tmp_path, with_maps=True, with_profiles=True)
    grew = report["what_grew"]
    assert grew["mappings"][0]["name"] == "file /data/querylog.db"  # grew most
    assert grew["mappings"][0]["start"] == 12 * MiB  # at the warm-up's end (60 s)
    assert grew["heap_functions"][0]["name"] == "main.(*server).leakName"
    assert grew["goroutine_stacks"][0]["name"] == "main.(*server).leakName.func1"
    assert grew["goroutine_stacks"][0]["delta"] == 2500
    chart = grew["chart"]
    assert [ln["name"] for ln in chart["lines"]] == [
        "file /data/querylog.db",
        "heap [heap+anon]",
        "lib [libraries]",
    ]
    top = chart["lines"][-1]["points"][-1][1]  # the top band is the total
    assert abs(top - (120 + 100 + 12)) < 0.01
    c = grew["culprits"]
    assert set(c) == {"rss_bytes", "goroutines", "heap_inuse_bytes"}  # growing ones only
    assert c["rss_bytes"]["culprit"].startswith("mapping file /data/querylog.db: +")
    rss_now = 232 * MiB
    assert c["rss_bytes"]["hours_to_limit"] == (2048 * MiB - rss_now) / (800 * MiB)
    assert c["goroutines"]["culprit"].startswith("main.(*server).leakName.func1 (refdns/")
    assert c["goroutines"]["projection"] == "no limit"
    assert c["heap_inuse_bytes"]["culprit"].startswith("main.(*server).leakName (refdns/")

    html = render_html(report)
    assert "<h2>What grew</h2>" in html and 'data-plot="memory_map"' in html
    assert "leakName.func1" in html and "When it will hurt" in html
    md = render_markdown(report)
    assert "## What grew: Goroutine stacks whose count grew most" in md
    assert "| goroutines | growing |" in md and "no limit" in md


def test_without_profiles_rss_by_mapping_is_still_shown(tmp_path: Path) -> None:
    report = build(tmp_path, with_maps=True, with_profiles=False)
    grew = report["what_grew"]
    assert grew["profiles"] is False and grew["goroutine_stacks"] == []
    assert grew["culprits"]["goroutines"]["culprit"] is None  # nothing names one
    assert "No Go profiles" in render_html(report)


def test_without_samplers_only_the_projection_is_given(tmp_path: Path) -> None:
    report = build(tmp_path, with_maps=False, with_profiles=False)
    grew = report["what_grew"]
    assert grew["chart"] is None and grew["mappings"] == []
    assert grew["culprits"]["rss_bytes"]["projection"].startswith("limit in ")
    assert "<h2>What grew</h2>" not in render_html(report)
