"""A soak run's load from a capture (`load.replay`), behind the face SupervisedLoad has.

The Replay (soak.load.replay._loop) plays in a process of its own (_process, _child),
from the run's origin: its second 0 is the run's grid second 0, so each of its closed
ledger windows is stamped at the end of its own second of the run, as the workers'
are, and becomes the run's `load` points through SupervisedLoad's parts. Phases,
classes, result.json, the audit and the report read them as any other load's.

The replay keeps the capture's timing, scaled by its own `speed` or `rate_qps`
(docs/replay.md): a phase's rate does not change it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.clock import NS_PER_S, WHOLE_SECONDS, ns_to_s, s_to_ns, second_end_ns
from soak.load.ledger import Window
from soak.load.load_config import LoadConfig
from soak.load.replay._loop import Replay, load_replay, monotonic_ns
from soak.load.replay._plan import Plan
from soak.load.replay._process import (
    CONN_FIELDS,
    SOCKETS_OPEN,
    ChildSpec,
    Closed,
    ReplayProcess,
)
from soak.load.replay._result import Offsets
from soak.load.stats import MixStats, result_from
from soak.load.supervised import TOTAL_FIELDS, engine_counters, load_points, run_span_ns
from soak.points import Fault, Point
from soak.traffic.replay_config import BOUND_P99_US

# The send offsets' quantiles on each `load` point of class `all` (send_offset_p99_us...).
OFFSET_QUANTILES = ("p50", "p99", "max")

# Past the run's end, the queries in flight get their timeout and this much to end.
JOIN_GRACE_S = 5.0


class ReplayLoad:
    start_lead_s = 1.0  # the child is ready before start(); the origin only needs to lie ahead

    def __init__(
        self,
        cfg: LoadConfig,
        server: tuple[str, int],
        base_dir: Path,
        run_origin_ns: Callable[[], int] | None = None,
    ) -> None:
        """Reads the capture (the pre-flight checked it); nothing is sent before start().
        `run_origin_ns()`: the run's origin (wall clock), the replay's second 0 wherever
        it starts (a resumed run: its place in the plan); else the origin start() gets."""
        assert cfg.replay is not None
        self.cfg = cfg
        self.replay_cfg = cfg.replay.at(base_dir)
        self.capture = load_replay(self.replay_cfg)
        self.server = server
        self.run_origin_ns = run_origin_ns
        self.highest_us = int(cfg.timeout_s * 1e6) + 1000
        self.rate_qps = 0.0  # the phases' rate: recorded, not applied (docs/replay.md)
        self.restarts = 0  # fresh replays after one raised (the face SupervisedLoad has)
        self.grid_ns = 0  # wall time of the replay's second 0: the run's origin
        self.end_ns = 0
        self._lock = threading.Lock()
        # Closed, not yet handed out as points, each with its queries' send offsets.
        self._closed_windows: list[Closed] = []
        # The plan as the child plays it: its classes, loops and dues (nothing is sent
        # from here; a child that died is wound up by a Replay of its own, _wind_up_here).
        self.plan = Plan(self.replay_cfg, self.capture, cfg.seed or 0)
        self.names = list(self.plan.classes.names)
        self._next_second = 0  # the first second of the run no closed window has covered
        self._bound_at: str | None = None  # the first window that missed the timing
        self._bound_told = False
        self._total = MixStats(self.names, self.highest_us)  # every closed window
        self._stop = threading.Event()
        self._child: ReplayProcess | None = None
        self._wound_up = False  # the replay that raised has closed its windows
        # The plays' socket counts as their process told them (SupervisedLoad's
        # engine_counters), from the first play's start; plays whose process died
        # before telling them are lost with it.
        self._counters: list[dict[str, int]] = []
        self._counted_from_ns = 0
        self._plays_lost = 0
        self._error_told = False
        self._refusal_told = False  # once a run, not once a restart

    @property
    def planned_rate_qps(self) -> float:
        """The replay's mean rate as planned (the capture's, scaled): what it is asked."""
        return self.plan.rate_qps

    @property
    def child_pid(self) -> int | None:
        """The process the replay plays in, while it lives."""
        return None if self._child is None else self._child.pid

    def _local_replay(self) -> Replay:
        replay = Replay(
            self.replay_cfg,
            self.capture,
            self.server[0],
            self.server[1],
            self.cfg.timeout_s,
            self.cfg.seed or 0,
        )
        replay.ledger.on_window = self._closed_here
        return replay

    def prepare(self, max_duration_s: float) -> None:
        """The replay's process started and ready (its interpreter, its capture read),
        so that its first query leaves on time."""
        self._ready_child()

    def _ready_child(self) -> ReplayProcess:
        if self._child is None or self._child.dead:
            if self._child is not None:
                self._plays_lost += self._child.uncounted
            spec = ChildSpec.of(self.cfg, self.replay_cfg, self.server)
            child = ReplayProcess(spec, self._closed, self._counted)
            child.start()
            self._child = child
        return self._child

    def start(
        self,
        rate_qps: float,  # recorded only: a phase's rate does not pace a replay
        remaining_s: float,
        begin_at_ns: int | None = None,  # wall clock: the run's origin, its second 0
        end_ns: int | None = None,  # wall clock: the run's end, where sending ends
    ) -> None:
        """The replay from the run's origin (else the next whole second) to its end; a
        resumed run's from its next whole second, at that place in the plan."""
        self.rate_qps = rate_qps
        self._ready_child()  # a resumed run's was not prepared
        begin_at_ns, end_ns = run_span_ns(remaining_s, begin_at_ns, end_ns, self.start_lead_s)
        origin_ns = self.run_origin_ns() if self.run_origin_ns is not None else begin_at_ns
        self.grid_ns, self.end_ns = origin_ns, end_ns
        self._counted_from_ns = self._counted_from_ns or begin_at_ns
        self._play_from(begin_at_ns - origin_ns)

    def _play_from(self, start_ns: int) -> None:
        """The replay's process sending from `start_ns` after the run's origin."""
        child = self._ready_child()
        origin_mono_ns = monotonic_ns() + (self.grid_ns - time.time_ns())
        send_s = ns_to_s(self.end_ns - self.grid_ns)
        self._next_second = max(self._next_second, start_ns // NS_PER_S)
        self._wound_up = False
        child.play(origin_mono_ns, send_s, start_ns)

    @property
    def _error(self) -> str | None:
        return None if self._child is None else self._child.error

    def _closed(self, closed: Closed) -> None:
        """In the reader thread of the replay's process: a window closed (every query
        due in it ended)."""
        window, offsets = closed.window, closed.offsets
        p99_us = offsets.quantiles()["p99"]
        skipped = window.total().skipped
        if self._bound_at is None and (skipped or p99_us > BOUND_P99_US):
            self._bound_at = (
                f"second {window.second} of the run: send offset p99 {p99_us:,.0f} µs"
                f" (at most {BOUND_P99_US:,} µs), {skipped} skipped"
            )
        with self._lock:
            self._next_second = max(self._next_second, window.second + 1)
            self._closed_windows.append(closed)
            self._total.add_window(window)

    def _counted(self, counts: dict[str, int]) -> None:
        """In the reader thread: a play's socket counts, at its end."""
        with self._lock:
            self._counters.append(counts)

    def engine_counters(self) -> dict[str, Any] | None:
        """Every play's socket counts summed, from the first play's start (None while a
        play is under way or where one's died with its process: engine_counters_lost)."""
        child = self._child
        if self._plays_lost or (child is not None and child.uncounted):
            return None
        with self._lock:
            counters = engine_counters(list(self._counters))
        return None if counters is None else {**counters, "from_ns": self._counted_from_ns}

    def _closed_here(self, window: Window) -> None:
        """A window the wind-up of a dead child closed here: no query of it was sent."""
        conns = dict.fromkeys([*CONN_FIELDS.values(), SOCKETS_OPEN], 0)
        self._closed(Closed(window, Offsets(), conns))

    def set_rate(self, rate_qps: float, at_ns: int | None = None) -> None:
        """A phase's rate does not pace a replay: its capture's timing does."""
        self.rate_qps = rate_qps

    def take_window(self) -> dict[str, dict[str, float]]:
        return {}  # the windows go out as points (take_points), none over intervals

    def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]:
        return {}

    def check(self, remaining_s: float) -> list[Fault]:
        """The first window that missed the capture's timing, once; a replay process
        refused the real-time class (`replay_not_realtime`), once; a replay that raised
        or whose process ended (`load_failed`), restarted for the rest of the run
        (`load_restarted`), as the workers' engine is (SupervisedLoad): at most one
        restart a tick, none once the run's time is up."""
        faults: list[Fault] = []
        if self._bound_at is not None and not self._bound_told:
            self._bound_told = True
            message = "generator-bound: the replay could not keep the capture's timing at "
            faults.append(Fault("generator_bound", message + self._bound_at, 1.0))
        child = self._child
        if child is not None and child.realtime_refused and not self._refusal_told:
            self._refusal_told = True
            message = f"the replay's process plays at normal priority: {child.realtime_refused}"
            faults.append(Fault("replay_not_realtime", message, 1.0))
        error = self._error
        if error is not None and not self._error_told:
            self._error_told = True
            faults.append(Fault("load_failed", f"the replay stopped: {error}", 1.0))
            if remaining_s > 0 and not self._stop.is_set():
                faults.append(self._restart(error))
        return faults

    def _restart(self, why: str) -> Fault:
        """The replay that raised wound up to the next whole second (at least the start
        lead away), a fresh one from there: its loop and names as if none had stopped."""
        self._join()
        lead_ns = s_to_ns(self.start_lead_s)
        at_ns = WHOLE_SECONDS.at_or_after(time.time_ns() + lead_ns) - self.grid_ns
        self._wind_up(at_ns)
        try:
            self._ready_child()  # a fresh process where the last one ended
        except Exception as exc:  # no fresh one (out of file descriptors): no more tries
            return Fault("load_failed", f"the replay could not be restarted: {exc}", 1.0)
        self._error_told = False
        self.restarts += 1
        at_ns = max(at_ns, WHOLE_SECONDS.at_or_after(time.time_ns() + lead_ns) - self.grid_ns)
        self._wind_up_here(at_ns)  # the seconds a fresh process took to start
        self._play_from(at_ns)
        loop = self.plan.position(at_ns)[0]
        message = (
            f"load engine restarted ({self.restarts}): the replay stopped: {why};"
            f" a fresh one from second {at_ns // NS_PER_S} of the run (loop {loop})"
        )
        return Fault("load_restarted", message, float(self.restarts))

    def _wind_up(self, until_ns: int) -> None:
        """The replay that raised: its windows closed, the queries it did not come to
        before `until_ns` (after the origin; the run's end at most) due and skipped; in
        its process, else (the process died) here, from the first second not closed."""
        until_ns = min(until_ns, self.end_ns - self.grid_ns)
        child = self._child
        wait_s = self.cfg.timeout_s + JOIN_GRACE_S
        if child is None or not child.wind_up(until_ns, wait_s):
            self._wind_up_here(until_ns)
        self._wound_up = True

    def _wind_up_here(self, until_ns: int) -> None:
        """The seconds from the first one no window closed to `until_ns`: their planned
        queries due and skipped (none of them sent by a live replay)."""
        with self._lock:
            from_ns = self._next_second * NS_PER_S
        if from_ns >= until_ns:
            return
        local = self._local_replay()
        local.start_ns = from_ns
        try:
            local.wind_up(until_ns)
        finally:
            local.conns.shut()

    def _join(self) -> None:
        child = self._child
        if child is not None and not child.wait_done(self.cfg.timeout_s + JOIN_GRACE_S):
            raise RuntimeError("the replay did not stop")

    def _fields(self, *windows: Closed) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        """The windows' ledger fields per class; on `all`, their send offsets (fidelity)
        and connection counts (the last window's open sockets); and their latency
        histograms per class."""
        stats = MixStats(self.names, self.highest_us)
        offsets = Offsets()
        conns = dict.fromkeys(CONN_FIELDS.values(), 0.0)
        for closed in windows:
            stats.add_window(closed.window)
            offsets.merge(closed.offsets)
            for name in CONN_FIELDS.values():
                conns[name] += closed.conns[name]
        fields: dict[str, dict[str, float]] = stats.fields()
        if "all" not in fields:
            return fields, stats.encoded_hists()
        if offsets.counts:
            quantiles = offsets.quantiles()
            fields["all"].update({f"send_offset_{q}_us": quantiles[q] for q in OFFSET_QUANTILES})
        conns[SOCKETS_OPEN] = float(windows[-1].conns[SOCKETS_OPEN]) if windows else 0.0
        fields["all"].update(conns)
        return fields, stats.encoded_hists()

    def take_points(self, time_ns: int, end_ns: int | None = None) -> list[Point]:
        """The `load` points of the windows closed since the last call, each at the end of
        its second of the run's grid; those after `end_ns` (or the run's end) as one
        there, inside the run."""
        with self._lock:
            windows, self._closed_windows = self._closed_windows, []
        cut_ns = min(end_ns or self.end_ns, self.end_ns)
        points: list[Point] = []
        after: list[Closed] = []
        for closed in windows:
            at_ns = second_end_ns(self.grid_ns, closed.window.second)
            if at_ns <= cut_ns:
                fields, hists = self._fields(closed)
                points += load_points(fields, {}, at_ns, hists)
            else:
                after.append(closed)
        if after:
            fields, hists = self._fields(*after)
            points += load_points(fields, {}, cut_ns, hists)
        return points

    def tail_points(self, time_ns: int) -> list[Point]:
        """After stop(): the windows that closed as the replay drained."""
        return self.take_points(time_ns, end_ns=time_ns)

    def totals(self, *, stddev: bool = True) -> dict[str, Any]:
        """The sums of the windows closed so far (all of them once stopped)."""
        with self._lock:
            seconds = float(self._total.seconds)
            result = result_from(self._total, "replay", seconds, self.rate_qps, stddev=stddev)
        totals: dict[str, Any] = {name: int(getattr(result, name, 0) or 0) for name in TOTAL_FIELDS}
        totals["latency_ms"] = dict(result.latency_ms)
        totals["seconds"] = seconds
        totals["load_restarts"] = self.restarts
        counters = self.engine_counters()
        if counters is not None:
            totals["engine_counters"] = counters
        lost = self._plays_lost + (self._child.uncounted if self._child and self._child.dead else 0)
        if lost:
            totals["engine_counters_lost"] = (
                f"the replay's process died {lost} time(s) before telling its socket counts"
            )
        # What a replay's report says of it (its loops: the ledger's due over these).
        plan = self.plan
        totals["replay"] = {
            "clients": len(plan.capture.clients),
            "queries_per_loop": len(plan.capture.queries),
            "scheduling": self._child.scheduling if self._child is not None else "",
        }
        return totals

    def stop(self) -> None:
        """Sending ends; the queries in flight end (answered or lost at their timeout).
        A replay that raised and was not restarted closes its windows here, what was due
        before now counted (skipped where unsent); then its process exits."""
        self._stop.set()
        child = self._child
        if child is None:
            return
        child.stop_sending()
        try:
            self._join()
            if self._error is not None and not self._wound_up:
                self._wind_up(time.time_ns() - self.grid_ns)
        finally:
            child.close()
