"""Time in soak: nanoseconds per second, the conversions, and the tick grid.

Every time soak keeps is a whole number of nanoseconds (wall: since the epoch, as the
points' timestamps; or monotonic, as the load's workers pace); configuration and
messages speak in seconds. The factor between the two, and the arithmetic of a grid of
ticks, are defined here and nowhere else.

The tick grid is absolute: tick k is at origin + k x interval (k >= 0). A late tick
does not shift the ones after it, and ticks missed while a process was busy are
skipped, not run in a burst. A run's samplers, a sampler agent and the load's
one-second windows all stand on such a grid, so their timestamps line up.
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PER_S = 1_000_000_000
# Latencies are kept in whole microseconds (soak.histogram): a span in ns becomes µs by
# floor division by this factor; the loops use it inline, since a call costs a hot loop.
NS_PER_US = 1_000


def s_to_ns(seconds: float) -> int:
    """Seconds as whole nanoseconds (rounded to the nearest)."""
    return round(seconds * NS_PER_S)


def ns_to_us(nanoseconds: int) -> int:
    """A span in nanoseconds as whole microseconds (floor): a latency's unit."""
    return nanoseconds // NS_PER_US


def ns_to_s(nanoseconds: float) -> float:
    """Nanoseconds (a time or a span) as seconds."""
    return nanoseconds / NS_PER_S


@dataclass(frozen=True)
class TickGrid:
    """Ticks at origin_ns + k * interval_ns, k >= 0; see the module doc."""

    origin_ns: int
    interval_ns: int

    def __post_init__(self) -> None:
        if self.interval_ns <= 0:
            raise ValueError(f"interval must be positive, got {ns_to_s(self.interval_ns)} s")

    @classmethod
    def every(cls, interval_s: float, origin_ns: int) -> TickGrid:
        """The grid of one tick every `interval_s` seconds from `origin_ns`."""
        return cls(origin_ns, s_to_ns(interval_s))

    def tick_ns(self, k: int) -> int:
        """The time of tick k (the start of the k-th interval)."""
        return self.origin_ns + k * self.interval_ns

    def at_or_before(self, time_ns: int) -> int:
        """The latest tick not after `time_ns` (the origin for a time before it): the tick
        whose interval `time_ns` falls in."""
        if time_ns <= self.origin_ns:
            return self.origin_ns
        return self.tick_ns((time_ns - self.origin_ns) // self.interval_ns)

    def at_or_after(self, time_ns: int) -> int:
        """The first tick at or after `time_ns` (the origin for a time before it)."""
        if time_ns <= self.origin_ns:
            return self.origin_ns
        return self.tick_ns(-(-(time_ns - self.origin_ns) // self.interval_ns))  # ceiling

    def after(self, time_ns: int) -> int:
        """The first tick strictly after `time_ns` (the origin for a time before it)."""
        if time_ns < self.origin_ns:
            return self.origin_ns
        return self.tick_ns((time_ns - self.origin_ns) // self.interval_ns + 1)

    def missed(self, last_tick_ns: int | None, tick_ns: int) -> int:
        """How many ticks of the grid fell between the last tick run and this one."""
        if last_tick_ns is None:
            return 0
        return max(0, (tick_ns - last_tick_ns) // self.interval_ns - 1)


# Whole seconds of the wall clock: a run's origin, and the load's one-second windows, lie
# on it (readable timestamps, aligned across runs and agents).
WHOLE_SECONDS = TickGrid(0, NS_PER_S)


def second_of(time_ns: int, origin_ns: int) -> int:
    """The grid second (counted from `origin_ns`) that `time_ns` falls in: a query belongs
    to the window of the second it was due in."""
    return (time_ns - origin_ns) // NS_PER_S


def second_start_ns(origin_ns: int, second: int) -> int:
    """The start of second `second` counted from `origin_ns`."""
    return origin_ns + second * NS_PER_S


def second_end_ns(origin_ns: int, second: int) -> int:
    """The end of second `second` counted from `origin_ns`: a one-second window is stamped
    there, like a tick whose sample covers the interval that ends at its time."""
    return second_start_ns(origin_ns, second + 1)
