"""A run's parts besides its targets: sinks, load engine, samplers and the listener of its
leak passes (runs.listening); and the writing of its points and events (into the state
store and every sink)."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.agents.spec import ROLE as LOAD_ROLE
from soak.config import Scenario
from soak.load.fleet.run_load import AgentsLoad
from soak.load.generator import LoadRunner
from soak.load.replay import ReplayLoad
from soak.load.supervised import RunLoad, SupervisedLoad
from soak.points import Fault, Point
from soak.runs.capture_dnstap import DRAIN_S, RunCapture, socket_path, written_capture
from soak.runs.capture_pcap import PcapCapture
from soak.runs.context import RunContext
from soak.runs.events import RunEvents
from soak.runs.layout import agents_dir, profiles_dir
from soak.runs.listening import RunFacts, RunListener
from soak.runs.owed import hand_over_spools, run_sinks
from soak.runs.swaps import segment_now
from soak.samplers import TickRunner, build_samplers
from soak.samplers.remote_samplers import ROLE as SAMPLER_ROLE
from soak.samplers.remote_samplers import RemoteSamplers
from soak.sinks import SinkSet
from soak.targets.base import Running
from soak.targets.group import load_address

log = logging.getLogger(__name__)
# Points written before the sinks open (the clean-up a service did before the run's
# start): a few lines at most, kept for the sinks.
EARLY_POINTS = 1_000


class RunParts:
    def __init__(
        self,
        run_id: str,
        scenario: Scenario,
        run_dir: Path,
        ctx: RunContext,
        run_tags: dict[str, str],
        *,
        foreground: bool,
    ) -> None:
        """`foreground`: the run lives and dies with this soak process (a service's
        outlives it: the next service resumes it)."""
        self.run_id = run_id
        self.foreground = foreground
        self.scenario = scenario
        self.run_dir = run_dir
        self.ctx = ctx
        self.run_tags = run_tags
        self.events = RunEvents(run_id, run_tags, record=ctx.state.record_event, write=self.write)
        self.sinks: SinkSet | None = None
        self._early: deque[Point] = deque(maxlen=EARLY_POINTS)  # written before the sinks
        self.load: RunLoad | None = None
        self.tick_runner: TickRunner | None = None
        self.remote_samplers: RemoteSamplers | None = None  # a target on another node
        self.listener: RunListener | None = None  # its leak alerts, where registered
        self.capture: RunCapture | PcapCapture | None = None  # `capture:`: its target's queries

    def build_sinks(self) -> None:
        self.sinks = run_sinks(
            self.run_id, self.scenario, self.run_dir, self.ctx.data_dir, self.ctx.metrics
        )
        early, self._early = list(self._early), deque(maxlen=EARLY_POINTS)
        self.write(early)

    def open_capture(self) -> None:
        """`capture:`: the socket the target writes its dnstap to, listened on before the
        target starts (InputError: it cannot be bound)."""
        cfg = self.scenario.capture
        if cfg is None:
            return
        if cfg.source == "pcap":  # started once the target is up (attach_capture)
            self.capture = PcapCapture(
                cfg, self.run_dir, self.run_id, dies_with_owner=self.foreground
            )
            return
        sc = self.scenario
        path = socket_path(cfg, self.run_dir, sc.target.host, sc.base_dir)
        self.capture = RunCapture(cfg, path, self.run_dir)
        self.capture.open()
        self.event("capture_listening", f"capture: listening for dnstap on {path}")

    def attach_capture(self, running: Running | None) -> None:
        """`capture.source: pcap`: tcpdump on what goes to the load's server, listening
        before the run's origin (TargetStartError with tcpdump's line if it cannot)."""
        if isinstance(self.capture, PcapCapture):
            load = self.scenario.load
            host, port = load_address(load.server if load else None, running)
            self.event("capture_listening", self.capture.attach(host, port))

    def check_capture(self, now_ns: int) -> None:
        if self.capture is not None:
            for f in self.capture.check(now_ns):
                self.event(f.kind, f.message, f.value, now_ns)

    def finish_capture(self, now_ns: int, drain_s: float = DRAIN_S) -> dict[str, Any] | None:
        """Once the target has stopped (its writer given `drain_s` to close): the capture
        written (what it holds, for the result), its last events told; a fault is an
        event, never the run's end."""
        if self.capture is None:  # a resumed run: what was written before it stands
            return written_capture(self.run_dir) if self.scenario.capture is not None else None
        try:
            faults = self.capture.finish(drain_s)
        except Exception as exc:
            faults = [Fault("capture_failed", f"capture: finishing: {exc}", 0.0)]
        for f in faults:
            self.try_event(f.kind, f.message, now_ns, f.value)
        return self.capture.written

    def build_load_and_samplers(
        self,
        running: Callable[[], Running | None],
        warmup_end_ns: Callable[[], int],
        origin_ns: Callable[[], int],
    ) -> None:
        """`running()` gives the target as it is now (a restart changes its PID)."""
        sc = self.scenario
        if sc.load is not None and sc.load.agents is not None:
            self.load = AgentsLoad(
                sc.load,
                load_address(sc.load.server, running()),
                base_dir=sc.base_dir,
                run_id=self.run_id,
                run_started_ns=origin_ns,
                run_duration_s=sc.duration_s,
                allow_targets=tuple(sc.allow_targets),
                logs_dir=agents_dir(self.run_dir, LOAD_ROLE),
            )
        elif sc.load is not None and sc.load.replay is not None:
            self.load = ReplayLoad(
                sc.load,
                load_address(sc.load.server, running()),
                base_dir=sc.base_dir,
                run_origin_ns=origin_ns,
            )
        elif sc.load is not None:
            self.load = SupervisedLoad(
                LoadRunner(
                    sc.load,
                    load_address(sc.load.server, running()),
                    base_dir=sc.base_dir,
                    allow_targets=tuple(sc.allow_targets),
                )
            )
        samplers = build_samplers(
            sc.samplers,
            running,
            load_source=self.load,
            warmup_end_ns=warmup_end_ns,
            base_dir=sc.base_dir,
            profiles_dir=profiles_dir(self.run_dir),
        )
        if sc.samplers.agent is not None:
            self.remote_samplers = RemoteSamplers(
                sc.samplers,
                sc.target.name,
                self.run_id,
                origin_ns,
                logs_dir=agents_dir(self.run_dir, SAMPLER_ROLE),
            )
            samplers.append(self.remote_samplers)
        self.tick_runner = TickRunner(
            samplers,
            run_tags=self.run_tags,
            metrics=self.ctx.metrics,
            interval_s=sc.samplers.interval_s,
        )
        self.listener = self.ctx.listen(RunFacts(self.run_id, sc, self.run_dir, self.run_tags))
        self._tell_version()

    def retag(self, version: str) -> None:
        """Points written from now on carry `version` (a soak's swap): the run's tags and
        the tick runner's copy of them."""
        self.run_tags["version"] = version
        if self.tick_runner is not None:
            self.tick_runner.run_tags["version"] = version
        self._tell_version()

    def _tell_version(self) -> None:
        """`soak_run_info` on /metrics: the version running and, across an upgrade, its
        segment (the alert rules join on it, so an alert carries the version it fires in)."""
        segment = segment_now(self.run_dir) if self.scenario.upgrade is not None else None
        self.ctx.metrics.set_run_version(self.run_id, self.run_tags["version"], segment)

    def event(
        self, kind: str, message: str, value: float = 0.0, time_ns: int | None = None
    ) -> None:
        """Into the state store (status, report) and the sinks (Grafana annotations)."""
        self.events.add(kind, message, value, time_ns)

    def try_event(
        self, kind: str, message: str, time_ns: int | None = None, value: float = 0.0
    ) -> None:
        """An event that may not be writable (a full disk): logged if it is not."""
        try:
            self.event(kind, message, value, time_ns)
        except Exception as exc:
            log.error("run %s: event %s not recorded (%s): %s", self.run_id, kind, exc, message)

    def write(self, points: list[Point]) -> None:
        """To the sinks; before they are open (a data directory's clean-up said before
        the run starts), the points wait for them, the last EARLY_POINTS at most."""
        if self.sinks is None:
            self._early.extend(points)
        elif points:
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
            self.events.recorded(kind, message, number, p.time_ns)

    def stop(self, *, close_listener: bool = True, ended_ns: int | None = None) -> None:
        """Ticks, the listener (alerts) and load stop; a load that will not stop is an
        event. The load's last windows are stored no later than `ended_ns` (the run's end,
        where its last phase ends), so that a stopped run's phases hold every window it
        ran."""
        if self.tick_runner is not None:  # a late load sample's windows: no tick is left
            self.write(self.tick_runner.close())
        if self.remote_samplers is not None:
            try:
                last_tick_ns = self.tick_runner.last_tick_ns if self.tick_runner else None
                points = self.remote_samplers.stop(last_tick_ns)
                self.write([p.with_tags(self.run_tags) for p in points])
            except Exception as exc:  # the run must still end; the fault is recorded
                self.event("error", f"stopping the sampler agent: {exc}", 0.0)
        if self.listener is not None and close_listener:
            self.listener.close()
        if self.load is not None:
            try:
                self.load.stop()
                tail = self.load.tail_points(ended_ns or time.time_ns())
                self.write([p.with_tags(self.run_tags) for p in tail])
                for f in self.load.check(0.0):  # what only the stop found (agent_short)
                    self.event(f.kind, f.message, f.value)
            except Exception as exc:  # the run must still end; the fault is recorded
                self.event("error", f"stopping the load: {exc}", 0.0)

    def close_sinks(self, *, hand_over: bool = False) -> None:
        """Flushed and closed: whatever reads the store next sees every point. At the
        run's end (`hand_over`) a spool that still holds points is owed: recorded, and
        replayed by the service until its sink takes it (runs.owed)."""
        if self.sinks is None:
            return
        sinks, self.sinks = self.sinks, None
        sinks.close()
        if hand_over:
            for message, points in hand_over_spools(
                self.run_id, sinks, self.ctx.state, self.ctx.metrics
            ):
                self.try_event("spool_owed", message, value=float(points))
