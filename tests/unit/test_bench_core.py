"""The pure core of `soak bench`: knee search, statistics, limits."""

from __future__ import annotations

import math
from typing import Any

import pytest

from soak.analysis.stats import bootstrap_ci, mann_whitney_u, median, rel_diff_pct, summarise
from soak.bench.knee import KneeSearch, Step, auto_slo_ms
from soak.bench.limits import cpu_us_per_query, judge_limit
from soak.config.bench import KneeConfig


def model_server(capacity_qps: float, floor_ms: float = 0.1, gen_max_qps: float = 1e12):
    """A server that answers up to its capacity and queues (p50 jumps) near it."""

    def measure(rate: float) -> Step:
        sent = min(rate, gen_max_qps)
        answered = min(sent, capacity_qps)
        p50 = floor_ms if sent <= 0.9 * capacity_qps else 50.0
        return Step(offered_qps=rate, sent_qps=sent, answered_qps=answered, p50_ms=p50)

    return measure


def run_search(cfg: KneeConfig, measure, floor_ms: float = 0.1):
    search = KneeSearch(cfg, floor_ms)
    while (rate := search.next_rate()) is not None:
        search.record(measure(rate))
    return search.result()


@pytest.mark.parametrize("capacity", [3_000.0, 37_000.0, 123_456.0, 900_000.0])
def test_knee_is_bracketed_and_narrow(capacity: float) -> None:
    cfg = KneeConfig(start_rate_qps=1000, tolerance=0.05)
    result = run_search(cfg, model_server(capacity))
    assert result.high_qps is not None
    # the model's true knee is 0.9 x capacity: inside the bracket
    assert result.low_qps <= 0.9 * capacity <= result.high_qps
    assert result.low_qps <= result.knee_qps <= result.high_qps
    assert result.width_pct is not None and result.width_pct <= 5.0
    passed = [s.step.offered_qps for s in result.steps if s.ok]
    failed = [s.step.offered_qps for s in result.steps if not s.ok]
    assert max(passed) == result.low_qps and min(failed) == result.high_qps
    assert result.capacity_qps == pytest.approx(
        min(capacity, max(s.step.offered_qps for s in result.steps))
    )
    assert not result.generator_bound


def test_first_step_failing_looks_lower() -> None:
    cfg = KneeConfig(start_rate_qps=10_000, idle_rate_qps=100, tolerance=0.05)
    result = run_search(cfg, model_server(1_000.0))
    assert result.high_qps is not None
    assert result.low_qps <= 900 <= result.high_qps
    assert result.low_qps > 0


def test_nothing_passes_gives_zero_knee() -> None:
    cfg = KneeConfig(start_rate_qps=1000, idle_rate_qps=100)
    result = run_search(cfg, model_server(10.0))
    assert result.within_slo_qps == 0.0 and result.knee_qps == 0.0
    assert len(result.steps) <= cfg.max_steps


def test_no_failure_up_to_the_maximum_is_unbounded() -> None:
    cfg = KneeConfig(start_rate_qps=1000, max_rate_qps=8000)
    result = run_search(cfg, model_server(1e9))
    assert result.high_qps is None and result.width_pct is None
    assert result.within_slo_qps == 8000 and result.knee_qps == 8000


def test_generator_that_cannot_offer_the_rate_stops_the_search() -> None:
    cfg = KneeConfig(start_rate_qps=1000)
    result = run_search(cfg, model_server(1e9, gen_max_qps=20_000))
    assert result.generator_bound
    assert result.steps[-1].why == "generator"
    assert result.within_slo_qps == 16_000


def test_p50_slo_and_auto_slo() -> None:
    assert auto_slo_ms(0.1) == pytest.approx(1.1)
    assert auto_slo_ms(2.0) == pytest.approx(6.0)
    cfg = KneeConfig(start_rate_qps=1000, slo_p50_ms=0.5)
    search = KneeSearch(cfg, 0.1)
    search.record(Step(1000, 1000, 1000, 0.6))
    assert not search.steps[0].ok and search.steps[0].why == "p50"
    search = KneeSearch(cfg, 0.1)
    search.record(Step(1000, 1000, 900, 0.2))
    assert search.steps[0].why == "answered"


def test_max_steps_bounds_the_search() -> None:
    cfg = KneeConfig(start_rate_qps=1000, tolerance=0.001, max_steps=6)
    result = run_search(cfg, model_server(50_000))
    assert len(result.steps) == 6


def test_median_summary_and_spread() -> None:
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 2, 3]) == 2.5
    s = summarise([100.0, 110.0, 90.0])
    assert (s.median, s.best, s.low, s.high, s.n) == (100.0, 110.0, 90.0, 110.0, 3)
    assert s.spread_pct == pytest.approx(20.0)
    assert summarise([1.0, 2.0, 3.0], higher_is_better=False).best == 1.0
    with pytest.raises(ValueError):
        median([])


def test_rel_diff() -> None:
    assert rel_diff_pct(100, 90) == pytest.approx(-10)
    assert rel_diff_pct(0, 0) == 0
    assert rel_diff_pct(0, 5) == math.inf


def test_bootstrap_ci_covers_the_shift_and_is_seeded() -> None:
    a = [100.0 + (i % 7) for i in range(50)]
    b = [80.0 + (i % 7) for i in range(50)]
    lo, hi = bootstrap_ci(a, b)
    assert lo <= rel_diff_pct(median(a), median(b)) <= hi
    assert hi < 0
    assert bootstrap_ci(a, b) == (lo, hi)
    lo2, hi2 = bootstrap_ci(a, list(a))
    assert lo2 <= 0 <= hi2


def test_mann_whitney_against_known_values() -> None:
    # scipy.stats.mannwhitneyu([1,2,3,4,5],[6,7,8,9,10]): U=0, p=0.0122 (normal, cc)
    u, p = mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert u == 0
    assert p == pytest.approx(0.0122, abs=0.001)
    u, p = mann_whitney_u([1, 2, 3], [1, 2, 3])
    assert u == 4.5 and p == pytest.approx(1.0)


# judge_limit's inputs, in the order of each case below; then the limit's kind, a word its
# reason has, and one it has not
LIMIT_INPUTS = [
    "generator_cores",
    "generator_capacity_cores",
    "target_cores",
    "target_capacity_cores",
    "machine_cores",
    "machine_busy_cores",
    "flat_out",
    "rate_kept",
]
LIMIT_CASES = [
    ((0.97, 1, 0.6, None, 4, None, False, True), "generator", "saturated", None),
    ((0.74, 1, 0.6, 2, 2, None, True, True), "generator", "idle", None),
    ((1.06, 2, 0.67, 1, 2, None, True, True), "machine", "", "other"),
    ((0.45, 1, 0.32, 2, 2, 1.9, True, True), "machine", "other processes 1.13", None),
    ((0.3, 2, 0.95, 1, 8, None, True, True), "server", "", None),
    ((0.3, 2, 0.3, 1, 8, None, True, True), "", "latency", None),
    ((0.1, 1, 0.1, None, 8, None, False, True), "", "", None),
    ((0.1, 1, 0.1, None, 8, None, False, False), "generator", "", None),
]


@pytest.mark.parametrize(("cores", "kind", "said", "unsaid"), LIMIT_CASES)
def test_limits(cores: tuple[Any, ...], kind: str, said: str, unsaid: str | None) -> None:
    limit = judge_limit(**dict(zip(LIMIT_INPUTS, cores, strict=True)))
    assert limit.kind == kind and said in limit.reason
    assert unsaid is None or unsaid not in limit.reason


def test_cpu_us_per_query() -> None:
    assert cpu_us_per_query(1.0, 10_000) == pytest.approx(100.0)
    assert cpu_us_per_query(None, 10) is None


def test_a_rate_cap_is_never_exceeded_by_the_knee_or_saturation() -> None:
    """`bench.max_rate_qps` / `--max-rate`: a shared machine's cap holds everywhere."""
    from soak.bench.loop import capped_knee
    from soak.config.bench import BenchConfig

    cfg = BenchConfig(max_rate_qps=5_000, knee=KneeConfig(start_rate_qps=8_000, idle_rate_qps=200))
    knee = capped_knee(cfg)
    offered: list[float] = []
    server = model_server(900_000.0)  # far above the cap: the search would climb to it

    def measure(rate: float) -> Step:
        offered.append(rate)
        return server(rate)

    run_search(knee, measure)
    assert offered and max(offered) <= 5_000
    assert knee.idle_rate_qps == 200 and knee.start_rate_qps == 5_000
    assert capped_knee(BenchConfig()) == KneeConfig()  # no cap: the search as configured


def test_fixed_rates_above_the_cap_are_refused() -> None:
    from pydantic import ValidationError

    from soak.config.bench import BenchConfig

    with pytest.raises(ValidationError, match="rates_qps 6000 is above max_rate_qps 5000"):
        BenchConfig(max_rate_qps=5_000, rates_qps=[1_000, 6_000])
