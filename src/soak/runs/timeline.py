"""A run's timeline: phases on absolute times, scaling, and where a moment falls.

Pure functions: no clock, no I/O. Every time here is in nanoseconds since the
epoch (the same clock as the points' timestamps) or seconds of run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from soak.clock import ns_to_s, s_to_ns
from soak.config import Phase, Scenario
from soak.config.upgrade import scaled_section
from soak.errors import InputError


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
        return ns_to_s(self.end_ns - self.start_ns)


def scale_phases(phases: list[Phase], total_s: float) -> list[Phase]:
    """`--duration 2m`: every phase shrunk (or stretched) in proportion to fit `total_s`,
    its boundaries on whole seconds: the load counts into one-second windows on the
    run's grid, so a phase that ends mid-second (a 12.9-s warm-up) would split a window
    between two rates and be due a fraction of a query. A phase lasts 1 s at least."""
    if total_s <= 0:
        raise InputError(f"--duration must be positive, got {total_s:g} s")
    current_s = sum(p.duration_s for p in phases)
    factor = total_s / current_s
    scaled, boundary_s, elapsed_s = [], 0, 0.0
    for phase in phases:
        elapsed_s += phase.duration_s * factor
        end_s = max(boundary_s + 1, round(elapsed_s))
        scaled.append(phase.model_copy(update={"duration_s": float(end_s - boundary_s)}))
        boundary_s = end_s
    return scaled


def scaled_scenario(scenario: Scenario, total_s: float | None) -> Scenario:
    """A copy of `scenario` whose phases last `total_s` in all (None: unchanged)."""
    if total_s is None:
        return scenario
    update: dict[str, object] = {"phases": scale_phases(scenario.phases, total_s)}
    if scenario.upgrade is not None:  # each swap at the same share of the run
        update["upgrade"] = scaled_section(scenario.upgrade, total_s / scenario.duration_s)
    copy = scenario.model_copy(update=update)
    copy._base_dir = scenario.base_dir
    return copy


def timeline(scenario: Scenario, origin_ns: int) -> list[PhaseSpan]:
    """The phases end to end from `origin_ns`, each with its own rate (or load.rate_qps)."""
    default_rate = scenario.load.rate_qps if scenario.load is not None else 0.0
    spans: list[PhaseSpan] = []
    start_ns = origin_ns
    for index, phase in enumerate(scenario.phases):
        end_ns = start_ns + s_to_ns(phase.duration_s)
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


@dataclass(frozen=True)
class RateChange:
    """A phase's rate from its start on, `at_ns` (wall clock, on the run's grid: the
    load's workers re-base there exactly, so the phase is due its rate x its seconds)."""

    rate_qps: float
    at_ns: int


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

    # The load's rate: each phase's, placed here; the soak plan (plans.soak) says when
    # it changes, the run applies it (Run.start, Run.resume, Run.enter_phase).

    def rate_at(self, time_ns: int) -> float:
        """The rate the load carries at `time_ns`: its phase's (0 before or after the run)."""
        span = self.span_at(time_ns)
        return span.rate_qps if span is not None else 0.0

    def remaining_s(self, now_ns: int) -> float:
        return max(0.0, ns_to_s(self.end_ns - now_ns))
