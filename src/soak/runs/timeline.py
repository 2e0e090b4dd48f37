"""A run's timeline: phases on absolute times, scaling, and where a moment falls.

Pure functions: no clock, no I/O. Every time here is in nanoseconds since the
epoch (the same clock as the points' timestamps) or seconds of run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from soak.config import Phase, Scenario
from soak.errors import InputError

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class PhaseSpan:
    """One phase placed on the run's clock: [start_ns, end_ns)."""

    index: int
    name: str
    start_ns: int
    end_ns: int
    rate_qps: float
    warmup: bool

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S


def scale_phases(phases: list[Phase], total_s: float) -> list[Phase]:
    """`--duration 2m`: every phase shrunk (or stretched) in proportion to fit `total_s`."""
    if total_s <= 0:
        raise InputError(f"--duration must be positive, got {total_s:g} s")
    current_s = sum(p.duration_s for p in phases)
    factor = total_s / current_s
    return [p.model_copy(update={"duration_s": p.duration_s * factor}) for p in phases]


def scaled_scenario(scenario: Scenario, total_s: float | None) -> Scenario:
    """A copy of `scenario` whose phases last `total_s` in all (None: unchanged)."""
    if total_s is None:
        return scenario
    copy = scenario.model_copy(update={"phases": scale_phases(scenario.phases, total_s)})
    copy._base_dir = scenario.base_dir
    return copy


def timeline(scenario: Scenario, origin_ns: int) -> list[PhaseSpan]:
    """The phases end to end from `origin_ns`, each with its own rate (or load.rate_qps)."""
    default_rate = scenario.load.rate_qps if scenario.load is not None else 0.0
    spans: list[PhaseSpan] = []
    start_ns = origin_ns
    for index, phase in enumerate(scenario.phases):
        end_ns = start_ns + round(phase.duration_s * NS_PER_S)
        rate = phase.rate_qps if phase.rate_qps is not None else default_rate
        spans.append(PhaseSpan(index, phase.name, start_ns, end_ns, rate, phase.warmup))
        start_ns = end_ns
    return spans


def span_at(spans: list[PhaseSpan], time_ns: int) -> PhaseSpan | None:
    """The phase running at `time_ns`; None before the start or after the end."""
    for span in spans:
        if span.start_ns <= time_ns < span.end_ns:
            return span
    return None


def end_ns(spans: list[PhaseSpan]) -> int:
    return spans[-1].end_ns


def warmup_end_ns(spans: list[PhaseSpan]) -> int:
    """Verdicts and criteria look only after this: the end of the last leading warm-up phase."""
    boundary = spans[0].start_ns
    for span in spans:
        if not span.warmup:
            break
        boundary = span.end_ns
    return boundary


def tick_at_or_before(now_ns: int, interval_s: float, origin_ns: int) -> int:
    """The latest tick time on the absolute grid origin + k*interval not after `now_ns`."""
    interval_ns = round(interval_s * NS_PER_S)
    if now_ns <= origin_ns:
        return origin_ns
    return origin_ns + ((now_ns - origin_ns) // interval_ns) * interval_ns


def missed_ticks(last_tick_ns: int | None, tick_ns: int, interval_s: float) -> int:
    """How many grid ticks fell between the last recorded tick and this one."""
    if last_tick_ns is None:
        return 0
    interval_ns = round(interval_s * NS_PER_S)
    return max(0, (tick_ns - last_tick_ns) // interval_ns - 1)


@dataclass(frozen=True)
class Timeline:
    """A run's phases on its clock; empty until the run has an origin."""

    spans: tuple[PhaseSpan, ...] = ()

    @classmethod
    def of(cls, scenario: Scenario, origin_ns: int) -> Timeline:
        return cls(tuple(timeline(scenario, origin_ns)))

    @property
    def origin_ns(self) -> int:
        return self.spans[0].start_ns if self.spans else 0

    @property
    def end_ns(self) -> int:
        return end_ns(list(self.spans))

    @property
    def warmup_end_ns(self) -> int:
        return warmup_end_ns(list(self.spans))

    def span_at(self, time_ns: int) -> PhaseSpan | None:
        return span_at(list(self.spans), time_ns)

    def remaining_s(self, now_ns: int) -> float:
        return max(0.0, (self.end_ns - now_ns) / NS_PER_S)
