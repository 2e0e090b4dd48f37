"""A soak run's load from a capture (`load.replay`), behind the face SupervisedLoad has.

The Replay (soak.load.replay) plays in a thread of the run's process, from the run's
origin: its second 0 is the run's grid second 0, so each of its closed ledger windows
is stamped at the end of its own second of the run, as the workers' are, and becomes
the run's `load` points through SupervisedLoad's parts. Phases, classes, result.json,
the audit and the report read them as any other load's.

The replay keeps the capture's timing, scaled by its own `speed` or `rate_qps`
(docs/replay.md): a phase's rate does not change it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.clock import ns_to_s, second_end_ns
from soak.load.ledger import Window
from soak.load.load_config import LoadConfig
from soak.load.replay import BOUND_P99_US, Replay, load_replay, monotonic_ns
from soak.load.replay_result import Offsets
from soak.load.stats import MixStats, result_from
from soak.load.supervised import TOTAL_FIELDS, load_points, run_span_ns
from soak.points import Fault, Point

# The send offsets' quantiles on each `load` point of class `all` (send_offset_p99_us...).
OFFSET_QUANTILES = ("p50", "p99", "max")
# The replay's connection counts (replay_conns.ClientConns.counts) grown while a window
# was open, on its `all` point: connections opened, queries sent on one already open,
# connections closed idle, connection errors. Counted when the window closes (its
# queries ended), so a window's figures lag its queries by up to load.timeout_s.
CONN_FIELDS = {
    "opened": "conn_opened",
    "reused": "conn_reused",
    "idled_out": "conn_idled_out",
    "errors": "conn_errors",
}
SOCKETS_OPEN = "sockets_open"  # the client sockets and connections open as it closed


@dataclass
class Closed:
    """A closed window, its queries' send offsets, its connection counts."""

    window: Window
    offsets: Offsets
    conns: dict[str, int]


# Past the run's end, the queries in flight get their timeout and this much to end.
JOIN_GRACE_S = 5.0


class ReplayLoad:
    start_lead_s = 1.0  # the thread starts at once; the origin only needs to lie ahead

    def __init__(self, cfg: LoadConfig, server: tuple[str, int], base_dir: Path) -> None:
        """Reads the capture (the pre-flight checked it); nothing is sent before start()."""
        assert cfg.replay is not None
        self.cfg = cfg
        replay_cfg = cfg.replay.at(base_dir)
        self.replay = Replay(
            replay_cfg, load_replay(replay_cfg), server[0], server[1], cfg.timeout_s, cfg.seed or 0
        )
        self.replay.on_window = self._closed
        self.replay.offsets.by_second = {}  # each window's offsets go out with its point
        self.names = list(self.replay.plan.classes.names)
        self.highest_us = int(cfg.timeout_s * 1e6) + 1000
        self.rate_qps = 0.0  # the phases' rate: recorded, not applied (docs/replay.md)
        self.restarts = 0  # the face SupervisedLoad has; a replay is not restarted
        self.grid_ns = 0
        self.end_ns = 0
        self._lock = threading.Lock()
        # Closed, not yet handed out as points, each with its queries' send offsets.
        self._closed_windows: list[Closed] = []
        self._conns_seen = self.replay.conns.counts()  # as the last window closed
        self._bound_at: str | None = None  # the first window that missed the timing
        self._bound_told = False
        self._total = MixStats(self.names, self.highest_us)  # every closed window
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: str | None = None
        self._error_told = False

    def prepare(self, max_duration_s: float) -> None:
        """Nothing to prepare: the capture was read on construction."""

    def start(
        self,
        rate_qps: float,  # recorded only: a phase's rate does not pace a replay
        remaining_s: float,
        begin_at_ns: int | None = None,  # wall clock: the run's origin, its second 0
        end_ns: int | None = None,  # wall clock: the run's end, where sending ends
    ) -> None:
        """The replay from the run's origin (else the next whole second) to its end."""
        self.rate_qps = rate_qps
        begin_at_ns, end_ns = run_span_ns(remaining_s, begin_at_ns, end_ns, self.start_lead_s)
        self.grid_ns, self.end_ns = begin_at_ns, end_ns
        origin_mono_ns = monotonic_ns() + (begin_at_ns - time.time_ns())
        send_s = ns_to_s(end_ns - begin_at_ns)
        self._thread = threading.Thread(
            target=self._play, args=(send_s, origin_mono_ns), name="replay", daemon=True
        )
        self._thread.start()

    def _play(self, send_s: float, origin_mono_ns: int) -> None:
        try:
            self.replay.run(send_s, origin_ns=origin_mono_ns, stopping=self._stop.is_set)
        except Exception as exc:  # told as the run's event by check()
            self._error = f"{type(exc).__name__}: {exc}"

    def _closed(self, window: Window) -> None:
        """In the replay's thread: a window closed (every query due in it ended)."""
        offsets = self.replay.offsets.take(window.second)  # the replay's thread: no race
        p99_us = offsets.quantiles()["p99"]
        skipped = window.total().skipped
        if self._bound_at is None and (skipped or p99_us > BOUND_P99_US):
            self._bound_at = (
                f"second {window.second} of the run: send offset p99 {p99_us:,.0f} µs"
                f" (at most {BOUND_P99_US:,} µs), {skipped} skipped"
            )
        counts = self.replay.conns.counts()  # the replay's thread: no race either
        grown = {name: counts[k] - self._conns_seen[k] for k, name in CONN_FIELDS.items()}
        grown[SOCKETS_OPEN] = self.replay.conns.open_sockets
        self._conns_seen = counts
        with self._lock:
            self._closed_windows.append(Closed(window, offsets, grown))
            self._total.add_window(window)

    def set_rate(self, rate_qps: float, at_ns: int | None = None) -> None:
        """A phase's rate does not pace a replay: its capture's timing does."""
        self.rate_qps = rate_qps

    def take_window(self) -> dict[str, dict[str, float]]:
        return {}  # the windows go out as points (take_points), none over intervals

    def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]:
        return {}

    def check(self, remaining_s: float) -> list[Fault]:
        """The replay's failure, and the first window that missed the capture's timing,
        each once, as the run's events."""
        faults: list[Fault] = []
        if self._bound_at is not None and not self._bound_told:
            self._bound_told = True
            message = "generator-bound: the replay could not keep the capture's timing at "
            faults.append(Fault("generator_bound", message + self._bound_at, 1.0))
        if self._error is not None and not self._error_told:
            self._error_told = True
            faults.append(Fault("load_failed", f"the replay stopped: {self._error}", 1.0))
        return faults

    def _fields(self, *windows: Closed) -> dict[str, dict[str, float]]:
        """The windows' ledger fields per class; on `all`, their send offsets (fidelity)
        and connection counts (the last window's open sockets)."""
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
            return fields
        if offsets.counts:
            quantiles = offsets.quantiles()
            fields["all"].update({f"send_offset_{q}_us": quantiles[q] for q in OFFSET_QUANTILES})
        conns[SOCKETS_OPEN] = float(windows[-1].conns[SOCKETS_OPEN]) if windows else 0.0
        fields["all"].update(conns)
        return fields

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
                points += load_points(self._fields(closed), {}, at_ns)
            else:
                after.append(closed)
        if after:
            points += load_points(self._fields(*after), {}, cut_ns)
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
        totals["load_restarts"] = 0
        return totals

    def stop(self) -> None:
        """Sending ends; the queries in flight end (answered or lost at their timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.cfg.timeout_s + JOIN_GRACE_S)
            if self._thread.is_alive():
                raise RuntimeError("the replay did not stop")
