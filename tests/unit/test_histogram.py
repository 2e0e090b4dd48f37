"""The ledger's latency histogram: hdrh's buckets, its text form, merging, and a span's
quantile read from merged windows."""

from __future__ import annotations

import random

import pytest
from hdrh.histogram import HdrHistogram

from soak.analysis.latency import Spans, span_histogram, span_latency_ms, window_quantiles
from soak.histogram import MAX_RELATIVE_ERROR, LatencyHistogram, bucket_of, bucket_range, merged

S = 1_000_000_000


def lognormal_us(seed: int, n: int, mu: float = 6.0, sigma: float = 1.5) -> list[int]:
    rng = random.Random(seed)
    return [int(rng.lognormvariate(mu, sigma)) + 1 for _ in range(n)]


def hist_of(values_us: list[int]) -> LatencyHistogram:
    h = LatencyHistogram()
    for us in values_us:
        h.record(us)
    return h


def test_buckets_and_percentiles_are_hdrh_s_at_two_significant_digits() -> None:
    values = lognormal_us(1, 20_000)
    ours, theirs = hist_of(values), HdrHistogram(1, 60_000_000, 2)
    for us in values:
        theirs.record_value(us)
        assert bucket_of(us) == theirs._counts_index_for(us)
    ordered = sorted(values)
    for pct in (0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0):
        # hdrh's bucket at the same rank: the ceil(q x n)-th value (hdrh rounds the rank)
        rank = max(1, -(-round(pct * 100) * len(values) // 10_000))
        at = 0.0 if pct == 0.0 else 100.0 * rank / len(values)
        assert ours.value_at_percentile_us(pct) == theirs.get_value_at_percentile(at), pct
        assert bucket_of(ordered[rank - 1]) == theirs._counts_index_for(ordered[rank - 1])


def test_a_merges_quantile_lies_within_its_parts() -> None:
    """The count of a merge at a value is the sum of its parts', so its quantile lies
    within theirs: the rank is the share itself, never rounded up past both parts'
    (rounded half up, 1,672 + 557 answers wanted 2,207 for the p99 where the parts wanted
    1,655 and 551, and the merge read a bucket above both: a real agents run's classes)."""
    for seed in range(40):
        rng = random.Random(seed)
        sizes = (rng.randrange(50, 2_000), rng.randrange(5, 600))
        parts = [hist_of(lognormal_us(seed * 2 + i, n)) for i, n in enumerate(sizes)]
        whole = merged(parts)
        for q in (0.5, 0.9, 0.95, 0.99, 0.999):
            got = [p.value_at_percentile_us(q * 100) or 0 for p in parts]
            assert min(got) <= (whole.value_at_percentile_us(q * 100) or 0) <= max(got), (seed, q)


def test_a_bucket_holds_its_values_and_is_at_most_1_128th_wide() -> None:
    for us in [*range(1, 600), 1023, 1024, 4095, 65_537, 10_000_000]:
        low, high = bucket_range(bucket_of(us))
        assert low <= us <= high
        assert high - low <= max(0, low * MAX_RELATIVE_ERROR)
    assert bucket_range(bucket_of(255)) == (255, 255)  # exact below 256 µs


def test_a_quantile_is_never_below_the_true_one_nor_more_than_the_error_above() -> None:
    values = sorted(lognormal_us(2, 5_000))
    h = hist_of(values)
    for q in (0.5, 0.9, 0.99, 0.999):
        true_us = values[max(0, -(-round(q * 1000) * len(values) // 1000)) - 1]
        got = h.value_at_percentile_us(q * 100)
        assert got is not None and true_us <= got <= true_us * (1 + MAX_RELATIVE_ERROR)


def test_text_form_round_trips_and_is_compact() -> None:
    h = hist_of(lognormal_us(3, 500, mu=6.5, sigma=0.6))  # a second of 500 answers
    text = h.encode()
    back = LatencyHistogram.decode(text)
    assert back == h and back.total == 500
    assert (back.min_us, back.max_us, back.sum_us) == (h.min_us, h.max_us, h.sum_us)
    assert back.latency_ms() == h.latency_ms()
    assert len(text) < 800
    one = hist_of([3500])
    assert one.encode() == "3500 3500 3500 1 I;eJy7xcTIwMAAAAUwAN4="
    assert LatencyHistogram.decode(one.encode()) == one
    huge = LatencyHistogram()
    huge.record(5, 2**40)  # a count beyond uint32 (a week's run merged) is packed as uint64
    assert LatencyHistogram.decode(huge.encode()).total == 2**40
    assert LatencyHistogram.decode("").total == 0 and LatencyHistogram().encode() == ""
    for bad in (
        "12 13",
        "1 2 3 1 I;not base64!",
        "1 2 3 1 I;aGVsbG8=",
        "1 2 3 9 I;eJy7xcTIwMAAAAUwAN4=",
    ):
        with pytest.raises(ValueError):
            LatencyHistogram.decode(bad)


def test_merged_windows_are_the_histogram_of_all_their_values() -> None:
    parts = [lognormal_us(seed, 300) for seed in range(5)]
    together = merged(LatencyHistogram.decode(hist_of(p).encode()) for p in parts)
    assert together == hist_of([us for p in parts for us in p])
    assert together.latency_ms()["max"] == max(max(p) for p in parts) / 1000
    assert together.latency_ms()["min"] == min(min(p) for p in parts) / 1000


def test_subtracting_a_window_gives_back_the_rest() -> None:
    a, b = hist_of(lognormal_us(7, 400)), hist_of(lognormal_us(8, 400, mu=8.0))
    both = merged([a, b])
    both.subtract(b)
    assert both.counts == a.counts and both.total == a.total and both.sum_us == a.sum_us
    assert both.quantile_ms(0.99) == a.quantile_ms(0.99)


def test_an_empty_histogram_has_no_figures() -> None:
    h = LatencyHistogram()
    assert h.quantile_ms(0.99) is None and h.stddev_ms() is None
    assert set(h.latency_ms().values()) == {None}


def stamped(n: int, slow: range) -> list[tuple[int, str]]:
    fast_text = hist_of([500] * 98 + [1000] * 2).encode()
    slow_text = hist_of([10_000] * 98 + [20_000] * 2).encode()
    return [((i + 1) * S, slow_text if i in slow else fast_text) for i in range(n)]


def test_a_span_holds_the_windows_stamped_inside_it() -> None:
    windows = stamped(60, range(30, 60))  # the second half is slow
    first = span_latency_ms(windows, 0, 30 * S)  # (0, 30 s]: windows 1..30
    second = span_latency_ms(windows, 30 * S, 60 * S)
    whole = span_latency_ms(windows)
    assert first["p99"] == pytest.approx(1.0, rel=MAX_RELATIVE_ERROR)
    assert second["p99"] == pytest.approx(20.0, rel=MAX_RELATIVE_ERROR)
    # the whole lies within its parts, and is read from them merged
    assert first["p99"] is not None and second["p99"] is not None and whole["p99"] is not None
    assert first["p99"] <= whole["p99"] <= second["p99"]
    parts = Spans([(0, 30 * S), (30 * S, 60 * S)])
    parts.add(windows)
    assert merged(parts.histograms) == span_histogram(windows)


def test_sliding_windows_find_the_slow_minute_and_the_run_figure_is_the_merge() -> None:
    windows = stamped(600, range(300, 330))
    run, worst = window_quantiles(windows, 0.99, 60 * S)
    assert run == span_histogram(windows).quantile_ms(0.99)
    assert worst is not None and worst[0] == pytest.approx(10.0, rel=MAX_RELATIVE_ERROR)
    assert 300 * S < worst[1] < 390 * S  # a minute that holds slow windows
