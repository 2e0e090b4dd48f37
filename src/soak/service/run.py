"""One soak run: builds and owns its parts, and does what the scheduler's jobs ask.

A Run is built from its stored record and a RunContext (the service's state
store, data directory and metrics), never from globals. Its job methods
(`tick`, `analyse`, `enter_phase`, `finish`) are called by the scheduler's
threads; a lock keeps one of them at a time on the run's parts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.analysis.leaks import LeakVerdict, leak_points
from soak.config import Scenario
from soak.errors import SoakError, TargetStartError
from soak.points import FieldValue, Point, event_point
from soak.procfs import pid_alive, start_ticks
from soak.service import phases
from soak.service.binding import bind_services, run_setup
from soak.service.loadsup import SupervisedLoad
from soak.service.state import RunRecord, StateStore
from soak.service.verdicts import run_verdicts
from soak.sinks.config import SinkConfig, SqliteSinkConfig
from soak.sinks.metrics import ServiceMetrics
from soak.targets import cleanup_stale
from soak.targets.base import Running

log = logging.getLogger(__name__)

NS_PER_S = 1_000_000_000
# Margin given to the load engine beyond the run's end: the end job stops it first.
LOAD_MARGIN_S = 30.0


@dataclass
class RunContext:
    """What the service lends every run: state, where files go, its own metrics."""

    state: StateStore
    data_dir: Path
    metrics: ServiceMetrics
    on_finished: Callable[[str], None] = lambda run_id: None


@dataclass
class Outcome:
    status: str  # passed, failed, stopped, error
    message: str
    criteria: list[dict[str, Any]] = field(default_factory=list)


class Run:
    def __init__(self, record: RunRecord, ctx: RunContext) -> None:
        self.id = record.id
        self.record = record
        self.scenario: Scenario = record.scenario
        self.ctx = ctx
        self.run_dir = record.run_dir
        self._lock = threading.RLock()
        self.spans: list[phases.PhaseSpan] = []
        self.target: Any = None
        self.services: dict[str, Any] = {}
        self.running: Running | None = None
        self.load: Any = None
        self.tick_runner: Any = None
        self.sinks: Any = None
        self.alerter: Any = None
        self.restarts = record.restarts
        self.service_restarts: dict[str, int] = {}
        self._services_gone: set[str] = set()
        self._warned: set[str] = set()
        self.last_tick_ns = record.last_tick_ns
        self.phase_index = -1
        self.latest: dict[str, dict[str, FieldValue]] = {}  # "measurement[,tag=v]" -> fields
        self.verdicts: list[LeakVerdict] = []
        self.outcome: Outcome | None = None
        self.load_totals: dict[str, Any] = {}  # the whole run's, once the load has stopped
        self.finished = threading.Event()
        self.ending = False  # set first thing when the run ends (or detaches): jobs stop
        tgt = self.scenario.target
        self.run_tags = {
            "soak": self.id,
            "scenario": self.scenario.name,
            "target": tgt.name,
            "version": tgt.version,
        }

    # ---------------------------------------------------------------- timeline

    @property
    def origin_ns(self) -> int:
        return self.spans[0].start_ns if self.spans else 0

    @property
    def end_ns(self) -> int:
        return phases.end_ns(self.spans)

    @property
    def warmup_end_ns(self) -> int:
        return phases.warmup_end_ns(self.spans)

    @property
    def points_path(self) -> Path:
        return points_path(self.scenario, self.ctx.data_dir, self.run_dir)

    @property
    def interval_s(self) -> float:
        return self.scenario.samplers.interval_s

    # ---------------------------------------------------------------- start and resume

    def start(self) -> None:
        """Start helpers and target, wait until ready, start the load; raise if any fails.

        On failure everything started so far is stopped and the run is `error`.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.ctx.state.update_run(self.id, target_state={"owner": _owner()})
        try:
            self._build_sinks()
            self._start_targets()
            origin_ns = _next_whole_second_ns(time.time_ns())
            self.spans = phases.timeline(self.scenario, origin_ns)
            self._build_load_and_samplers()
            self._start_load(self.spans[0].rate_qps, self.scenario.duration_s)
        except BaseException as exc:
            self._abort(exc)
            raise
        self.ctx.state.update_run(
            self.id,
            status="running",
            started_ns=origin_ns,
            origin_ns=origin_ns,
            target_state=self._target_state(),
        )
        self.enter_phase(0)

    def resume(self) -> None:
        """After a service restart: re-attach the targets, restart the load, record the gap."""
        rec = self.record
        assert rec.origin_ns is not None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.spans = phases.timeline(self.scenario, rec.origin_ns)
        now_ns = time.time_ns()
        try:
            self._build_sinks()
            self._attach_targets(rec.target_state or {})
            self._build_load_and_samplers()
        except BaseException as exc:
            self._abort(exc)
            raise
        gap_from = rec.last_tick_ns or rec.origin_ns
        gap_s = (now_ns - gap_from) / NS_PER_S
        self.event("gap", f"service was away for {gap_s:.1f} s; run resumed", gap_s, now_ns)
        span = phases.span_at(self.spans, now_ns)
        if span is None:  # ended while the service was away
            return
        self.phase_index = span.index
        self.ctx.state.update_run(self.id, phase=span.name)
        remaining_s = (self.end_ns - now_ns) / NS_PER_S
        self._start_load(span.rate_qps, remaining_s)
        self.check_target()

    def _build_sinks(self) -> None:
        from soak.sinks import build_sinks

        self.sinks = build_sinks(
            with_embedded_store(self.scenario.sinks),
            self.scenario.spool,
            default_sqlite_path=self.ctx.data_dir / "points.db",
            run_dir=self.run_dir,
            metrics=self.ctx.metrics,
        )

    def _new_target(self, cfg: Any) -> Any:
        from soak.targets import build_target

        return build_target(
            cfg,
            run_dir=self.run_dir,
            run_id=self.id,
            base_dir=self.scenario.base_dir,
            allow_targets=tuple(self.scenario.allow_targets),
        )

    def _start_targets(self) -> None:
        for cfg in self.scenario.services:
            svc = self._new_target(cfg)
            self.services[cfg.name] = svc
            svc.start()
            running = svc.wait_ready()
            self.event("service_ready", f"helper {cfg.name} ready", running.ready_after_s or 0.0)
        self.target = self._new_target(self._bound_target_config())
        self.running = self.target.start()
        self.event("started", f"target {self.target.name} started", 0.0)
        self._ready(first_start=True)

    def _bound_target_config(self) -> Any:
        helpers = {name: svc.running for name, svc in self.services.items() if svc.running}
        return bind_services(self.scenario.target, helpers)

    def _ready(self, *, first_start: bool) -> None:
        """Wait until the target is ready, record the figures, send the setup calls."""
        self.running = self.target.wait_ready()
        ready_s = self.running.ready_after_s or 0.0
        self.event("ready", f"target ready after {ready_s:.2f} s", ready_s)
        for name, seconds in self.running.conditions_s.items():
            self.event("condition", f"{name} after {seconds:.2f} s", seconds)
        for warning in self.running.warnings:
            if warning not in self._warned:  # a restart repeats them; once is evidence
                self._warned.add(warning)
                self.event("warning", warning, 0.0)
        for line in run_setup(self.scenario.setup, self.running, first_start=first_start):
            self.event("setup", line, 0.0)

    def _attach_targets(self, state: dict[str, Any]) -> None:
        for cfg in self.scenario.services:
            svc = self._new_target(cfg)
            self.services[cfg.name] = svc
            svc.attach(state.get("services", {}).get(cfg.name, {}))
        self.target = self._new_target(self._bound_target_config())
        self.running = self.target.attach(state.get("target", {}))
        self.event("attached", f"target {self.target.name} re-attached", 0.0)

    def _target_state(self) -> dict[str, Any]:
        return {
            "owner": _owner(),
            "target": self.running.to_state() if self.running is not None else {},
            "services": {
                name: svc.running.to_state()
                for name, svc in self.services.items()
                if getattr(svc, "running", None) is not None
            },
        }

    def _build_load_and_samplers(self) -> None:
        from soak.samplers import TickRunner, build_samplers

        if self.scenario.load is not None:
            self.load = SupervisedLoad(
                self.scenario.load,
                self._load_server(),
                base_dir=self.scenario.base_dir,
                allow_targets=tuple(self.scenario.allow_targets),
            )
        samplers = build_samplers(
            self.scenario.samplers,
            lambda: self.running,
            load_source=self.load,
            warmup_end_ns=lambda: self.warmup_end_ns,
        )
        self.tick_runner = TickRunner(
            samplers, run_tags=self.run_tags, metrics=self.ctx.metrics, interval_s=self.interval_s
        )
        from soak.service.alerts import Alerter

        self.alerter = Alerter(self.scenario.alerting, run_tags=self.run_tags)

    def _load_server(self) -> tuple[str, int]:
        from soak.netsafety import parse_host_port

        assert self.scenario.load is not None
        if self.scenario.load.server:
            return parse_host_port(self.scenario.load.server)
        if self.running is None or "dns" not in self.running.ports:
            raise TargetStartError("load: no `server` given and the target has no `dns` port")
        return self.running.address("dns")

    def _start_load(self, rate_qps: float, duration_s: float) -> None:
        if self.load is not None:
            self.load.start(rate_qps, duration_s + LOAD_MARGIN_S)

    def _abort(self, exc: BaseException) -> None:
        """A start that failed: stop what was started, record why."""
        self.ending = True
        message = str(exc) if isinstance(exc, SoakError) else f"{type(exc).__name__}: {exc}"
        self.event("error", message, 0.0)
        self._stop_parts(stop_targets=True)
        self.ctx.state.update_run(self.id, status="error", message=message, ended_ns=time.time_ns())
        self.outcome = Outcome("error", message)
        self.finished.set()

    # ---------------------------------------------------------------- jobs

    def tick(self) -> None:
        """One sampler tick on the absolute grid; a late tick is recorded as lag, not doubled."""
        with self._lock:
            if self.ending:
                return
            started_ns = time.time_ns()
            tick_ns = phases.tick_at_or_before(started_ns, self.interval_s, self.origin_ns)
            if self.last_tick_ns is not None and tick_ns <= self.last_tick_ns:
                return  # this grid slot already ran (a coalesced or early wake-up)
            missed = phases.missed_ticks(self.last_tick_ns, tick_ns, self.interval_s)
            if missed:
                cause = self.tick_runner.gap_cause(tick_ns) if self.tick_runner else "no samplers"
                message = f"{missed} tick(s) missed: {cause}"
                self.event("ticks_missed", message, float(missed), tick_ns)
            self._supervise_load(tick_ns)
            self.check_services(tick_ns)
            self.check_target(tick_ns)
            points = self.tick_runner.run_tick(tick_ns) if self.tick_runner else []
            self._write(points)
            self._remember(points)
            self.last_tick_ns = tick_ns
            self.ctx.state.update_run(self.id, last_tick_ns=tick_ns)
            lag_s = (started_ns - tick_ns) / NS_PER_S
            self.ctx.metrics.observe_tick(lag_s, (time.time_ns() - started_ns) / NS_PER_S)

    def analyse(self) -> None:
        """Leak verdicts over the samples after the warm-up; alerts on changes."""
        with self._lock:
            if self.ending:
                return
            self._analyse(time.time_ns())

    def _analyse(self, now_ns: int) -> None:
        if self.sinks is None or self.sinks.store is None:
            return
        store = self.sinks.store
        was_growing = {v.resource for v in self.verdicts if v.verdict == "growing"}
        self.verdicts = run_verdicts(store, self.id, self.scenario.leaks, self.warmup_end_ns)
        points = leak_points(self.verdicts, now_ns)
        for v in self.verdicts:
            self.ctx.metrics.set_leak(self.id, v.resource, v.slope_per_hour, v.verdict)
            if v.verdict == "growing" and v.resource not in was_growing and self.tick_runner:
                for sampler in self.tick_runner.samplers:  # the pprof sampler: profile it now
                    getattr(sampler, "request_capture", lambda reason: None)("growing")
        if self.alerter is not None:
            from soak.report.grew import verdict_culprits

            culprits = self.alerter.receivers and verdict_culprits(
                store,
                self.id,
                self.verdicts,
                run_dir=self.run_dir,
                since_ns=self.warmup_end_ns,
                memory_limit_bytes=self.scenario.memory_limit_bytes,
            )
            alert_events = self.alerter.update(self.verdicts, culprits or None)
            for p in alert_events:  # the run's event list shows what was told to whom
                kind = p.tags.get("kind", "alert")
                message = str(p.fields.get("message", ""))
                self.ctx.state.add_event(self.id, p.time_ns, kind, message, 0.0)
            points += alert_events
        self._write([p.with_tags(self.run_tags) for p in points])

    def enter_phase(self, index: int) -> None:
        with self._lock:
            if self.ending or index == self.phase_index:
                return
            span = self.spans[index]
            self.phase_index = index
            if self.load is not None and index > 0:
                self.load.set_rate(span.rate_qps)
            self.event(
                "phase", f"phase {span.name} ({span.rate_qps:g} q/s)", float(index), span.start_ns
            )
            self.ctx.state.update_run(self.id, phase=span.name)

    def check_target(self, now_ns: int | None = None) -> None:
        """Target gone: an `exited` event, then a restart or the end, per `on_exit`."""
        if self.target is None or self.ending:
            return
        info = self.target.poll()
        if info is None:
            return
        value = info.signal if info.signal is not None else (info.exit_code or 0)
        self.event("exited", f"target {info.describe()}", float(value), now_ns)
        cfg = self.scenario.target
        if cfg.on_exit == "restart" and self.restarts < cfg.max_restarts:
            try:
                self.running = self.target.restart()
                self._ready(first_start=False)
            except SoakError as exc:
                self.event("error", f"restart failed: {exc}", 0.0)
                self._finish_locked("error", f"target could not be restarted: {exc}")
                return
            self.restarts += 1
            self.ctx.metrics.count_restart(self.id, cfg.name)
            # The record first: whoever sees the event sees the count and the new PID.
            self.ctx.state.update_run(
                self.id, restarts=self.restarts, target_state=self._target_state()
            )
            self.event("restarted", f"target restarted ({self.restarts})", float(self.restarts))
            return
        self._finish_locked("failed", f"target {info.describe()}")

    def check_services(self, now_ns: int | None = None) -> None:
        """A helper gone: `service_exited`, then restarted per its own `on_exit` (helper
        restarts are events, not the target's restarts that criteria count)."""
        for name, svc in self.services.items():
            info = None if name in self._services_gone else svc.poll()
            if info is None:
                continue
            self.event("service_exited", f"helper {name} {info.describe()}", 0.0, now_ns)
            cfg = svc.cfg
            done = self.service_restarts.get(name, 0)
            if cfg.on_exit != "restart" or done >= cfg.max_restarts:
                self._services_gone.add(name)  # told once; the target's answers show the cost
                continue
            try:
                svc.restart()
                svc.wait_ready()
            except SoakError as exc:
                self.event("error", f"helper {name} could not be restarted: {exc}", 0.0)
                continue
            self.service_restarts[name] = done + 1
            self.ctx.state.update_run(self.id, target_state=self._target_state())
            self.event("service_restarted", f"helper {name} restarted ({done + 1})", done + 1)

    def _remaining_s(self, now_ns: int) -> float:
        return max(0.0, (self.end_ns - now_ns) / NS_PER_S)

    def _supervise_load(self, tick_ns: int) -> None:
        if self.load is None:
            return
        failure = self.load.supervise(self._remaining_s(tick_ns))
        if failure is not None:
            message = f"load engine restarted ({self.load.restarts}): {failure}"
            self.event("load_restarted", message, float(self.load.restarts), tick_ns)

    def finish(self, reason: str = "completed") -> Outcome | None:
        """The end job, a stop request, or a fault: stop everything, judge, write the report."""
        with self._lock:
            if self.finished.is_set():
                return self.outcome
            if reason == "stopped":
                return self._finish_locked("stopped", "stopped before its end")
            return self._finish_locked("completed", reason)

    def _finish_locked(self, status: str, message: str) -> Outcome:
        # From here no job touches the run: a tick must not see the target it is
        # stopping as "exited" and restart it, whatever fails below.
        self.ending = True
        now_ns = time.time_ns()
        try:
            self.outcome = self._end(status, message, now_ns)
        except Exception as exc:  # the run must still end, with the fault as its status
            log.exception("run %s: ending", self.id)
            why = f"{message}; " if status == "error" else ""
            self.outcome = Outcome("error", f"{why}ending the run failed: {exc}")
            try:
                self.ctx.state.update_run(
                    self.id, status="error", message=self.outcome.message, ended_ns=now_ns
                )
            except Exception:  # a full disk: the outcome is still known to this process
                log.exception("run %s: the end could not be recorded", self.id)
        finally:
            self.finished.set()
            self.ctx.on_finished(self.id)
        return self.outcome

    def storage_failed(self, job: str, exc: BaseException) -> None:
        """The data directory takes no more writes (disk full, read-only, I/O error):
        nothing measured from here could be kept, so the run ends `error` and its target
        stops, rather than running on unrecorded."""
        from soak.service.reserve import release_reserve

        message = f"the data directory cannot be written ({job}): {exc}"
        log.error("run %s: %s", self.id, message)
        with self._lock:
            if self.ending:
                return
            if release_reserve(self.ctx.data_dir):  # room to write why the run ended
                message += " (the data directory's reserve was freed to record this)"
            self._try_event("error", message)
            self._finish_locked("error", message)

    def _try_event(self, kind: str, message: str, time_ns: int | None = None) -> None:
        """An event that may not be writable (a full disk): logged if it is not."""
        try:
            self.event(kind, message, 0.0, time_ns)
        except Exception as exc:
            log.error("run %s: event %s not recorded (%s): %s", self.id, kind, exc, message)

    def _end(self, status: str, message: str, now_ns: int) -> Outcome:
        from soak.service.reporting import judge_and_report

        # The target first: a store that fails below must not leave it running.
        self._stop_parts(stop_targets=True, close_alerter=False)
        self._try_event("stop", f"run ended: {message}", now_ns)
        if self.load is not None:
            self.load_totals = self.load.totals()
        with contextlib.suppress(SoakError):
            self._analyse(now_ns)  # may still send an alert (a resend that is due)
        if self.alerter is not None:
            self.alerter.close()
        if self.sinks is not None:
            self.sinks.close()  # flushed: the criteria and the report read every point
            self.sinks = None
        return judge_and_report(self, status, message, ended_ns=now_ns)

    def reap(self, reason: str) -> None:
        """A run nobody drives any more (its foreground command died): stop what it had
        started, from its saved state, and mark it `error`."""
        self.ending = True
        try:
            self._attach_targets(self.record.target_state or {})
        except SoakError as exc:
            self.event("error", f"re-attaching to stop: {exc}", 0.0)
        self._stop_parts(stop_targets=True)
        self.event("stop", f"run abandoned: {reason}", 0.0)
        self.ctx.state.update_run(
            self.id, status="error", message=f"abandoned: {reason}", ended_ns=time.time_ns()
        )
        self.finished.set()

    def detach(self) -> None:
        """Service shutdown: stop the load and the writing, leave the targets running."""
        with self._lock:
            if self.finished.is_set():
                return
            self.ending = True
            self._stop_parts(stop_targets=False)
            if self.sinks is not None:
                self.sinks.close()
                self.sinks = None
            self.finished.set()

    def _stop_parts(self, *, stop_targets: bool, close_alerter: bool = True) -> None:
        if self.tick_runner is not None:
            self.tick_runner.close()
        if self.alerter is not None and close_alerter:
            self.alerter.close()
        if self.load is not None:
            try:
                self.load.stop()
            except Exception as exc:  # the run must still end; the fault is recorded
                self.event("error", f"stopping the load: {exc}", 0.0)
        if not stop_targets:
            return
        for name, part in [("target", self.target), *self.services.items()]:
            if part is None:
                continue
            try:
                part.stop()
            except Exception as exc:
                self.event("error", f"stopping {name}: {exc}", 0.0)
        self._remove_run_volumes()

    def _remove_run_volumes(self) -> None:
        """A fresh volume is the run's own: it goes with the run (a volume the scenario
        names is not labelled with the run, so it stays for the next one)."""
        configs = [self.scenario.target, *self.scenario.services]
        if not any(c.runtime == "docker" and c.volume is not None for c in configs):
            return
        try:
            removed = cleanup_stale(run_id=self.id)
        except Exception as exc:  # the run still ends; what was left is recorded
            self.event("error", f"removing the run's volumes: {exc}", 0.0)
            return
        if removed:
            self.event("cleanup", f"removed {removed} container(s)/volume(s) of the run", removed)

    # ---------------------------------------------------------------- points and events

    def event(
        self, kind: str, message: str, value: float = 0.0, time_ns: int | None = None
    ) -> None:
        """Into the state store (status, report) and the sinks (Grafana annotations)."""
        t_ns = time_ns if time_ns is not None else time.time_ns()
        self.ctx.state.add_event(self.id, t_ns, kind, message, float(value))
        self._write([event_point(kind, message, t_ns, value).with_tags(self.run_tags)])

    def _write(self, points: list[Point]) -> None:
        if self.sinks is not None and points:
            self.sinks.write(points)
            self._record_sink_events()

    def _record_sink_events(self) -> None:
        """Sink outages (already `event` points in every sink) into the run's event list."""
        assert self.sinks is not None
        outages = self.sinks.outages
        while outages:
            p = outages.popleft()
            sink = p.tags.get("sink", "?")
            message = f"{sink}: {p.fields.get('message', '')}"
            kind = p.tags.get("kind", "sink")
            value = p.fields.get("value", 0.0)
            number = float(value) if isinstance(value, int | float) else 0.0
            self.ctx.state.add_event(self.id, p.time_ns, kind, message, number)

    def _remember(self, points: list[Point]) -> None:
        for p in points:
            extra = ",".join(
                f"{k}={v}" for k, v in sorted(p.tags.items()) if k not in self.run_tags
            )
            key = f"{p.measurement},{extra}" if extra else p.measurement
            self.latest[key] = dict(p.fields)


def _owner() -> dict[str, Any]:
    """Who drives the run: a foreground run whose command is gone is abandoned."""
    return {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid())}


def owner_alive(target_state: dict[str, Any] | None) -> bool:
    """Is the process that drove a run still there? (Unknown owner: assume so.)"""
    owner = (target_state or {}).get("owner") or {}
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return True
    return pid_alive(pid, owner.get("start_ticks"))


def with_embedded_store(configs: list[SinkConfig]) -> list[SinkConfig]:
    """The sinks asked for, plus the embedded store if absent: verdicts and reports read it."""
    if any(isinstance(c, SqliteSinkConfig) for c in configs):
        return list(configs)
    return [*configs, SqliteSinkConfig(kind="sqlite")]


def points_path(scenario: Scenario, data_dir: Path, run_dir: Path) -> Path:
    """Where a run's embedded store is (the first sqlite sink, else the data directory's)."""
    for cfg in scenario.sinks:
        if isinstance(cfg, SqliteSinkConfig) and cfg.path:
            path = Path(cfg.path)
            return path if path.is_absolute() else run_dir / path
    return data_dir / "points.db"


def _next_whole_second_ns(now_ns: int) -> int:
    """Ticks fall on whole seconds: readable timestamps, aligned across runs."""
    return (now_ns // NS_PER_S + 1) * NS_PER_S
