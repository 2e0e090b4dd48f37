"""bench/replay_rate_search.py: the replay's flat out as the highest rate answered in time.

The probe here is a server of fixed capacity: every query due up to it answered, the rest
lost; the search must end near that capacity, within its probe budget, from above or
below, and say so when no rate it tried was answered."""

from __future__ import annotations

from bench.replay_rate_search import Search, answered_in_time, search_rate, searched_line


def server(capacity_qps: float, duration_s: float = 5.0):  # type: ignore[no-untyped-def]
    asked: list[float] = []

    def probe(rate_qps: float) -> dict:
        asked.append(rate_qps)
        due = int(rate_qps * duration_s)
        done = int(min(rate_qps, capacity_qps) * duration_s)
        return {
            "due": due,
            "completed": done,
            "lost": due - done,
            "skipped": 0,
            "abandoned": 0,
            "answered_qps": done / duration_s,
            "cpu_ms_per_1k": 40.0,
        }

    return probe, asked


def test_a_probe_is_within_the_bound_when_at_most_the_fraction_is_unanswered() -> None:
    row = {"due": 1000, "completed": 990}
    assert answered_in_time(row, 0.01)
    assert not answered_in_time({**row, "completed": 989}, 0.01)
    assert not answered_in_time({"due": 0, "completed": 0}, 0.01)


def test_from_below_it_steps_up_then_narrows_to_the_capacity() -> None:
    probe, asked = server(10_000)
    best, tried = search_rate(probe, 6_000, Search(factor=1.25, probes=8))
    assert best["ok"] and 9_000 <= best["rate_qps"] <= 10_000
    assert asked[:3] == [6_000, 7_500, 9_375]  # up by the factor while answered
    assert len(tried) <= 8 and [x["rate_qps"] for x in tried] == asked


def test_from_above_it_steps_down_and_reports_the_highest_answered() -> None:
    probe, asked = server(5_000)
    best, tried = search_rate(probe, 20_000, Search(factor=2.0, probes=6))
    assert asked[:3] == [20_000, 10_000, 5_000]
    assert best["ok"] and 4_500 <= best["rate_qps"] <= 5_000
    assert best["rate_qps"] == max(x["rate_qps"] for x in tried if x["ok"])


def test_the_budget_bounds_it_and_none_answered_is_said() -> None:
    probe, asked = server(100)
    best, tried = search_rate(probe, 50_000, Search(factor=1.25, probes=3))
    assert len(asked) == 3 and not best["ok"]
    assert best["rate_qps"] == min(asked)
    dnsperf = {"answered_qps": 50_000.0, "cpu_ms_per_1k": 20.0, "lost_pct": 0.0}
    assert "none within the bound" in searched_line(0, "replay", best, dnsperf, len(tried))


def test_it_never_asks_more_than_the_cap() -> None:
    probe, asked = server(1e9)
    best, _ = search_rate(probe, 8_000, Search(factor=2.0, probes=6, max_qps=20_000))
    assert max(asked) == 20_000 and best["rate_qps"] == 20_000
    assert asked == [8_000, 16_000, 20_000]  # at the cap and answered: nothing higher to ask
    dnsperf = {"answered_qps": 10_000.0, "cpu_ms_per_1k": 20.0, "lost_pct": 0.0}
    assert "searched (at --max-rate): rate 20000 q/s" in searched_line(0, "r", best, dnsperf, 3)
