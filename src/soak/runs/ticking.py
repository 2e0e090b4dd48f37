"""A run's ticks on the absolute grid and its leak analysis; what the last tick saw."""

from __future__ import annotations

import time

from soak.analysis.leaks import LeakFits, LeakVerdict, leak_points
from soak.analysis.verdicts import run_verdicts
from soak.config import Scenario
from soak.points import FieldValue, Point
from soak.runs import timeline as tl
from soak.runs.context import RunContext
from soak.runs.listening import LeakPass
from soak.runs.parts import RunParts
from soak.runs.supervise import Supervisor
from soak.runs.timeline import NS_PER_S, Timeline
from soak.samplers.pprof import PprofSampler


class Ticker:
    def __init__(
        self,
        run_id: str,
        scenario: Scenario,
        parts: RunParts,
        supervisor: Supervisor,
        ctx: RunContext,
        *,
        last_tick_ns: int | None,
    ) -> None:
        self.run_id = run_id
        self.scenario = scenario
        self.parts = parts
        self.supervisor = supervisor
        self.ctx = ctx
        self.last_tick_ns = last_tick_ns
        self.latest: dict[str, dict[str, FieldValue]] = {}  # "measurement[,tag=v]" -> fields
        self.verdicts: list[LeakVerdict] = []
        self.leak_fits = LeakFits()  # kept across passes: a pass costs the new windows

    def tick(self, timeline: Timeline) -> None:
        """One sampler tick on the grid; a late tick is recorded as lag, not doubled."""
        started_ns = time.time_ns()
        interval_s = self.scenario.samplers.interval_s
        tick_ns = tl.tick_at_or_before(started_ns, interval_s, timeline.origin_ns)
        if self.last_tick_ns is not None and tick_ns <= self.last_tick_ns:
            return  # this grid slot already ran (a coalesced or early wake-up)
        missed = tl.missed_ticks(self.last_tick_ns, tick_ns, interval_s)
        runner = self.parts.tick_runner
        if missed:
            cause = runner.gap_cause(tick_ns) if runner is not None else "no samplers"
            message = f"{missed} tick(s) missed: {cause}"
            self.parts.event("ticks_missed", message, float(missed), tick_ns)
        self.supervisor.check_load(tick_ns, timeline.remaining_s(tick_ns))
        self.supervisor.check_helpers(tick_ns)
        self.supervisor.check_target(tick_ns)
        points = runner.run_tick(tick_ns) if runner is not None else []
        self.parts.write(points)
        self._remember(points)
        self.last_tick_ns = tick_ns
        self.ctx.state.update_run(self.run_id, last_tick_ns=tick_ns)
        lag_s = (started_ns - tick_ns) / NS_PER_S
        self.ctx.metrics.observe_tick(lag_s, (time.time_ns() - started_ns) / NS_PER_S)

    def analyse(self, now_ns: int, since_ns: int) -> None:
        """Leak verdicts over the samples from `since_ns` (the warm-up's end), told to the
        run's listener (its alerts, which act on changes)."""
        sinks = self.parts.sinks
        if sinks is None or sinks.store is None:
            return
        store = sinks.store
        was_growing = {v.resource for v in self.verdicts if v.verdict == "growing"}
        self.verdicts = run_verdicts(
            store, self.run_id, self.scenario.leaks, since_ns, self.leak_fits
        )
        points = leak_points(self.verdicts, now_ns)
        runner = self.parts.tick_runner
        for v in self.verdicts:
            self.ctx.metrics.set_leak(self.run_id, v.resource, v.slope_per_hour, v.verdict)
            if v.verdict == "growing" and v.resource not in was_growing and runner:
                for sampler in runner.samplers:  # the pprof sampler: profile it now
                    getattr(sampler, "request_capture", lambda reason: None)("growing")
        listener = self.parts.listener
        if listener is not None:
            alert_events = listener.heard(LeakPass(list(self.verdicts), store, since_ns))
            for p in alert_events:  # the run's event list shows what was told to whom
                kind = p.tags.get("kind", "alert")
                message = str(p.fields.get("message", ""))
                self.ctx.state.add_event(self.run_id, p.time_ns, kind, message, 0.0)
            points += alert_events
        self.parts.write([p.with_tags(self.parts.run_tags) for p in points])

    def capture_profiles(self, reason: str, now_ns: int, timeout_s: float = 15.0) -> None:
        """A profile now, waited for (the run's end, before the target stops): the latest
        capture the "What grew" diff reads is then the end of the run, not up to one
        interval before it."""
        runner = self.parts.tick_runner
        for sampler in runner.samplers if runner is not None else []:
            if not isinstance(sampler, PprofSampler):
                continue
            points = sampler.wait(timeout_s)  # a capture still going: its points, then ours
            sampler.request_capture(reason)
            points += sampler.sample(now_ns) + sampler.wait(timeout_s)
            self.parts.write([p.with_tags(self.parts.run_tags) for p in points])

    def _remember(self, points: list[Point]) -> None:
        run_tags = self.parts.run_tags
        for p in points:
            extra = ",".join(f"{k}={v}" for k, v in sorted(p.tags.items()) if k not in run_tags)
            key = f"{p.measurement},{extra}" if extra else p.measurement
            self.latest[key] = dict(p.fields)
