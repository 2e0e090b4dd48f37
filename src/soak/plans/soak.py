"""A soak, as a plan: what happens when.

start (targets, sinks, load, samplers: the engine) -> each phase's rate from its start
-> a sampler tick every `samplers.interval_s` on the grid from the origin -> a leak pass
every `leaks.interval_s` from the warm-up's end -> the end where the last phase ends.

The engine (`runs.Run`) does every step: it starts and resumes the run's parts, applies
a rate, ticks, analyses, and ends the run (a stop or a fault ends it earlier). The
phases are placed on the run's clock by `runs.timeline` (each with its rate: the phase's
own, else the load's). Whoever runs the plan only times the steps this module lists:
the service's scheduler, for a submitted run and for `soak start --foreground` alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from soak.runs.ending import Ending
from soak.runs.run import Run
from soak.runs.timeline import PhaseSpan, RateChange, Timeline
from soak.upgrade.inswap import SWAP_EVENT, interrupted_swap, swap_steps


@dataclass(frozen=True)
class Every:
    """A step on a grid: every `interval_s` from `start_ns` until `end_ns`."""

    job: str  # its name among the run's jobs
    name: str  # what a failure of it is called in the run's events
    interval_s: float
    start_ns: int
    end_ns: int
    step: Callable[[], object]


@dataclass(frozen=True)
class At:
    """A step once, at `at_ns` (one already past runs at once)."""

    job: str
    name: str
    at_ns: int
    step: Callable[[], object]


Step = Every | At


def rate_change(timeline: Timeline, index: int) -> RateChange | None:
    """What entering phase `index` does to the load: its rate from its start, on the
    run's grid; None for the first (the load starts with its rate)."""
    if index == 0:
        return None
    span = timeline.spans[index]
    return RateChange(span.rate_qps, span.start_ns)


def phases_after(timeline: Timeline, now_ns: int) -> list[PhaseSpan]:
    """The phases still to be entered after `now_ns` (each one a rate change)."""
    return [span for span in timeline.spans[1:] if span.start_ns > now_ns]


class SoakPlan:
    """One soak run's plan; its steps are the engine's run's methods."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.id = run.id

    def start(self) -> None:
        """The run's parts started, then its first phase entered (the load started with
        its rate); raises if it cannot start."""
        self.run.start()
        self.run.enter_phase(0)

    def resume(self) -> None:
        """After a service restart: the run re-attached where its timeline says it is; a
        run whose service stopped during a swap ends there, its targets stopped."""
        cause = interrupted_swap(self.run.run_dir)
        self.run.resume(check_target=cause is None)
        if cause is not None:
            self.run.event(SWAP_EVENT, cause, -1.0)
            self.run.finish(Ending.FAILED, cause)

    def steps(self, now_ns: int) -> list[Step]:
        """What is left to do from `now_ns` (the start, or a resume) to the end."""
        run = self.run
        tl, sc = run.timeline, run.scenario
        end_ns = tl.end_ns
        leaks_from_ns = max(tl.warmup_end_ns, tl.origin_ns)
        steps: list[Step] = [
            Every("tick", "tick", sc.samplers.interval_s, tl.origin_ns, end_ns, run.tick),
            Every("leaks", "analyse", sc.leaks.interval_s, leaks_from_ns, end_ns, run.analyse),
        ]
        for span in phases_after(tl, now_ns):
            enter = functools.partial(run.enter_phase, span.index, rate_change(tl, span.index))
            steps.append(At(f"phase:{span.index}", "phase", span.start_ns, enter))
        # A soak across an upgrade: its swaps and rollbacks (soak.upgrade.inswap).
        steps += [At(*step) for step in swap_steps(run, now_ns)]
        steps.append(At("end", "end", end_ns, run.finish))
        return steps
