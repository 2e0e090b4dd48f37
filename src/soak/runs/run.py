"""One soak run: builds and owns its parts, and does what its plan's steps ask.

A Run is built from its stored record and a RunContext (the service's state
store, data directory, metrics and end hook), never from globals. Its step methods
(`tick`, `analyse`, `enter_phase`, `finish`) are the soak plan's steps
(`plans.soak`), called by the threads of whoever times them (the service's
scheduler); a lock keeps one of them at a time on the run's parts. The parts:
its targets (`targets.group.TargetGroup`), sinks, load, samplers and the listener of
its leak passes (`runs.parts.RunParts`), their supervision (`runs.supervise.Supervisor`) and
its ticks and analysis (`runs.ticking.Ticker`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from soak.clock import WHOLE_SECONDS, ns_to_s, s_to_ns
from soak.config import Scenario
from soak.errors import SoakError
from soak.runs.away import AWAY_EVENT, count_away
from soak.runs.context import RunContext
from soak.runs.ending import Ending, Outcome, RunEnd
from soak.runs.live import LiveFigures
from soak.runs.parts import RunParts
from soak.runs.reap import target_group
from soak.runs.reserve import release_reserve
from soak.runs.state import RunRecord, RunStatus
from soak.runs.supervise import Supervisor, owner
from soak.runs.swaps import target_now
from soak.runs.ticking import Ticker
from soak.runs.timeline import RateChange, Timeline
from soak.targets.base import Running
from soak.targets.specs import TargetConfig

log = logging.getLogger(__name__)


class Run:
    def __init__(self, record: RunRecord, ctx: RunContext) -> None:
        self.id = record.id
        self.record = record
        self.scenario: Scenario = record.scenario
        self.ctx = ctx
        self.run_dir = record.run_dir
        self._lock = threading.RLock()
        self.timeline = Timeline()
        tgt = target_now(self.scenario, record.run_dir)  # after a swap: its version
        run_tags = {"soak": self.id, "scenario": self.scenario.name}
        run_tags |= {"target": tgt.name, "version": tgt.version}
        run_tags |= {k: v for k, v in self.scenario.alerting.labels.items() if k == "team"}
        self.parts = RunParts(
            self.id, self.scenario, self.run_dir, ctx, run_tags, foreground=record.foreground
        )
        self.targets = target_group(record, self.parts.event, ctx.data_dir.root)
        self.supervisor = Supervisor(
            self.targets, self.parts, restarts=record.restarts, end=self._finish_locked
        )
        self.ticker = Ticker(self.parts, self.supervisor, last_tick_ns=record.last_tick_ns)
        self.phase_index = -1
        self.outcome: Outcome | None = None
        self.load_totals: dict[str, Any] = {}  # the whole run's, once the load has stopped
        self.finished = threading.Event()
        self.ending = False  # set first thing when the run ends (or detaches): jobs stop

    # Start and resume: on failure everything started so far is stopped, the run is `error`.

    def start(self) -> None:
        """Start helpers and target, wait until ready, start the load; raise if any fails."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.ctx.state.update_run(self.id, target_state={"owner": owner()})
        try:
            self.parts.build_sinks()
            self.parts.open_capture()  # the target's dnstap connects as it starts
            self.targets.start()
            self.parts.attach_capture(self.targets.running)  # tcpdump: its port known now
            self.parts.build_load_and_samplers(
                lambda: self.targets.running,
                lambda: self.timeline.warmup_end_ns,
                lambda: self.timeline.origin_ns,
            )
            if self.parts.load is not None:  # load agents take seconds to register
                self.parts.load.prepare(self.scenario.duration_s)
            if self.parts.remote_samplers is not None:  # so does a sampler agent
                self.parts.remote_samplers.prepare()
            # The load must be ready to send when the origin comes (workers' interpreters
            # started, agents told start_at): the origin is at least that far on.
            lead_ns = s_to_ns(self.parts.load.start_lead_s) if self.parts.load else 0
            origin_ns = WHOLE_SECONDS.after(time.time_ns() + lead_ns)
            self.timeline = Timeline.of(self.scenario, origin_ns)
            if self.parts.capture is not None:
                self.parts.capture.begin(origin_ns)
            if self.parts.load is not None:
                self.parts.load.start(
                    self.timeline.rate_at(origin_ns),
                    self.scenario.duration_s,
                    begin_at_ns=origin_ns,
                    end_ns=self.timeline.end_ns,
                )
            if self.parts.remote_samplers is not None:
                self.parts.remote_samplers.release()
        except BaseException as exc:
            self._abort(exc)
            raise
        self.ctx.state.update_run(
            self.id,
            status=RunStatus.RUNNING,
            started_ns=origin_ns,
            origin_ns=origin_ns,
            target_state=self.supervisor.target_state(),
        )

    def resume(self, *, check_target: bool = True) -> None:
        """After a service restart: re-attach the targets, restart the load, record the gap.
        `check_target` False: the caller ends the run for a cause of its own (a swap the
        service stopped in), not for the target it finds gone."""
        rec = self.record
        assert rec.origin_ns is not None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.timeline = Timeline.of(self.scenario, rec.origin_ns)
        now_ns = time.time_ns()
        try:
            self.parts.build_sinks()
            self.targets.attach(rec.target_state or {})
            self.parts.build_load_and_samplers(
                lambda: self.targets.running,
                lambda: self.timeline.warmup_end_ns,
                lambda: self.timeline.origin_ns,
            )
        except BaseException as exc:
            self._abort(exc)
            raise
        gap_from = rec.last_tick_ns or rec.origin_ns
        gap_s = ns_to_s(now_ns - gap_from)
        self.event("gap", f"service was away for {gap_s:.1f} s; run resumed", gap_s, now_ns)
        if self.scenario.capture is not None:  # it was in the service's memory
            message = "capture: not resumed; what was recorded before the service stopped stands"
            self.event("capture_not_resumed", message, 0.0, now_ns)
        span = self.timeline.span_at(now_ns)
        if span is None:  # ended while the service was away
            self._count_away(gap_s, now_ns)
            return
        if self.parts.remote_samplers is not None:  # a fresh agent, the old one swept
            self.parts.remote_samplers.release()
        self.phase_index = span.index
        self.ctx.state.update_run(self.id, phase=span.name)
        if self.parts.load is not None:
            self.parts.load.start(
                self.timeline.rate_at(now_ns),
                ns_to_s(self.timeline.end_ns - now_ns),
                end_ns=self.timeline.end_ns,
            )
        self._count_away(gap_s, now_ns)
        if not self.ending and check_target:
            self.supervisor.check_target()

    def _count_away(self, gap_s: float, now_ns: int) -> None:
        """The seconds nobody counted while the service was away: due and skipped, an
        event, and the cause a generator failure names (soak.runs.away)."""
        line = count_away(self.parts, self.timeline, gap_s, now_ns)
        if line is not None:
            self.event(AWAY_EVENT, line, gap_s, now_ns)
            self.supervisor.lost_agents.append(line)

    def _abort(self, exc: BaseException) -> None:
        """A start that failed: stop what was started, record why."""
        self.ending = True
        message = str(exc) if isinstance(exc, SoakError) else f"{type(exc).__name__}: {exc}"
        self.event("error", message, 0.0)
        # Where the parts were (the target's ports): its report shows the command as run.
        target_state = self.supervisor.target_state()
        self.parts.stop()
        self.targets.stop()
        if self.parts.capture is not None:  # before the origin: nothing of the run's
            self.parts.capture.close()
        self.ctx.state.update_run(
            self.id,
            status=RunStatus.ERROR,
            message=message,
            ended_ns=time.time_ns(),
            target_state=target_state,
        )
        self.outcome = Outcome(RunStatus.ERROR, message)
        self.finished.set()

    # The plan's steps.

    def tick(self) -> None:
        with self._lock:
            if not self.ending:
                self.ticker.tick(self.timeline)

    def analyse(self) -> None:
        with self._lock:
            if not self.ending:
                self.ticker.analyse(time.time_ns(), self.timeline.warmup_end_ns)

    def enter_phase(self, index: int, change: RateChange | None = None) -> None:
        """Phase `index` from now; `change` the load's rate from the phase's start (none
        for the first phase: the load started with its rate)."""
        with self._lock:
            if self.ending or index == self.phase_index:
                return
            span = self.timeline.spans[index]
            self.phase_index = index
            if self.parts.load is not None and change is not None:
                self.parts.load.set_rate(change.rate_qps, at_ns=change.at_ns)
            replay = self.scenario.load.replay if self.scenario.load is not None else None
            # A replay's pace is its capture's timing, not the phase's rate (docs/replay.md).
            pace = replay.pace() if replay is not None else f"{span.rate_qps:g} q/s"
            self.event("phase", f"phase {span.name} ({pace})", float(index), span.start_ns)
            self.ctx.state.update_run(self.id, phase=span.name)

    def swap_target(self, cfg: TargetConfig, between: Callable[[], object]) -> Running | None:
        """The target swapped for `cfg` (soak.upgrade.inswap) under the run's lock (no tick
        sees it stopped), the new process saved as soon as it runs; None if the run is
        ending. A failure raises, the run `ending`: its end is the swap's to say."""
        with self._lock:
            if not self.ending:  # points written from now on: the new version's
                self.parts.retag(cfg.version)
            try:
                return None if self.ending else self.targets.swap_target(cfg, between, self._saved)
            except SoakError:
                self.ending = True
                raise

    def _saved(self) -> None:
        self.ctx.state.update_run(self.id, target_state=self.supervisor.target_state())

    # The end.

    def finish(self, ending: Ending = Ending.COMPLETED, message: str = "") -> Outcome | None:
        """The end job, a stop request, or a fault: stop everything, judge, write the report."""
        if not message:
            message = "stopped before its end" if ending is Ending.STOPPED else ending.value
        with self._lock:
            if self.finished.is_set():
                return self.outcome
            return self._finish_locked(ending, message)

    def stop(self) -> Outcome | None:
        """A stop request (API, Ctrl-C, a service that stops its runs)."""
        return self.finish(Ending.STOPPED)

    def _finish_locked(self, ending: Ending, message: str) -> Outcome:
        # From here no job touches the run: a tick must not see the target it is
        # stopping as "exited" and restart it, whatever fails below.
        self.ending = True
        now_ns = time.time_ns()
        try:
            self.outcome = self._end(ending, message, now_ns)
        except Exception as exc:  # the run must still end, with the fault as its status
            log.exception("run %s: ending", self.id)
            why = f"{message}; " if ending is Ending.ERROR else ""
            self.outcome = Outcome(RunStatus.ERROR, f"{why}ending the run failed: {exc}")
            try:
                self.ctx.state.update_run(
                    self.id, status=RunStatus.ERROR, message=self.outcome.message, ended_ns=now_ns
                )
            except Exception:  # a full disk: the outcome is still known to this process
                log.exception("run %s: the end could not be recorded", self.id)
        finally:
            self.finished.set()
            self.ctx.on_finished(self.id)
        return self.outcome

    def _end(self, ending: Ending, message: str, now_ns: int) -> Outcome:
        if ending is not Ending.ERROR:  # a target that failed has nothing left to profile
            try:
                self.ticker.capture_profiles("end", now_ns)
            except Exception as exc:  # recorded; the run still ends
                self.parts.try_event("pprof_failed", f"profile at the end: {exc}", now_ns)
        # The target first: a store that fails below must not leave it running.
        self.parts.stop(close_listener=False, ended_ns=now_ns)
        if self.parts.capture is not None and ending is not Ending.ERROR:
            self.parts.capture.flush()  # the load's last queries, still queued in the target
        self.targets.stop()
        capture = self.parts.finish_capture(now_ns)  # the stopped target's last frames in
        self.parts.try_event("stop", f"run ended: {message}", now_ns)
        if self.parts.load is not None:
            self.load_totals = self.parts.load.totals()
        with contextlib.suppress(SoakError):
            # A last verdict; it may still send an alert (a resend that is due).
            self.ticker.analyse(now_ns, self.timeline.warmup_end_ns)
        # Each phase's latency once more, every window stored (the last phase cut at the end).
        ran = [s for s in self.timeline.spans if s.start_ns < now_ns]
        self.ticker.phase_latency(
            [(s.name, s.start_ns, min(s.end_ns, now_ns)) for s in ran], now_ns
        )
        if self.parts.listener is not None:
            self.parts.listener.close()
        # Flushed: the criteria and the report read every point; what a sink did not
        # take is handed over (runs.owed).
        self.parts.close_sinks(hand_over=True)
        return self.ctx.on_end(
            RunEnd(
                run_id=self.id,
                scenario=self.scenario,
                run_dir=self.run_dir,
                points_path=self.ctx.data_dir.points_path(self.scenario, self.run_dir),
                origin_ns=self.timeline.origin_ns,
                warmup_end_ns=self.timeline.warmup_end_ns,
                ended_ns=now_ns,
                ending=ending,
                message=message,
                verdicts=list(self.ticker.verdicts),
                restarts=self.supervisor.restarts,
                load_totals=self.load_totals,
                state=self.ctx.state,
                event=self.event,
                lost_agents=list(self.supervisor.lost_agents),
                capture=capture,
            )
        )

    def storage_failed(self, job: str, exc: BaseException) -> None:
        """The data directory takes no more writes (disk full, read-only, I/O error):
        nothing measured from here could be kept, so the run ends `error` and its target
        stops, rather than running on unrecorded."""
        message = f"the data directory cannot be written ({job}): {exc}"
        log.error("run %s: %s", self.id, message)
        with self._lock:
            if self.ending:
                return
            if release_reserve(self.ctx.data_dir):  # room to write why the run ended
                message += " (the data directory's reserve was freed to record this)"
            self.parts.try_event("error", message)
            self._finish_locked(Ending.ERROR, message)

    def detach(self) -> None:
        """Service shutdown: stop the load and the writing, leave the targets running."""
        with self._lock:
            if self.finished.is_set():
                return
            self.ending = True
            self.parts.stop()
            # The target runs on, its writer connected: what was recorded is written now.
            self.parts.finish_capture(time.time_ns(), drain_s=0.0)
            self.parts.close_sinks()
            self.finished.set()

    # Events and figures.

    def event(
        self, kind: str, message: str, value: float = 0.0, time_ns: int | None = None
    ) -> None:
        """Into the state store (status, report) and the sinks (Grafana annotations)."""
        self.parts.event(kind, message, value, time_ns)

    def live_figures(self) -> LiveFigures:
        """For the status view, read every second while the run goes."""
        running = self.targets.running
        totals: dict[str, Any] = {}
        load = self.parts.load
        if load is not None and not self.finished.is_set():
            flat = load.totals(stddev=False)
            totals = {k: v for k, v in flat.items() if isinstance(v, int | float)}
        return LiveFigures(
            latest=dict(self.ticker.latest),
            restarts=self.supervisor.restarts,
            target_pid=running.pid if running is not None else None,
            verdicts=list(self.ticker.verdicts),
            load_totals=totals,
            rate_target_qps=load.planned_rate_qps if load is not None else None,
        )
