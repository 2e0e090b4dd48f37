"""`soak compare`: figures of runs, verdicts against thresholds and the runs' own noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.bench.compare import Figure, bench_figures, compare_figures, verdict_of
from soak.bench.compare_command import parse_thresholds
from soak.bench.inputs import _soak_figures, leak_rows, resolve
from soak.errors import InputError
from soak.points import Point
from soak.sinks.sqlite import SqliteStore


def test_verdicts() -> None:
    # within the threshold: same, whatever the interval
    assert verdict_of("throughput", 100, 95, -5.0, (-8.0, -2.0), 10)[0] == "same"
    # beyond it and outside the noise: worse (throughput down) / better (latency down)
    assert verdict_of("throughput", 100, 80, -20.0, (-25.0, -15.0), 10)[0] == "worse"
    assert verdict_of("latency", 2.0, 1.0, -50.0, (-60.0, -40.0), 25)[0] == "better"
    assert verdict_of("latency", 1.0, 2.0, 100.0, (50.0, 150.0), 25)[0] == "worse"
    # beyond it but the interval holds 0: the runs' noise covers it
    v, note = verdict_of("throughput", 100, 80, -20.0, (-40.0, 5.0), 10)
    assert v == "same" and "noise" in note
    # tiny absolute latency changes are noise at any percentage
    assert verdict_of("latency", 0.02, 0.04, 100.0, (90.0, 110.0), 25)[0] == "same"
    # no interval (too few values): twice the threshold decides, and says so
    v, note = verdict_of("throughput", 100, 50, -50.0, None, 10)
    assert v == "worse" and "few values" in note
    v, note = verdict_of("throughput", 100, 85, -15.0, None, 10)
    assert v == "same" and "twice the threshold" in note


def test_compare_figures_noise_and_shift() -> None:
    steady = [100.0, 102.0, 98.0, 101.0, 99.0]
    a = {"q/s": Figure("throughput", "q/s", steady), "only a": Figure("count", "", [1.0])}
    same = compare_figures("A", a, "B", {"q/s": Figure("throughput", "q/s", [101.0, 97.0, 100.0])})
    (row,) = same.rows
    assert row.verdict == "same" and row.ci_pct is not None and row.p_value is not None
    assert same.only_a == ["only a"] and same.worse == []
    slower = compare_figures("A", a, "B", {"q/s": Figure("throughput", "q/s", [60.0, 61.0, 59.0])})
    assert slower.rows[0].verdict == "worse" and slower.worse == ["q/s"]
    assert slower.rows[0].diff_pct == pytest.approx(-40.0)
    loose = compare_figures(
        "A", a, "B", {"q/s": Figure("throughput", "q/s", [60.0, 61.0, 59.0])}, {"throughput": 50}
    )
    assert loose.rows[0].verdict == "same"


def bench_result(qps: list[float], run_id: str = "b1") -> dict[str, Any]:
    runs = [
        {"answered_qps": q, "latency_ms": {"avg": 1.0}, "cpu_us_per_query": 1e6 / q} for q in qps
    ]
    return {
        "kind": "soak-bench",
        "id": run_id,
        "target": {"name": "unbound", "version": "1"},
        "classes": [
            {
                "name": "cached",
                "saturation": {"runs": runs},
                "knee": {"within_slo_qps": 900.0, "capacity_qps": 1000.0},
                "fixed": [
                    {
                        "offered_qps": 500.0,
                        "latency_ms": {"p50": 0.1, "p99": 1.0},
                        "windows": {"p50_ms": [0.1, 0.11, 0.1], "p99_ms": [1.0, 1.2, 0.9]},
                        "target_cores": 0.5,
                    }
                ],
            }
        ],
    }


def test_bench_figures_and_resolve_by_file_dir_and_id(tmp_path: Path) -> None:
    figures = bench_figures(bench_result([1000.0, 1100.0, 900.0]))
    assert figures["cached saturation q/s"].values == [1000.0, 1100.0, 900.0]
    assert figures["cached server CPU per query"].kind == "cpu"
    assert figures["cached knee (within SLO)"].values == [900.0]
    assert figures["cached @ 500 q/s p99"].kind == "tail"
    assert figures["cached @ 500 q/s p50"].values == [0.1, 0.11, 0.1]
    import json

    d = tmp_path / "bench" / "b1"
    d.mkdir(parents=True)
    (d / "bench.json").write_text(json.dumps(bench_result([1.0])))
    assert resolve(str(d / "bench.json"), tmp_path).id == "b1"
    assert resolve(str(d), tmp_path).id == "b1"
    assert resolve("b1", tmp_path).label == "unbound 1"
    side = tmp_path / "bench" / "b2" / "B"  # `soak bench --compare` keeps A/ and B/
    side.mkdir(parents=True)
    (side / "bench.json").write_text(json.dumps(bench_result([1.0], "b2-B")))
    assert resolve("b2-B", tmp_path).id == "b2-B"
    with pytest.raises(InputError, match="no soak state"):
        resolve("nothing-here", tmp_path)
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(InputError, match="not a `soak bench` result"):
        resolve(str(tmp_path / "x.json"), tmp_path)


def test_soak_run_figures_from_the_point_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    tags = {"soak": "r1", "scenario": "s", "target": "t", "version": "1"}
    t0 = 1_000_000_000_000
    points = []
    for i in range(10):
        t = t0 + i * 10**9
        load = {"completed": 500 + i, "lat_p50_ms": 0.2, "lat_p99_ms": 1.5}
        points.append(Point("load", load, t, {**tags, "class": "all"}))
        points.append(Point("load", {"completed": 1}, t, {**tags, "class": "cached"}))
        points.append(Point("process", {"rss_anon_bytes": 2 * 1024**2, "fds": 40}, t, tags))
    store.write(points)
    store.flush()
    figures = _soak_figures(store, "r1", t0 + 5 * 10**9, interval_s=1.0)
    store.close()
    assert figures["answered q/s"].values == [505.0, 506.0, 507.0, 508.0, 509.0]
    assert figures["p99 latency"].kind == "tail"
    assert figures["RssAnon"].values == [2.0] * 5 and figures["fds"].values == [40.0] * 5


def test_leak_rows_and_thresholds() -> None:
    from soak.bench.inputs import RunFigures

    a = RunFigures("a", "x 1", {}, {"fds": {"slope_per_hour": 0.0, "verdict": "ok"}})
    b = RunFigures("b", "x 2", {}, {"fds": {"slope_per_hour": 9.0, "verdict": "growing"}})
    (row,) = leak_rows(a, b)
    assert row == {
        "resource": "fds",
        "a_slope_per_hour": 0.0,
        "a_verdict": "ok",
        "b_slope_per_hour": 9.0,
        "b_verdict": "growing",
    }
    assert parse_thresholds(("latency=30", "throughput=5%")) == {"latency": 30, "throughput": 5}
    for bad in ("latency", "speed=3", "latency=x", "cpu=-1"):
        with pytest.raises(InputError):
            parse_thresholds((bad,))
