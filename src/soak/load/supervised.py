"""The load engine under supervision: a LoadRunner that is replaced when its workers die.

The samplers read windows from this object, not from one LoadRunner, so a
replacement is invisible to them; the run's totals add up every runner's.

RunLoad is the face every kind of a run's load has (this one, soak.load.fleet.run_load's
AgentsLoad, soak.load.replay's ReplayLoad): a run drives any of them through it and asks
none which it is. They share their parts from here: the totals' fields and the `load`
points of a window; check() gives soak.points.Fault events, as the sampler agent's does.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from soak.clock import WHOLE_SECONDS, ns_to_s, s_to_ns, second_end_ns
from soak.histogram import LatencyHistogram, merged
from soak.load.generator import LoadRunner
from soak.load.ledger import Window
from soak.names import AGENT_TAG, LAT_HIST_FIELD
from soak.points import Fault, FieldValue, Point

TOTAL_FIELDS = ("due", "sent", "skipped", "completed", "lost", "late", "unexpected")
# Fields that count queries over the interval, not over windows: they ride on the
# `all` point of the newest window a tick hands out.
INTERVAL_FIELDS = (
    "connections_opened",
    "connection_errors",
    "tls_resumed",
    "connections_hung_up",
    "handshake_p50_ms",
    "handshake_p95_ms",
    "handshake_p99_ms",
    "handshake_max_ms",
)
# Margin given to the engine beyond the run's end: the run's end job stops it first.
LOAD_MARGIN_S = 30.0


def _window_points(
    measurement: str,
    window: dict[str, dict[str, float]],
    time_ns: int,
    tags: dict[str, str],
    hists: dict[str, str],
) -> list[Point]:
    points = []
    for cls, stats in sorted(window.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        fields: dict[str, FieldValue] = {k: float(v) for k, v in stats.items()}
        if cls in hists:
            fields[LAT_HIST_FIELD] = hists[cls]
        if fields:
            points.append(Point(measurement, fields, time_ns, {**tags, "class": cls}))
    return points


def load_points(
    window: dict[str, dict[str, float]],
    agent_windows: dict[int, dict[str, dict[str, float]]],
    time_ns: int,
    hists: dict[str, str],
    agent_hists: dict[int, dict[str, str]] | None = None,
) -> list[Point]:
    """A window's `load` points, per class and in total, each with its latency histogram
    (`hists`, per class: soak.names.LAT_HIST_FIELD). Where load agents run, the same
    seconds also go out per agent with the tag `agent` (soak.names.AGENT_TAG): the store
    and the dashboards leave those out of every read of the run's total, so an agent's
    part is never added to the total it is already in."""
    points = _window_points("load", window, time_ns, {}, hists)
    for agent, part in sorted(agent_windows.items()):
        mine = (agent_hists or {}).get(agent, {})
        points += _window_points("load", part, time_ns, {AGENT_TAG: str(agent)}, mine)
    return points


def run_span_ns(
    remaining_s: float, begin_at_ns: int | None, end_ns: int | None, lead_s: float
) -> tuple[int, int]:
    """(origin, end) of a load on the wall clock: the run's, where given; else the next
    whole second at least `lead_s` ahead (so the windows lie on its grid), and
    `remaining_s` from now."""
    now_ns = time.time_ns()
    if begin_at_ns is None:
        begin_at_ns = WHOLE_SECONDS.at_or_after(now_ns + s_to_ns(lead_s))
    if end_ns is None:
        end_ns = now_ns + s_to_ns(remaining_s)
    return begin_at_ns, end_ns


class RunLoad(Protocol):
    """A run's load, whatever carries it (see the module doc)."""

    # start() wants the run's origin at least this far ahead of now
    start_lead_s: float

    @property
    def planned_rate_qps(self) -> float | None:
        """The rate it plans itself where the phases' rate does not pace it (a replay
        plays its capture's), else None: the phase's rate is the target."""
        ...

    def prepare(self, max_duration_s: float) -> None: ...

    def start(
        self,
        rate_qps: float,
        remaining_s: float,
        begin_at_ns: int | None = None,
        end_ns: int | None = None,
    ) -> None: ...

    def set_rate(self, rate_qps: float, at_ns: int | None = None) -> None: ...

    def check(self, remaining_s: float) -> list[Fault]: ...

    def take_window(self) -> dict[str, dict[str, float]]: ...

    def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]: ...

    def take_points(self, time_ns: int, end_ns: int | None = None) -> list[Point]: ...

    def tail_points(self, time_ns: int) -> list[Point]: ...

    def totals(self, *, stddev: bool = True) -> dict[str, Any]: ...

    def stop(self) -> None: ...


def engine_counters(parts: list[dict[str, int] | None]) -> dict[str, int] | None:
    """The runners' socket counts summed (soak.load.stats.SocketCounts); None where one
    kept none: a part missing would read as a disagreement."""
    if not parts or any(p is None for p in parts):
        return None
    return {k: sum(p[k] for p in parts if p is not None) for k in parts[0] or {}}


class SupervisedLoad:
    # start() wants the run's origin at least this far ahead: the workers' interpreters
    # start (0.1-0.3 s, more on a busy machine) and send their first query at the origin.
    start_lead_s = 1.0

    def __init__(self, runner: LoadRunner) -> None:
        """`runner` (its workers not started yet) carries the load; a runner like it
        (LoadRunner.again) replaces it when its workers die."""
        self.cfg = runner.cfg
        self.runner = runner
        self.rate_qps = 0.0
        self.restarts = 0
        self._prior = dict.fromkeys(TOTAL_FIELDS, 0)
        self._prior_seconds = 0.0
        self._prior_hist = LatencyHistogram()  # the latency of the runners replaced
        self._prior_counters: list[dict[str, int] | None] = []  # theirs at the sockets
        self.first_grid_ns = 0  # the first runner's second 0: the sockets count from it
        self.grid_ns = 0  # wall time of the current runner's second 0 (on the run's grid)
        self.end_ns = 0  # wall time its sending ends (the run's end)
        # Closed windows of a runner replaced or stopped, not yet handed out as points:
        # (time, fields, latency histograms), per class.
        self._pending: list[tuple[int, dict[str, dict[str, float]], dict[str, str]]] = []
        self._taking = threading.Lock()  # _pending and the runners' ledgers: one taker

    @property
    def planned_rate_qps(self) -> float | None:
        return None  # paced by the phases' rate

    def prepare(self, max_duration_s: float) -> None:
        """Nothing to prepare: the workers start in well under a tick."""

    def start(
        self,
        rate_qps: float,
        remaining_s: float,
        begin_at_ns: int | None = None,
        end_ns: int | None = None,
    ) -> None:
        """Load at `rate_qps` for the run's `remaining_s` (and the margin), from
        `begin_at_ns` (wall clock: the run's origin) if given, else from the next whole
        second, until `end_ns` (wall clock: the run's end) if given."""
        self.rate_qps = rate_qps
        begin_at_ns, end_ns = run_span_ns(remaining_s, begin_at_ns, end_ns, self.start_lead_s)
        send_s = ns_to_s(end_ns - begin_at_ns)  # sending ends with the run
        self.grid_ns, self.end_ns = begin_at_ns, end_ns
        self.first_grid_ns = self.first_grid_ns or begin_at_ns
        # on the monotonic clock the workers wait on
        begin_at_s = time.monotonic() + ns_to_s(begin_at_ns - time.time_ns())
        self.runner.keep_ledger = True
        # Sending ends with the run (its last window with its last second); the margin
        # only bounds a load the run's end failed to stop.
        self.runner.start(
            rate_qps, remaining_s + LOAD_MARGIN_S, begin_at_s=begin_at_s, send_s=send_s
        )

    @property
    def counted_from_ns(self) -> int | None:
        """The first second of the run's grid this load counts (its start), once started."""
        return self.grid_ns or None

    def set_rate(self, rate_qps: float, at_ns: int | None = None) -> None:
        """The new rate from `at_ns` (wall clock: a phase's start) if given, else at once."""
        self.rate_qps = rate_qps
        # on the workers' grid: whole nanoseconds after the second 0 they started at
        self.runner.set_rate(rate_qps, None if at_ns is None else at_ns - self.grid_ns)

    def take_window(self) -> dict[str, dict[str, float]]:
        return self.runner.take_window()

    def supervise(self, remaining_s: float) -> str | None:
        """If the workers died: why, after starting a fresh runner for the rest of the run."""
        if self.runner.alive() or remaining_s <= 0:
            return None
        old = self.runner
        result = old.stop()
        for name in TOTAL_FIELDS:
            self._prior[name] += int(getattr(result, name, 0) or 0)
        self._prior_seconds += result.duration_s
        self._prior_hist.add(old.latency_histogram())
        self._prior_counters.append(result.engine_counters)
        with self._taking:
            self._keep_windows(old)  # its last windows are the run's too
        why = "; ".join(old.errors) or "a worker exited"
        self.runner = old.again()
        self.start(self.rate_qps, remaining_s, end_ns=self.end_ns or None)
        self.restarts += 1
        return why

    def check(self, remaining_s: float) -> list[Fault]:
        """supervise() as the run's events: a restart of the engine, if there was one."""
        why = self.supervise(remaining_s)
        if why is None:
            return []
        message = f"load engine restarted ({self.restarts}): {why}"
        return [Fault("load_restarted", message, float(self.restarts))]

    def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]:
        return {}  # one machine, no agents

    def _keep_windows(self, runner: LoadRunner, end_ns: int | None = None) -> None:
        """The runner's closed windows, as (the end of their second, fields): stamped like a
        tick, whose sample covers the interval that ends at its time."""
        end_ns = min(end_ns or self.end_ns, self.end_ns)
        inside: list[tuple[int, Window]] = []
        after: list[tuple[int, Window]] = []
        for window in runner.take_ledger():
            at_ns = second_end_ns(self.grid_ns, window.second)
            (inside if at_ns <= end_ns else after).append((at_ns, window))
        for at_ns, window in inside:
            self._pending.append((at_ns, *runner.window_parts(window)))
        if after:  # cut by the end (or the stop): stamped there, as one, inside the run
            self._pending.append((end_ns, *runner.window_parts(*(w for _, w in after))))

    def take_points(self, time_ns: int, end_ns: int | None = None) -> list[Point]:
        """The `load` points of the windows closed since the last call, each at the end of
        its own second of the run's grid (the run's ledger: the store holds every closed
        window once, so any sum over a time range is the sum of the windows due in it);
        none later than `end_ns` if given. One taker at a time: the sampler's take may
        still run, late, beside the run's last (tail_points) or a restart's."""
        with self._taking:
            return self._take_points(end_ns)

    def _take_points(self, end_ns: int | None) -> list[Point]:
        self._keep_windows(self.runner, end_ns)
        pending, self._pending = self._pending, []
        points: list[Point] = []
        for at_ns, fields, hists in pending:
            points += _window_points("load", fields, at_ns, {}, hists)
        interval = self.runner.take_window().get("all", {})
        extra = {k: float(v) for k, v in interval.items() if k in INTERVAL_FIELDS}
        if extra and points:
            newest = max(
                (p for p in points if p.tags.get("class") == "all"), key=lambda p: p.time_ns
            )
            newest.fields.update(extra)
        return points

    def tail_points(self, time_ns: int) -> list[Point]:
        """After stop(): the windows that closed as the workers drained, none stamped
        after `time_ns` (the run's end: a run stopped early ends there)."""
        return self.take_points(time_ns, end_ns=time_ns)

    def totals(self, *, stddev: bool = True) -> dict[str, Any]:
        result = self.runner.totals(stddev=stddev)
        totals: dict[str, Any] = {
            name: self._prior[name] + int(getattr(result, name, 0) or 0) for name in TOTAL_FIELDS
        }
        # the whole run's: every runner's windows merged, as the ledger's are
        whole = merged([self._prior_hist, self.runner.latency_histogram()])
        totals["latency_ms"] = {**result.latency_ms, **whole.latency_ms()}
        totals["seconds"] = self._prior_seconds + result.duration_s  # the windows' seconds
        totals["load_restarts"] = self.restarts
        counters = engine_counters([*self._prior_counters, result.engine_counters])
        if counters is not None:
            totals["engine_counters"] = {**counters, "from_ns": self.first_grid_ns}
        return totals

    def stop(self) -> None:
        self.runner.stop()
