"""A run's ticks on the absolute grid and its leak analysis; what the last tick saw."""

from __future__ import annotations

import time

from soak import hostproc
from soak.analysis.growth import MEMORY_RESOURCES
from soak.analysis.latency import latency_points
from soak.analysis.leaks import LeakFits, LeakVerdict, leak_points
from soak.analysis.verdicts import run_verdicts
from soak.clock import TickGrid, ns_to_s
from soak.errors import SoakError
from soak.names import LAT_HIST_FIELD
from soak.points import FieldValue, Point
from soak.runs.listening import LeakPass
from soak.runs.parts import RunParts
from soak.runs.supervise import Supervisor
from soak.runs.timeline import Timeline
from soak.samplers.pprof import PprofSampler


def leak_limits(memory_limit_bytes: float | None, fd_limit: object) -> dict[str, float]:
    """What a growing resource is measured against (soak.analysis.reach): the target's memory
    limit, else the machine's memory (a target without a limit shares it); the fd limit
    its process sampler read."""
    limits: dict[str, float] = {}
    memory = memory_limit_bytes
    if memory is None:
        try:
            memory = hostproc.read_meminfo().get("MemTotal")
        except OSError:
            memory = None  # no /proc/meminfo: no memory limit to project to
    if memory:
        limits.update(dict.fromkeys(MEMORY_RESOURCES, float(memory)))
    if isinstance(fd_limit, int | float) and fd_limit > 0:
        limits["fds"] = float(fd_limit)
    return limits


class Ticker:
    def __init__(
        self, parts: RunParts, supervisor: Supervisor, *, last_tick_ns: int | None
    ) -> None:
        """The run's id, scenario and context are its parts' (`parts.run_id`, ...)."""
        self.parts = parts
        self.supervisor = supervisor
        self.last_tick_ns = last_tick_ns
        self.latest: dict[str, dict[str, FieldValue]] = {}  # "measurement[,tag=v]" -> fields
        self.verdicts: list[LeakVerdict] = []
        self.leak_fits = LeakFits()  # kept across passes: a pass costs the new windows
        self.phases_told: set[int] = set()  # phases whose `latency` points are written

    def tick(self, timeline: Timeline) -> None:
        """One sampler tick on the grid; a late tick is recorded as lag, not doubled."""
        started_ns = time.time_ns()
        grid = TickGrid.every(self.parts.scenario.samplers.interval_s, timeline.origin_ns)
        tick_ns = grid.at_or_before(started_ns)
        if self.last_tick_ns is not None and tick_ns <= self.last_tick_ns:
            return  # this grid slot already ran (a coalesced or early wake-up)
        missed = grid.missed(self.last_tick_ns, tick_ns)
        runner = self.parts.tick_runner
        if missed:
            cause = runner.gap_cause(tick_ns) if runner is not None else "no samplers"
            message = f"{missed} tick(s) missed: {cause}"
            self.parts.event("ticks_missed", message, float(missed), tick_ns)
        self.supervisor.check_load(tick_ns, timeline.remaining_s(tick_ns))
        self.supervisor.check_helpers(tick_ns)
        self.supervisor.check_target(tick_ns)
        self.parts.check_capture(tick_ns)
        points = runner.run_tick(tick_ns) if runner is not None else []
        self.parts.write(points)
        self._remember(points)
        self._ended_phases(timeline, points, tick_ns)
        self.last_tick_ns = tick_ns
        self.parts.ctx.state.update_run(self.parts.run_id, last_tick_ns=tick_ns)
        lag_s = ns_to_s(started_ns - tick_ns)
        self.parts.ctx.metrics.observe_tick(
            self.parts.run_id, lag_s, ns_to_s(time.time_ns() - started_ns)
        )

    def analyse(self, now_ns: int, since_ns: int) -> None:
        """Leak verdicts over the samples from `since_ns` (the warm-up's end), told to the
        run's listener (its alerts, which act on changes)."""
        sinks = self.parts.sinks
        if sinks is None or sinks.store is None:
            return
        store = sinks.store
        was_growing = {v.resource for v in self.verdicts if v.verdict == "growing"}
        scenario = self.parts.scenario
        self.verdicts = run_verdicts(
            store,
            self.parts.run_id,
            scenario.leaks,
            since_ns,
            self.leak_fits,
            limits=leak_limits(
                scenario.memory_limit_bytes, store.latest(self.parts.run_id, "process", "fd_limit")
            ),
            sample_interval_s=scenario.samplers.interval_s,
        )
        points = leak_points(self.verdicts, now_ns)
        runner = self.parts.tick_runner
        metrics = self.parts.ctx.metrics
        for v in self.verdicts:
            metrics.set_leak(self.parts.run_id, v.resource, v.slope_per_hour, v.verdict)
            if v.verdict == "growing" and v.resource not in was_growing and runner:
                for sampler in runner.samplers:  # the pprof sampler: profile it now
                    getattr(sampler, "request_capture", lambda reason: None)("growing")
        listener = self.parts.listener
        if listener is not None:
            alert_events = listener.heard(LeakPass(list(self.verdicts), store, since_ns))
            for p in alert_events:  # the run's event list shows what was told to whom
                kind = p.tags.get("kind", "alert")
                message = str(p.fields.get("message", ""))
                self.parts.events.recorded(kind, message, 0.0, p.time_ns)
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

    def _ended_phases(self, timeline: Timeline, points: list[Point], tick_ns: int) -> None:
        """The `latency` points of each phase whose windows are all stored: at the first
        tick that stores a window after its end (windows close in order)."""
        newest_ns = max((p.time_ns for p in points if p.measurement == "load"), default=0)
        ended = [
            s for s in timeline.spans if s.index not in self.phases_told and s.end_ns < newest_ns
        ]
        if ended:
            self.phases_told.update(s.index for s in ended)
            self.phase_latency([(s.name, s.start_ns, s.end_ns) for s in ended], tick_ns)

    def phase_latency(self, phases: list[tuple[str, int, int]], now_ns: int) -> None:
        """Each phase's (name, start, end) latency over its merged windows, as the report's
        Phases table reads it: `latency` points stamped at its end (written again, the same
        point, at the run's end)."""
        sinks = self.parts.sinks
        if sinks is None or sinks.store is None or self.parts.load is None or not phases:
            return
        try:
            points = latency_points(sinks.store, self.parts.run_id, phases)
        except SoakError as exc:  # recorded; the run goes on
            self.parts.try_event("error", f"phase latency not read: {exc}", now_ns)
            return
        self.parts.write([p.with_tags(self.parts.run_tags) for p in points])

    def _remember(self, points: list[Point]) -> None:
        run_tags = self.parts.run_tags
        for p in points:
            extra = ",".join(f"{k}={v}" for k, v in sorted(p.tags.items()) if k not in run_tags)
            key = f"{p.measurement},{extra}" if extra else p.measurement
            # the histogram is for merging spans from the store, not a figure to show
            self.latest[key] = {k: v for k, v in p.fields.items() if k != LAT_HIST_FIELD}
