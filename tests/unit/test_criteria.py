"""Pass/fail criteria on hand-made run data: whole run and worst sliding window."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.analysis.criteria import (
    ClassSeries,
    CriterionResult,
    RunData,
    evaluate_criteria,
    failed,
)
from soak.analysis.latency import window_quantiles
from soak.analysis.leaks import LeakVerdict, leak_points
from soak.analysis.rundata import run_data_from_store
from soak.analysis.scenario_sections import CriteriaConfig
from soak.clock import NS_PER_S
from soak.histogram import MAX_RELATIVE_ERROR, LatencyHistogram
from soak.points import Point, event_point
from soak.sinks.sqlite import SqliteStore

S = NS_PER_S
T0 = 1_700_000_000 * S


def ticks(values: list[float], start_s: int = 0) -> list[tuple[int, float]]:
    return [(T0 + (start_s + i) * S, float(v)) for i, v in enumerate(values)]


def window_hist(n: int, bulk_ms: float, tail_ms: float) -> str:
    """A window's histogram: 98% of its `n` answers at `bulk_ms`, 2% at `tail_ms` (so its
    p99 is `tail_ms`)."""
    h = LatencyHistogram()
    tail = n * 2 // 100
    h.record(round(bulk_ms * 1000), n - tail)
    h.record(round(tail_ms * 1000), tail)
    return h.encode()


FAST = (0.5, 1.0)  # (bulk, p99) ms of a window
SLOW = (10.0, 20.0)


def load_run(
    n: int = 600,
    sent: float = 100.0,
    lost: dict[int, float] | None = None,
    slow: range | None = None,
    wrong: dict[int, float] | None = None,
) -> RunData:
    """`n` one-second windows of `sent` queries each; those in `slow` answer SLOW."""
    lost = lost or {}
    slow = slow or range(0)
    wrong = wrong or {}
    completed = [sent - lost.get(i, 0.0) for i in range(n)]
    latency = [
        (t, window_hist(int(c), *(SLOW if i in slow else FAST)))
        for i, ((t, c)) in enumerate(ticks(completed))
    ]
    cs = ClassSeries(
        sent=ticks([sent] * n),
        completed=ticks(completed),
        lost=ticks([lost.get(i, 0.0) for i in range(n)]),
        wrong_answers=ticks([wrong.get(i, 0.0) for i in range(n)]),
        latency=latency,
    )
    return RunData(start_ns=T0, end_ns=T0 + n * S, load={"all": cs, "cached": cs})


def cfg(**kw: object) -> CriteriaConfig:
    base: dict[str, object] = {"window_s": 60, "restarts_max": 0, "leaks_ok": True}
    base.update(kw)
    return CriteriaConfig.model_validate(base)


def by(results: list[CriterionResult], name: str) -> list[CriterionResult]:
    return [r for r in results if r.name == name]


def test_clean_run_passes_everything() -> None:
    c = cfg(p99_ms_max={"cached": 5}, wrong_answers_max=0)
    results = evaluate_criteria(c, load_run())
    assert failed(results) == []
    names = {r.name for r in results}
    assert {"lost_ratio", "wrong_answers", "p99_ms[cached]", "restarts"} <= names


def test_an_outage_fails_the_window_but_not_the_run_average() -> None:
    # 30 s of 5% loss in 10 minutes: 0.25% overall, 2.5% in the worst minute.
    data = load_run(lost={i: 5.0 for i in range(300, 330)})
    run, window = by(evaluate_criteria(cfg(lost_ratio_max=0.01), data), "lost_ratio")
    assert run.window == "run"
    assert run.ok and run.value == pytest.approx(0.0025)
    assert not window.ok
    assert window.value == pytest.approx(0.025)
    assert window.window.startswith("60 s to +0:05:")


def test_whole_run_loss_over_the_limit_fails() -> None:
    data = load_run(lost={i: 1.0 for i in range(600)})
    (run, window) = by(evaluate_criteria(cfg(lost_ratio_max=0.001), data), "lost_ratio")
    assert not run.ok and run.value == pytest.approx(0.01)
    assert not window.ok


def test_shorter_than_a_window_judges_the_run_only() -> None:
    results = by(evaluate_criteria(cfg(window_s=3600), load_run(n=100)), "lost_ratio")
    assert [r.window for r in results] == ["run"]


def test_wrong_answers_counted() -> None:
    data = load_run(wrong={10: 2, 20: 1})
    (r,) = by(evaluate_criteria(cfg(wrong_answers_max=2), data), "wrong_answers")
    assert not r.ok and r.value == 3
    assert "cached 3" in r.message


def test_p99_a_slow_half_minute_fails_its_window_not_the_run() -> None:
    # 3 slow windows of 600 (0.5% of the queries): the run's p99 stays with the fast
    # majority; the worst minute holds 5% slow queries and its p99 is theirs.
    data = load_run(slow=range(300, 303))
    run, window = by(evaluate_criteria(cfg(p99_ms_max={"cached": 5}), data), "p99_ms[cached]")
    assert run.ok and run.value is not None and run.value <= 1.0 * (1 + MAX_RELATIVE_ERROR)
    assert not window.ok
    assert window.value is not None and 10.0 < window.value <= 20.0 * (1 + MAX_RELATIVE_ERROR)
    assert window.window.startswith("60 s to +0:05:")


def test_p99_of_the_queries_not_the_mean_of_window_p99s() -> None:
    # 10% of the windows (and queries) have 98% at 10 ms and 2% at 20 ms; the rest 0.5 and
    # 1 ms. The mean of window p99s would be 2.9 ms; the slowest 1% of all queries are
    # the slow tenth's 10-ms bulk (its 20-ms tail is only 0.2% of all).
    data = load_run(slow=range(100, 160))
    run, window = by(evaluate_criteria(cfg(p99_ms_max={"cached": 5}), data), "p99_ms[cached]")
    assert not run.ok
    assert run.value == pytest.approx(10.0, rel=MAX_RELATIVE_ERROR)
    assert window.value == pytest.approx(20.0, rel=MAX_RELATIVE_ERROR)


def test_missing_class_fails() -> None:
    (r,) = by(evaluate_criteria(cfg(p99_ms_max={"miss": 5}), load_run()), "p99_ms[miss]")
    assert not r.ok and r.value is None
    assert "no latency samples" in r.message


def test_no_load_samples_fails_unless_no_load_was_expected() -> None:
    empty = RunData(start_ns=T0, end_ns=T0 + 60 * S)
    (r,) = by(evaluate_criteria(cfg(), empty), "lost_ratio")
    assert not r.ok
    empty.expect_load = False
    assert by(evaluate_criteria(cfg(), empty), "lost_ratio") == []


def test_restarts() -> None:
    data = load_run()
    data.restarts = 1
    (r,) = by(evaluate_criteria(cfg(restarts_max=0), data), "restarts")
    assert not r.ok and r.value == 1
    (r,) = by(evaluate_criteria(cfg(restarts_max=1), data), "restarts")
    assert r.ok


def test_leak_verdicts() -> None:
    data = load_run()
    data.verdicts = [
        LeakVerdict("rss_anon_bytes", "growing", 8e6, 0.001, 20, 5e6),
        LeakVerdict("fds", "levelling", 0.5, 0.01, 20, 1.0, 0.0),
        LeakVerdict("threads", "insufficient", 0.0, 1.0, 2, 1.0),
    ]
    results = evaluate_criteria(cfg(), data)
    (rss,) = by(results, "leak[rss_anon_bytes]")
    assert not rss.ok and "growing" in rss.message
    assert by(results, "leak[fds]")[0].ok
    # Too few windows: not judged, which is neither a pass nor a failure.
    (threads,) = by(results, "leak[threads]")
    assert (threads.ok, threads.judged, threads.result) == (False, False, "not judged")
    assert threads not in failed(results) and rss in failed(results)
    assert by(evaluate_criteria(cfg(leaks_ok=False), data), "leak[rss_anon_bytes]") == []


def test_a_rise_waited_for_is_not_judged_with_its_slope_and_why() -> None:
    data = load_run()
    note = "not judged yet: rising since the warm-up's end and not stopped"
    data.verdicts = [
        LeakVerdict("rss_anon_bytes", "insufficient", 8 * 2**20, 1e-4, 9, 5e6, note=note)
    ]
    (rss,) = by(evaluate_criteria(cfg(), data), "leak[rss_anon_bytes]")
    assert rss.result == "not judged"
    assert rss.message.startswith(
        "rss_anon_bytes at 8 MiB/h (threshold 4.77 MiB/h); not judged yet"
    )


def test_api_latency_per_endpoint() -> None:
    data = load_run()
    data.api_latency_ms = {
        "GET /stats/summary": ticks([10, 12, 3200, 11]),
        "GET /healthz": ticks([1, 1, 1]),
    }
    c = cfg(api_latency_ms_max={"GET /stats/summary": 1000, "GET /healthz": 50, "GET /x": 5})
    results = evaluate_criteria(c, data)
    (summary,) = by(results, "api_latency_ms[GET /stats/summary]")
    assert not summary.ok and summary.value == 3200
    assert "+0:00:02" in summary.message
    assert by(results, "api_latency_ms[GET /healthz]")[0].ok
    assert not by(results, "api_latency_ms[GET /x]")[0].ok  # never sampled


def test_querylog_drops_follow_counter_resets() -> None:
    data = load_run()
    # 0 -> 5 -> 5 -> (restart) 2 -> 4 : 5 + 2 + 2 = 9 dropped
    data.querylog_dropped_total = ticks([0, 5, 5, 2, 4])
    results = by(
        evaluate_criteria(cfg(querylog_dropped_max=8, window_s=2), data), "querylog_dropped"
    )
    run = results[0]
    assert not run.ok and run.value == 9
    assert results[1].value == 5  # the worst 2 s window holds the jump 0 -> 5


def test_unset_criteria_are_not_judged() -> None:
    c = CriteriaConfig(lost_ratio_max=None, wrong_answers_max=None, restarts_max=None)
    data = load_run()
    assert [r.name for r in evaluate_criteria(c, data)] == []


def test_run_data_from_a_real_store(tmp_path: Path) -> None:
    tags = {"soak": "r1", "scenario": "s", "target": "t", "version": "1"}
    store = SqliteStore(tmp_path / "points.db")
    points = []
    for i in range(120):
        t = T0 + i * S
        for cls in ("all", "cached"):
            fields: dict[str, float | str] = {"sent": 100.0, "completed": 99.0, "lost": 1.0}
            fields["lat_hist"] = window_hist(99, 1.0, 2.0)
            points.append(Point("load", fields, t, {**tags, "class": cls}))
        points.append(Point("runtime", {"querylog_dropped_total": float(i // 10)}, t, tags))
        points.append(Point("host", {"cpu_busy_ratio": 0.5, "load1": 1.0}, t, tags))
        points.append(
            Point("api", {"latency_ms": 5.0 + i}, t, {**tags, "endpoint": "GET /stats/summary"})
        )
    points.append(event_point("restarted", "target restarted (1)", T0 + 5 * S).with_tags(tags))
    points.append(event_point("exited", "target exited", T0 + 4 * S).with_tags(tags))
    points += [
        p.with_tags(tags) for p in leak_points([LeakVerdict("fds", "ok", 0.1, 0.5, 9, 1)], T0)
    ]
    points += [
        p.with_tags(tags)
        for p in leak_points([LeakVerdict("fds", "growing", 3.0, 0.01, 12, 1)], T0 + 60 * S)
    ]
    store.write(points)
    try:
        data = run_data_from_store(store, "r1", T0 + 60 * S, run_start_ns=T0)
    finally:
        store.close()
    assert set(data.load) == {"all", "cached"}
    # Warm-up excluded: the tick at its end (+60 s) covers its last second.
    assert len(data.load["all"].sent) == 59
    assert data.load["cached"].latency[0] == (T0 + 61 * S, window_hist(99, 1.0, 2.0))
    assert data.restarts == 1  # counted over the whole run, warm-up included
    assert [v.verdict for v in data.verdicts] == ["growing"]  # the latest leak point
    assert data.querylog_dropped_total[0] == (T0 + 60 * S, 6.0)
    assert data.end_ns == T0 + 119 * S
    assert data.host["cpu_busy_ratio"][0] == (T0 + 61 * S, 0.5) and "load1" not in data.host
    results = evaluate_criteria(cfg(lost_ratio_max=0.001, querylog_dropped_max=0), data)
    assert {r.name for r in failed(results)} == {
        "lost_ratio",
        "restarts",
        "leak[fds]",
        "querylog_dropped",
    }
    (drops,) = [r for r in results if r.name == "querylog_dropped" and r.window == "run"]
    assert drops.value == 5  # 6 -> 11 after the warm-up


def test_one_window_gives_back_its_quantile() -> None:
    text = window_hist(1000, 0.8, 5.0)
    run, worst = window_quantiles([(T0, text)], 0.99, 60 * S)
    assert run == pytest.approx(5.0, rel=MAX_RELATIVE_ERROR)
    assert worst is None  # one window is no complete sliding window
    assert window_quantiles([(T0, text)], 0.5, 60 * S)[0] == pytest.approx(0.8, rel=0.01)


def test_a_week_of_second_windows_finds_a_burst() -> None:
    fast, slow = window_hist(100, 0.5, 1.0), window_hist(100, 50.0, 90.0)
    n = 200_000
    burst = range(123_456, 123_486)  # 30 s in 2.3 days of 1-s windows
    windows = [(T0 + i * S, slow if i in burst else fast) for i in range(n)]
    run, worst = window_quantiles(windows, 0.99, 300 * S)
    assert run is not None and run <= 1.0 * (1 + MAX_RELATIVE_ERROR)  # the fast p99
    assert worst is not None
    value, end_ns = worst
    assert value > 50.0
    assert T0 + 123_485 * S <= end_ns < T0 + (123_456 + 300) * S


def test_a_generator_that_fell_behind_is_generator_bound() -> None:
    data = load_run(n=120, lost={i: 30.0 for i in range(120)})
    data.load["all"].rate_target = ticks([1000.0] * 120)
    data.load["all"].rate_achieved = ticks([100.0] * 120)
    results = evaluate_criteria(cfg(lost_ratio_max=0.01), data)
    (gen,) = by(results, "generator")
    assert not gen.ok and gen.value == pytest.approx(0.1)
    assert gen.message.startswith("generator-bound: the generator sent only 10.0%")
    assert all(r.message.endswith("(generator-bound)") for r in by(results, "lost_ratio"))


def test_a_replay_that_missed_the_capture_timing_is_generator_bound() -> None:
    data = load_run(n=100)
    data.load["all"].due = ticks([100.0] * 100)
    # 89 windows of 100 within 10 ms: one short of the 90 % a run must keep.
    offsets = [800.0] * 89 + [25_000.0] * 11
    data.load["all"].send_offset_p99_us = ticks(offsets)
    (gen,) = by(evaluate_criteria(cfg(), data), "generator")
    assert not gen.ok and gen.value == pytest.approx(1.0)  # every due query was sent
    assert gen.message.startswith("generator-bound: the replay kept its send offset p99")
    assert "89.0% of its windows" in gen.message
    data.load["all"].send_offset_p99_us = ticks([800.0] * 90 + [25_000.0] * 10)
    (gen,) = by(evaluate_criteria(cfg(), data), "generator")
    assert gen.ok and gen.message.startswith("the generator kept 100.0%")


def test_a_lost_agent_is_named_as_the_cause_not_generator_bound() -> None:
    data = load_run(n=120, lost={i: 30.0 for i in range(120)})
    data.load["all"].rate_target = ticks([1000.0] * 120)
    data.load["all"].rate_achieved = ticks([1000.0] * 11 + [500.0] * 109)
    data.lost_agents = ["agent 1 of 2 lost at +0:00:11: no call for 6 s"]
    results = evaluate_criteria(cfg(lost_ratio_max=0.01), data)
    (gen,) = by(results, "generator")
    assert not gen.ok
    assert gen.message.startswith("agent 1 of 2 lost at +0:00:11: the generator sent only 54.")
    assert "generator-bound" not in gen.message
    lost = by(results, "lost_ratio")
    assert all(r.message.endswith("(agent 1 of 2 lost at +0:00:11)") for r in lost)


def test_a_generator_that_kept_up_is_ok_and_flat_out_is_not_judged() -> None:
    data = load_run(n=120)
    data.load["all"].rate_target = ticks([100.0] * 120)
    # The first tick (the load starting mid-window) does not count.
    data.load["all"].rate_achieved = ticks([10.0] + [99.0] * 119)
    (gen,) = by(evaluate_criteria(cfg(), data), "generator")
    assert gen.ok and gen.value == pytest.approx(0.99)
    assert "(generator-bound)" not in by(evaluate_criteria(cfg(), data), "lost_ratio")[0].message
    data.load["all"].rate_target = ticks([0.0] * 120)  # rate 0: as fast as it can
    assert by(evaluate_criteria(cfg(), data), "generator") == []


def test_the_worst_latency_window_says_how_busy_the_machine_was() -> None:
    data = load_run(slow=range(300, 303))
    # The machine saturated from 200 s to 320 s (another job), quiet otherwise.
    data.host = {
        "cpu_busy_ratio": ticks([0.98 if 200 <= i < 320 else 0.2 for i in range(600)]),
        "cpu_pressure_pct": ticks([60.0 if 200 <= i < 320 else 1.0 for i in range(600)]),
    }
    _run, window = by(evaluate_criteria(cfg(p99_ms_max={"cached": 5}), data), "p99_ms[cached]")
    assert "machine: CPU busy" in window.message and "(saturated" in window.message
    data.host = {"cpu_busy_ratio": ticks([0.2] * 600), "cpu_pressure_pct": ticks([1.0] * 600)}
    _run, window = by(evaluate_criteria(cfg(p99_ms_max={"cached": 5}), data), "p99_ms[cached]")
    assert "machine: CPU busy 20%, CPU pressure 1%" in window.message
    assert "saturated" not in window.message
    data.host = {}
    _run, window = by(evaluate_criteria(cfg(p99_ms_max={"cached": 5}), data), "p99_ms[cached]")
    assert "machine" not in window.message


def test_ticks_of_a_busy_machine_can_be_left_out_of_the_latency_criteria() -> None:
    data = load_run(slow=range(300, 303))
    data.host = {"cpu_busy_ratio": ticks([0.99 if 290 <= i < 310 else 0.3 for i in range(600)])}
    judged = cfg(p99_ms_max={"cached": 5})
    _run, window = by(evaluate_criteria(judged, data), "p99_ms[cached]")
    assert not window.ok  # judged as before: the slow ticks are in
    quiet = cfg(p99_ms_max={"cached": 5}, host_busy_max=0.95)
    run, window = by(evaluate_criteria(quiet, data), "p99_ms[cached]")
    assert run.ok and window.ok  # the slow ticks came while the machine was saturated
    assert "20 tick(s) with the machine over 95% busy not judged" in run.message
    data.host = {"cpu_busy_ratio": ticks([0.99] * 600)}
    (only,) = by(evaluate_criteria(quiet, data), "p99_ms[cached]")
    assert not only.judged and "not judged" in only.message
