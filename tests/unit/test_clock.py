"""The clock: nanoseconds per second, the conversions, and the absolute tick grid."""

from __future__ import annotations

import pytest

from soak.clock import (
    NS_PER_S,
    WHOLE_SECONDS,
    TickGrid,
    ns_to_s,
    ns_to_us,
    s_to_ns,
    second_end_ns,
    second_of,
    second_start_ns,
)

S = NS_PER_S


def test_conversions_round_to_the_nearest_nanosecond() -> None:
    assert s_to_ns(1.5) == 1_500_000_000
    assert s_to_ns(2.3) == 2_300_000_000  # 2.3 * 1e9 is 2299999999.9999995 as a float
    assert s_to_ns(0) == 0
    assert ns_to_s(250_000_000) == 0.25
    assert ns_to_s(s_to_ns(86_400.0)) == 86_400.0


def test_the_next_tick_is_on_the_absolute_grid() -> None:
    origin = 1_000 * S
    grid = TickGrid.every(60, origin)
    assert grid.at_or_after(origin - 5) == origin
    assert grid.at_or_after(origin) == origin
    assert grid.at_or_after(origin + 1) == origin + 60 * S
    assert grid.at_or_after(origin + 60 * S) == origin + 60 * S
    # a tick that ran 150 s late: the next is on the grid, the missed ones are skipped
    assert grid.at_or_after(origin + 150 * S) == origin + 180 * S
    assert TickGrid.every(1.5, origin).at_or_after(origin + 1) == origin + 1_500_000_000


def test_a_grid_needs_a_positive_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        TickGrid.every(0, 0)
    with pytest.raises(ValueError, match="positive"):
        TickGrid(0, -S)


def test_the_tick_a_time_falls_in() -> None:
    origin = 100 * S
    assert TickGrid.every(1.0, origin).at_or_before(origin + 5 * S + 400_000_000) == origin + 5 * S
    minute = TickGrid.every(60.0, origin)
    assert minute.at_or_before(origin + 59 * S) == origin
    assert minute.at_or_before(origin - S) == origin
    assert minute.at_or_before(origin + 125 * S) == origin + 120 * S


def test_the_tick_strictly_after() -> None:
    grid = TickGrid.every(10, 100 * S)
    assert grid.after(100 * S) == 110 * S  # a tick: the next one
    assert grid.after(105 * S) == 110 * S
    assert grid.after(50 * S) == 100 * S  # before the origin: the origin
    assert WHOLE_SECONDS.after(7 * S) == 8 * S
    assert WHOLE_SECONDS.after(7 * S + 1) == 8 * S
    assert WHOLE_SECONDS.at_or_after(7 * S + 1) == 8 * S
    assert WHOLE_SECONDS.at_or_after(7 * S) == 7 * S


def test_missed_ticks() -> None:
    second = TickGrid.every(1.0, 0)
    assert second.missed(None, 10 * S) == 0
    assert second.missed(9 * S, 10 * S) == 0
    assert second.missed(5 * S, 10 * S) == 4
    assert TickGrid.every(60.0, 0).missed(0, 120 * S) == 1


def test_a_second_is_stamped_at_its_end() -> None:
    assert second_end_ns(100 * S, 0) == 101 * S
    assert second_end_ns(100 * S, 9) == 110 * S


def test_the_second_a_time_falls_in() -> None:
    assert second_of(100 * S, 100 * S) == 0
    assert second_of(101 * S - 1, 100 * S) == 0
    assert second_of(101 * S, 100 * S) == 1
    assert second_of(100 * S - 1, 100 * S) == -1  # before the origin: no window of the run
    assert second_start_ns(100 * S, 3) == 103 * S
    assert second_end_ns(100 * S, 3) == second_start_ns(100 * S, 4)


def test_a_latency_in_whole_microseconds() -> None:
    assert ns_to_us(1_999) == 1
    assert ns_to_us(2_000) == 2
    assert ns_to_us(0) == 0
