"""`soak compare`: figures of runs, verdicts against thresholds and the runs' own noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.analysis.comparison import Figure, compare_figures, verdict_of
from soak.analysis.soakfigures import soak_figures
from soak.analysis.stats import coefficient_of_variation, holm, welch_t_test
from soak.bench.compare import bench_figures
from soak.bench.inputs import leak_rows, resolve
from soak.commands.compare import parse_thresholds
from soak.errors import InputError
from soak.points import Point
from soak.sinks.sqlite import SqliteStore


def test_verdicts() -> None:
    ci_down, ci_up = (-25.0, -15.0), (50.0, 150.0)
    # within the threshold: same, whatever the interval and p
    assert verdict_of("throughput", 100, 95, -5.0, (-8.0, -2.0), 10, 0.001)[0] == "same"
    # beyond it, significant after the correction, outside the noise: worse / better
    assert verdict_of("throughput", 100, 80, -20.0, ci_down, 10, 0.01)[0] == "worse"
    assert verdict_of("latency", 2.0, 1.0, -50.0, (-60.0, -40.0), 25, 0.01)[0] == "better"
    assert verdict_of("latency", 1.0, 2.0, 100.0, ci_up, 25, 0.01)[0] == "worse"
    # beyond it but not significant once corrected: same, and says why
    v, note = verdict_of("throughput", 100, 80, -20.0, ci_down, 10, 0.2)
    assert v == "same" and "not significant" in note
    # beyond it but the interval holds 0: the runs' noise covers it
    v, note = verdict_of("throughput", 100, 80, -20.0, (-40.0, 5.0), 10, 0.01)
    assert v == "same" and "noise" in note
    # a side that varies more than 10 %: erratic, not worse
    v, note = verdict_of("latency", 1.0, 2.0, 100.0, ci_up, 25, 0.01, (0.05, 0.4))
    assert v == "erratic" and "B 0.40" in note
    # ... significant or not: the noise is the answer (one slow run of three)
    v, note = verdict_of("throughput", 37.0, 10.8, -71.0, (-74.0, 30.0), 10, 0.66, (0.6, 0.03))
    assert v == "erratic" and "A 0.60" in note
    # ... unless the difference is far beyond that spread (a 5x drop, sides at 11-12 %)
    v, _ = verdict_of("throughput", 65.9, 11.8, -82.0, (-85.6, -78.8), 10, 0.0001, (0.11, 0.12))
    assert v == "worse"
    # ... measured as a fold change: a drop to a sixth beside a side at 29 % (a 0.05-CPU
    # unbound against a free one on a busy machine) is six spreads away, not "within 3"
    drop = (-88.9, -75.2)
    v, _ = verdict_of("throughput", 37069, 5823, -84.3, drop, 10, 0.006, (0.29, 0.08))
    assert v == "worse"
    # the same spread and a rise of the same percentage is a fold of 1.84 only: erratic
    v, _ = verdict_of("throughput", 5823, 10732, 84.3, (75.2, 88.9), 10, 0.006, (0.29, 0.08))
    assert v == "erratic"
    # tiny absolute latency changes are noise at any percentage
    assert verdict_of("latency", 0.02, 0.04, 100.0, (90.0, 110.0), 25, 0.01)[0] == "same"
    # too few values for a test: not judged, never a verdict either way
    v, note = verdict_of("throughput", 100, 50, -50.0, None, 10, None)
    assert v == "not judged" and "fewer than 3" in note


def test_holm_corrects_for_the_number_of_figures() -> None:
    assert holm([0.01, 0.04, None, 0.03]) == [
        pytest.approx(0.03),
        pytest.approx(0.06),
        None,
        pytest.approx(0.06),
    ]
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # monotone, capped at 1
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([1.0]) is None
    assert coefficient_of_variation([0.9, 1.1]) == pytest.approx(0.1414, rel=1e-3)


def test_welch_t_test_matches_the_textbook() -> None:
    # scipy.stats.ttest_ind([1, 2, 3], [4, 5, 6], equal_var=False): t 3.674, p 0.0213
    t, p = welch_t_test([1, 2, 3], [4, 5, 6])
    assert t == pytest.approx(3.6742, rel=1e-4) and p == pytest.approx(0.02131, rel=1e-3)
    assert welch_t_test([1, 1], [1, 1]) == (0.0, 1.0)
    assert welch_t_test([100, 102, 98], [60, 61, 59])[1] < 0.001  # 3 a side can be called
    assert welch_t_test([1, 2, 3, 4, 5], [1.5, 2.5, 3.5, 4.5, 9])[1] > 0.4  # an outlier


def fixed_rate_result(run_id: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "soak-bench",
        "id": run_id,
        "target": {"name": "unbound", "version": "1"},
        "classes": [{"name": "zone", "fixed": runs}],
    }


def fixed_run(p99_ms: float, windows_p99: list[float], p50: float = 0.2) -> dict[str, Any]:
    return {
        "offered_qps": 300.0,
        "latency_ms": {"p50": p50, "p99": p99_ms},
        "windows": {
            "p50_ms": [p50] * len(windows_p99),
            "p99_ms": windows_p99,
            "target_cores": [0.05] * len(windows_p99),
        },
        "target_cores": 0.05,
    }


def test_an_aa_pair_once_called_worse_is_same_now() -> None:
    """The issue's A/A pair: one busy moment during B moved its per-second p99s
    (0.866 -> 3.253 ms at the median); the runs' own p99s do not differ."""
    a = fixed_rate_result(
        "a",
        [
            fixed_run(0.866, [0.81, 0.86, 0.87, 0.85, 0.9, 0.88, 0.84, 0.86, 0.87, 0.83]),
            fixed_run(2.9, [0.9, 0.95, 2.9, 3.1, 0.92, 0.88, 0.9, 0.91, 0.93, 0.9]),
            fixed_run(1.1, [0.88, 0.9, 1.1, 0.95, 0.9, 0.87, 0.92, 0.9, 0.91, 0.89]),
        ],
    )
    b = fixed_rate_result("b", [
        fixed_run(3.253, [0.9, 3.1, 3.3, 3.25, 3.2, 3.4, 3.26, 3.3, 3.1, 3.25]),
        fixed_run(0.9, [0.85, 0.9, 0.88, 0.9, 0.86, 0.87, 0.9, 0.91, 0.88, 0.9]),
        fixed_run(1.2, [0.9, 1.2, 0.95, 0.9, 0.92, 0.9, 0.88, 0.93, 0.9, 0.91]),
    ])  # fmt: skip
    cmp = compare_figures("a", bench_figures(a), "b", bench_figures(b))
    by_name = {r.name: r for r in cmp.rows}
    p99 = by_name["zone @ 300 q/s p99"]
    assert (p99.n_a, p99.n_b) == (3, 3)  # one value a run
    assert p99.verdict != "worse" and cmp.worse == []
    # The same pair judged by its first runs only: one p99 a side is not judged.
    one = compare_figures(
        "a", bench_figures(fixed_rate_result("a", a["classes"][0]["fixed"][:1])),
        "b", bench_figures(fixed_rate_result("b", b["classes"][0]["fixed"][:1])),
    )  # fmt: skip
    assert {r.name: r.verdict for r in one.rows}["zone @ 300 q/s p99"] == "not judged"
    assert one.worse == []


def test_a_real_2x_difference_is_still_worse() -> None:
    quiet = [0.8, 0.82, 0.81, 0.79, 0.8, 0.81]
    a = fixed_rate_result("a", [fixed_run(p, quiet) for p in (0.8, 0.82, 0.79, 0.81, 0.8)])
    slow = [2 * v for v in quiet]
    b = fixed_rate_result("b", [fixed_run(p, slow, 0.4) for p in (1.6, 1.62, 1.59, 1.63, 1.6)])
    cmp = compare_figures("a", bench_figures(a), "b", bench_figures(b))
    verdicts = {r.name: r.verdict for r in cmp.rows}
    assert verdicts["zone @ 300 q/s p99"] == "worse"
    assert verdicts["zone @ 300 q/s p50"] == "worse"
    assert verdicts["zone @ 300 q/s server CPU"] == "same"
    p99 = next(r for r in cmp.rows if r.name == "zone @ 300 q/s p99")
    assert p99.p_adjusted is not None and p99.p_value is not None
    assert p99.p_adjusted >= p99.p_value  # corrected for the three figures


def test_a_2x_difference_on_an_erratic_side_is_erratic() -> None:
    a = {"q/s": Figure("throughput", "q/s", [1000.0, 1010.0, 990.0, 1005.0, 995.0])}
    b = {"q/s": Figure("throughput", "q/s", [300.0, 700.0, 400.0, 600.0, 500.0])}  # CV 0.32
    cmp = compare_figures("a", a, "b", b)
    assert cmp.rows[0].verdict == "erratic" and cmp.worse == [] and cmp.erratic == ["q/s"]
    assert cmp.to_json()["erratic"] == ["q/s"]


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
    assert figures["cached @ 500 q/s p99"].values == [1.0]  # one value a run
    assert figures["cached @ 500 q/s p50"].values == [0.11, 0.1]  # the first window dropped
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
    figures = soak_figures(store, "r1", t0 + 5 * 10**9, interval_s=1.0)
    store.close()
    assert figures["answered q/s"].values == [505.0, 506.0, 507.0, 508.0, 509.0]
    assert figures["p99 latency"].kind == "tail"
    assert figures["RssAnon"].values == [2.0] * 5 and figures["fds"].values == [40.0] * 5


def test_soak_run_figures_read_the_ledger_s_one_second_windows(tmp_path: Path) -> None:
    """With 2-s ticks the ledger still stores one window a second: answered q/s is a
    window's count over its one second, and the window ending at the warm-up's end is
    the warm-up's."""
    store = SqliteStore(tmp_path / "points.db")
    tags = {"soak": "r1", "scenario": "s", "target": "t", "version": "1", "class": "all"}
    t0 = 1_000_000_000_000
    points = [
        Point("load", {"due": 500.0, "sent": 500.0, "completed": 500.0 + i}, t0 + i * 10**9, tags)
        for i in range(1, 11)
    ]
    store.write(points)
    store.flush()
    figures = soak_figures(store, "r1", t0 + 5 * 10**9, interval_s=2.0)
    store.close()
    assert figures["answered q/s"].values == [506.0, 507.0, 508.0, 509.0, 510.0]


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


def _soak_run(data: Path, run_id: str, fields: dict[str, float]) -> None:
    """A run's record in state.db and ten ticks of `process` points in points.db."""
    from soak.config import Scenario
    from soak.runs.state import StateStore

    sc = Scenario.model_validate(
        {
            "name": run_id,
            "target": {"runtime": "process", "argv": ["/bin/true"]},
            "phases": [{"name": "steady", "duration_s": "10s"}],
        }
    )
    state = StateStore(data / "state.db")
    state.create_run(run_id, sc, data / "runs" / run_id)
    state.update_run(run_id, status="passed", origin_ns=1_000 * 10**9)
    state.close()
    tags = {"soak": run_id, "scenario": run_id, "target": "target", "version": ""}
    store = SqliteStore(data / "points.db")
    store.write([Point("process", fields, (1_000 + i) * 10**9, tags) for i in range(10)])
    store.close()


def _compare(data: Path, *runs: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from soak.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["compare", *runs, "--data-dir", str(data)])
    return int(exited.value.code or 0), capsys.readouterr().err.strip()


def test_no_figure_in_common_or_points_pruned_is_exit_2_never_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from soak.cli import main

    _soak_run(tmp_path, "fds-only", {"fds": 40.0})
    _soak_run(tmp_path, "threads-only", {"threads": 4.0})
    code, err = _compare(tmp_path, "fds-only", "threads-only", capsys=capsys)
    assert code == 2
    assert err == (
        "soak: fds-only and threads-only have no figure in common (fds-only: fds;"
        " threads-only: threads); nothing to compare"
    )
    with pytest.raises(SystemExit) as pruned:
        main(["prune", "--older-than", "1h", "--data-dir", str(tmp_path)])
    assert pruned.value.code in (0, None)
    code, err = _compare(tmp_path, "fds-only", "fds-only", capsys=capsys)
    assert code == 2
    assert err.startswith("soak: fds-only: its points were removed by soak prune (")
    assert err.endswith("); nothing to compare")


def test_a_difference_below_the_floor_says_its_unit() -> None:
    a = Figure("latency", "ms", [0.031, 0.032, 0.030])
    b = Figure("latency", "ms", [0.034, 0.035, 0.033])
    (row,) = compare_figures("A", {"p50 latency": a}, "B", {"p50 latency": b}).rows
    assert (row.verdict, row.note) == ("same", "difference below 0.05 ms")


def test_a_fixed_rate_p50_is_the_one_the_bench_itself_shows() -> None:
    """The bench's table shows a fixed rate's p50 over all its queries (0.031 ms); the
    compare table showed the median of its per-second p50s (0.034 ms). Both say 0.031 now;
    the per-second values are still what the test compares."""
    run = fixed_run(0.9, [0.9] * 10, p50=0.031)
    run["windows"]["p50_ms"] = [0.05, 0.034, 0.034, 0.035, 0.033, 0.034, 0.034, 0.036, 0.034, 0.033]
    figures = bench_figures(fixed_rate_result("a", [run]))
    p50 = figures["zone @ 300 q/s p50"]
    assert p50.shown == 0.031 and len(p50.values) == 9
    (row,) = [r for r in compare_figures("a", figures, "b", figures).rows if r.name.endswith("p50")]
    assert row.a == row.b == 0.031
