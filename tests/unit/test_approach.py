"""A rise approaching a plateau (soak.analysis.approach), start-up growth left out once it
stops (soak.analysis.rises.startup_end, leaks.startup_max_s), and a step that stops short
of a leak's onset: what each does to the verdicts of soak.analysis.leaks.LeakFit."""

from __future__ import annotations

import math
import random

import pytest

from soak.analysis.approach import approaching
from soak.analysis.leaks import LeakFit, LeakVerdict
from soak.analysis.levelling import decelerating
from soak.analysis.rises import startup_end
from soak.analysis.trendfit import TrendFit

MiB = 1024**2
WINDOW_S = 600.0
THRESHOLD = 5 * MiB  # per hour: 0.83 MiB a 10-min window


def series(values: list[float]) -> list[tuple[float, float]]:
    return [(i * WINDOW_S, v) for i, v in enumerate(values)]


def noisy(values: list[float], seed: int, sd: float) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.gauss(0, sd) for v in values]


def settle(windows: int, rise: float, tau_windows: float) -> list[float]:
    return [100 * MiB + rise * (1 - math.exp(-i / tau_windows)) for i in range(windows)]


def passes(values: list[float], startup_max_s: float = 0.0) -> list[LeakVerdict]:
    """The verdict of every pass, a window more each, the fits kept as a run keeps them."""
    fit, said = LeakFit(), []
    for n in range(1, len(values) + 1):
        fit.update(tuple(series(values[:n])))
        said.append(
            fit.verdict(
                resource="rss_anon_bytes",
                threshold_per_hour=THRESHOLD,
                min_windows=6,
                p_value_max=0.05,
                startup_max_s=startup_max_s,
            )
        )
    return said


def test_an_exponential_approach_is_levelling_with_its_plateau_before_its_thirds_slow() -> None:
    # 40 MiB with a time constant of 8 windows, 10 windows seen: still rising at 2.5 x the
    # threshold, and the thirds' check (12 windows at least) cannot tell yet.
    for seed in range(20):
        values = series(noisy(settle(10, 40 * MiB, 8.0), seed, 0.1 * MiB))
        assert decelerating(values, THRESHOLD, 0.05) is None
        found = approaching(values, THRESHOLD, 0.05)
        assert found is not None, seed
        assert found.plateau == pytest.approx(140 * MiB, rel=0.1)
        assert found.under_threshold_in_h > 0
    v = passes(noisy(settle(10, 40 * MiB, 8.0), 1, 0.1 * MiB))[-1]
    assert v.verdict == "levelling" and v.note.startswith("decelerating: levels off near 14")


def test_a_noisy_steady_leak_never_approaches_a_plateau() -> None:
    """1.2 x the threshold, noise of half a window's rise (100 seeds, 6 to 30 windows)."""
    found = [
        (seed, n)
        for seed in range(100)
        for n in (6, 10, 20, 30)
        if approaching(
            series(noisy([100 * MiB + MiB * i for i in range(n)], seed, 0.5 * MiB)), THRESHOLD, 0.05
        )
    ]
    assert found == []


def test_a_leak_whose_pace_wavers_never_approaches_a_plateau() -> None:
    """A random walk: each window rises 0.25 to 1.75 MiB (1.2 x the threshold on average);
    a curve fitted to its levels takes its wanders for slowing, its rates do not fall."""
    found = []
    for seed in range(100):
        rng = random.Random(seed)
        values = [100 * MiB]
        for _ in range(29):
            values.append(values[-1] + rng.choice([0.25, 0.5, 1, 1, 1, 1.5, 1.75]) * MiB)
        found += [
            (seed, n)
            for n in (6, 10, 15, 20, 30)
            if approaching(series(values[:n]), THRESHOLD, 0.05)
        ]
    assert found == []


def test_a_leak_under_start_up_growth_that_slows_is_not_a_plateau() -> None:
    """30 MiB of start-up growth (time constant 4 windows) on top of a leak of 1.2 x the
    threshold, 24 windows: a transient on a rise, not an approach to a level."""
    values = [100 * MiB + 30 * MiB * (1 - math.exp(-i / 4)) + MiB * i for i in range(24)]
    found = [
        s for s in range(100) if approaching(series(noisy(values, s, 0.2 * MiB)), THRESHOLD, 0.05)
    ]
    assert found == []


def test_a_rise_eight_times_the_threshold_stays_growing_however_it_bends() -> None:
    values = series(settle(12, 400 * MiB, 8.0))  # 50 MiB a window at first: 60 x
    assert approaching(values, THRESHOLD, 0.05) is None


def _end(values: list[float]) -> int | None:
    points = series(values)
    return startup_end(points, TrendFit(points).trend(0.05), THRESHOLD, 0.05)


def test_start_up_growth_ends_where_it_stops() -> None:
    rise_then_flat = [100 * MiB + 3 * MiB * min(i, 8) for i in range(14)]
    assert _end(noisy(rise_then_flat, 1, 0.05 * MiB)) in (8, 9)
    assert _end(noisy([100 * MiB] * 14, 1, 0.05 * MiB)) == 0  # no start-up
    flat_then_leak = [100 * MiB + 2 * MiB * max(0, i - 7) for i in range(14)]
    assert _end(flat_then_leak) == 0  # a leak's onset is no start-up
    assert _end([100 * MiB + 2 * MiB * i for i in range(14)]) is None  # not stopped yet


def test_a_step_after_start_up_growth_is_never_growing() -> None:
    """Start-up growth for 9 windows, flat for 10, a step of 10 MiB over two windows (RSS
    raised to a GC's next heap goal), flat again: as refdns-startup's RSS in the corpus.
    Before start-up growth was left out: `growing` for the 4 windows after the step (the
    whole run's rise, start-up and all)."""
    values = [100 * MiB + 6 * MiB * min(i, 9) for i in range(19)]
    values += [values[-1] + 5 * MiB, values[-1] + 10 * MiB] + [values[-1] + 10 * MiB] * 8
    said = passes(noisy(values, 3, 0.05 * MiB))
    after_startup = [v.verdict for v in said[12:]]
    assert "growing" not in after_startup, after_startup
    assert said[-1].verdict in ("ok", "levelling")
    assert any("start-up growth stopped" in v.note for v in said[19:])  # what judged the step


def test_a_rise_over_three_windows_that_stops_is_no_leak_onset() -> None:
    """Flat, then 12 MiB over 3 windows, flat again: with 3 windows after a change enough
    for an onset, the pass that saw all three rising said `growing` (every seed)."""
    values = [100 * MiB] * 12 + [104 * MiB, 108 * MiB, 112 * MiB] + [112 * MiB] * 8
    for seed in range(5):
        said = [v.verdict for v in passes(noisy(values, seed, 0.05 * MiB))]
        assert "growing" not in said, (seed, said)


def test_a_leak_after_start_up_growth_stopped_is_growing_at_its_own_slope() -> None:
    values = [100 * MiB + 6 * MiB * min(i, 9) for i in range(19)]
    values += [values[-1] + 2 * MiB * j for j in range(1, 13)]  # 12 MiB/h
    v = passes(noisy(values, 4, 0.05 * MiB))[-1]
    assert v.verdict == "growing"
    assert v.slope_per_hour == pytest.approx(12 * MiB, rel=0.2)


def test_a_rise_from_the_warm_up_waits_for_its_end_up_to_startup_max() -> None:
    line = [100 * MiB + 2 * MiB * i for i in range(30)]  # 12 MiB/h from the warm-up's end
    said = passes(line, startup_max_s=4 * 3600)
    waited = [v for v in said[5:23] if v.verdict == "insufficient"]
    assert len(waited) == 18 and "leaks.startup_max_s" in waited[0].note
    assert said[24].verdict == "growing"  # the windows span 4 h: judged from the warm-up
    assert passes(line)[5].verdict == "growing"  # 0 (the default): judged at once
    # Growth that stops before then is left out, and the run judged from its end.
    stops = [100 * MiB + 3 * MiB * min(i, 12) for i in range(30)]
    verdicts = [v.verdict for v in passes(noisy(stops, 2, 0.05 * MiB), startup_max_s=4 * 3600)]
    assert "growing" not in verdicts and verdicts[-1] in ("ok", "levelling")
