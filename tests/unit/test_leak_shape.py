"""The shape of a rise from the warm-up's end (soak.analysis.shape): a count's staircase
that never falls back, and memory that keeps its rate while the server's own accounting
stays flat, are judged before start-up growth could have stopped; a count that goes up
and down, a start-up staircase that stopped and a rise that slows down are not."""

from __future__ import annotations

import math
import random
from pathlib import Path

from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.shape import is_count, keeps_rate, staircase
from tests.unit.test_leak_evidence import MiB, store_with, verdicts

WINDOW_S = 600.0
PER_H = 1 / 3600


def windows(values: list[float]) -> list[tuple[float, float]]:
    return [((i + 0.5) * WINDOW_S, v) for i, v in enumerate(values)]


def test_a_staircase_that_never_falls_back_is_a_leak() -> None:
    rise = staircase(windows([16, 17, 18, 18, 19]), 1 * PER_H)  # 4 fds/h
    assert rise is not None and rise.steps == 3
    assert math.isclose(rise.slope_per_s * 3600, 4.5)
    assert "never falls back (3 steps, 16 -> 19 in 40 min)" in rise.words()


def test_a_count_that_goes_up_and_down_is_no_staircase() -> None:
    assert staircase(windows([11, 13, 14, 13, 15, 16, 17]), 1 * PER_H) is None


def test_a_start_up_staircase_that_stopped_is_no_leak() -> None:
    """Threads added in the first half hour, none since: the newer half does not climb."""
    assert staircase(windows([8, 9, 10, 11, 11, 11, 11, 11]), 1 * PER_H) is None


def test_two_steps_spread_as_a_leak_spreads_them_are_a_staircase() -> None:
    """2 fds/h: a step every 3 windows, the first after the first window."""
    rise = staircase(windows([16, 16, 16, 17, 17, 17, 18]), 1 * PER_H)
    assert rise is not None and rise.steps == 2


def test_too_few_steps_bunched_or_too_slow_is_no_staircase() -> None:
    assert staircase(windows([15, 15, 15, 15, 16, 16]), 1 * PER_H) is None  # 1 step
    assert staircase(windows([15, 16, 17, 17, 17, 17, 17]), 1 * PER_H) is None  # at once
    assert staircase(windows([15, 15, 16, 17, 17, 17]), 1 * PER_H) is None  # a burst
    slow = [100 + i // 4 for i in range(24)]  # 1.5/h against a 10/h threshold
    assert staircase(windows(slow), 10 * PER_H) is None


def test_memory_is_not_a_count() -> None:
    assert is_count("fds", windows([1, 2]))
    assert not is_count("rss_anon_bytes", windows([4096, 8192]))
    assert not is_count("goroutines", windows([1.5, 2]))


def test_a_steady_rise_keeps_its_rate_and_an_approach_does_not() -> None:
    rng = random.Random(41)
    threshold = 5 * MiB * PER_H
    steady = [100 * MiB + i * 2 * MiB + rng.gauss(0, 0.2 * MiB) for i in range(10)]
    assert keeps_rate(windows(steady), threshold, 0.05) is not None
    # A cache filling toward 140 MiB with a 40-min time constant: as fast at first.
    approach = [140 * MiB - 40 * MiB * math.exp(-i * WINDOW_S / 2400) for i in range(10)]
    assert keeps_rate(windows(approach), threshold, 0.05) is None


def test_a_rise_the_noise_hides_is_not_said_to_keep_its_rate() -> None:
    threshold = 5 * MiB * PER_H
    noisy = [100 * MiB + i * 2 * MiB + (-1) ** i * 4 * MiB for i in range(8)]
    assert keeps_rate(windows(noisy), threshold, 0.05) is None
    assert keeps_rate(windows([1.0, 2.0, 3.0, 4.0, 5.0]), 0.0, 0.05) is None  # too few


CFG = LeaksConfig()  # the defaults: 10-min windows, 6 of them, the start-up wait


def test_an_fd_staircase_from_the_warm_ups_end_is_growing_before_six_windows(
    tmp_path: Path,
) -> None:
    """4.5 fds/h (one every 800 s) from the first sample, 10-s samples: `growing` after 5
    windows, where the wait for start-up growth had 4 h to go."""
    fds = [16.0 + i // 80 for i in range(5 * 60 + 1)]
    rss = [50.0 * MiB] * len(fds)
    store = store_with(tmp_path, {"rss_anon_bytes": rss, "fds": fds}, 10.0)
    try:
        v = verdicts(store, CFG)["fds"]
        assert v.verdict == "growing", v
        assert v.windows == 5 and "a staircase that never falls back" in v.note
    finally:
        store.close()


def test_an_fd_count_that_goes_up_and_down_is_not_judged(tmp_path: Path) -> None:
    rng = random.Random(3)
    fds = [16.0 + (i // 60) % 3 + rng.randrange(2) for i in range(12 * 60 + 1)]
    store = store_with(tmp_path, {"fds": fds}, 10.0)
    try:
        assert verdicts(store, CFG)["fds"].verdict != "growing"
    finally:
        store.close()


def test_memory_keeping_its_rate_with_a_flat_cache_is_growing_within_half_an_hour(
    tmp_path: Path,
) -> None:
    """10 MiB/h (2x the threshold) from the first sample while the server's cache entries
    stay flat: `growing` after 3 windows, from the short windows' steady rise."""
    rss = [80 * MiB + i * 10 * MiB / 360 + (i % 3) * 16 * 1024 for i in range(3 * 60 + 1)]
    entries = [350.0] * len(rss)
    store = store_with(tmp_path, {"rss_anon_bytes": rss, "cache_entries": entries}, 10.0)
    try:
        v = verdicts(store, CFG)["rss_anon_bytes"]
        assert v.verdict == "growing", v
        assert "keeps its rate" in v.note and "cache_entries 350 -> 350, flat" in v.note
    finally:
        store.close()


def test_memory_settling_with_a_flat_cache_is_not_judged_yet(tmp_path: Path) -> None:
    """A runtime settling (an approach to 120 MiB, 15-min time constant) while the cache
    stays flat: it slows down, so it waits, `not judged`, never `growing` nor `ok`."""
    rss = [120 * MiB - 40 * MiB * math.exp(-i * 10 / 900) for i in range(3 * 60 + 1)]
    entries = [350.0] * len(rss)
    store = store_with(tmp_path, {"rss_anon_bytes": rss, "cache_entries": entries}, 10.0)
    try:
        assert verdicts(store, CFG)["rss_anon_bytes"].verdict == "insufficient"
    finally:
        store.close()


def test_a_rise_just_over_its_threshold_is_judged_by_its_slope_not_its_margin() -> None:
    """6 MiB/h against 5 MiB/h over 16 two-minute windows: it keeps its rate with
    confidence, and its slope is over the threshold, the bar of the whole-run verdict; the
    newer half's confidence margin (2 MiB/h here, its slope 6.3) is not a second bar on
    its size."""
    rng = random.Random(0)
    step_s = 120.0
    rise = [
        ((i + 0.5) * step_s, 80 * MiB + i * step_s * 6 * MiB / 3600 + rng.gauss(0, 0.2 * MiB))
        for i in range(16)
    ]
    found = keeps_rate(rise, 5 * MiB * PER_H, 0.05)
    assert found is not None
    assert 5.5 < found.slope_per_s * 3600 / MiB < 6.5
    assert keeps_rate(rise, 7 * MiB * PER_H, 0.05) is None  # under a higher threshold
