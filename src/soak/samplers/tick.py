"""Ticks: every sampler of one tick runs concurrently; every point carries the scheduled time.

Each sampler has its own deadline inside the interval (by default 80% of it
after the tick's scheduled time): at the deadline the tick takes the points of
the samplers that are done and goes on. A sampler that raises, or has no
result by its deadline, loses its own sample and nothing else: an error count
and an `event` point with the cause. A sampler still busy from an earlier tick
is not started twice (`sampler_overrun`). A tick that still ends after the
next tick's time is an `event` (`tick_overrun`) with its duration.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import threading
import time
from collections.abc import Callable

from soak.clock import ns_to_s
from soak.names import is_agent_part
from soak.points import Point, event_point
from soak.samplers.base import Sampler
from soak.sinks.metrics import ServiceMetrics

# The share of the interval, from the tick's scheduled time, that samplers get.
DEADLINE_FRACTION = 0.8
# A tick that starts after its samplers' deadline still gives them this share.
MIN_WAIT_FRACTION = 0.1

Outcome = tuple[list[Point], float, BaseException | None]  # points, duration_s, error


def sample_once(
    sampler: Sampler, tick_time_ns: int, clock: Callable[[], float] = time.monotonic
) -> Outcome:
    """One sampler's points of one tick, how long it took, and what it raised (if it did):
    a sampler that fails loses its own sample and nothing else."""
    start_s = clock()
    try:
        points = sampler.sample(tick_time_ns)
    except Exception as exc:  # any failure of one sampler is recorded; the others go on
        return [], clock() - start_s, exc
    return points, clock() - start_s, None


def fault_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def sampler_event(
    name: str, message: str, tick_time_ns: int, kind: str = "sampler_error", value: float = 0.0
) -> Point:
    """The `event` point of a sampler's fault in one tick, tagged with the sampler."""
    return event_point(kind, f"{name}: {message}", tick_time_ns, value).with_tags({"sampler": name})


class TickRunner:
    """Runs every sampler once per tick, each against its own deadline; see the module doc.

    With `interval_s` a sampler's deadline is `deadline_fraction` of the interval
    after the tick's scheduled time (or its own `deadline_s` attribute, if
    earlier), and never more than `timeout_s` after the tick started; without
    it, `timeout_s` after the tick started.
    """

    def __init__(
        self,
        samplers: list[Sampler],
        *,
        run_tags: dict[str, str],
        metrics: ServiceMetrics | None = None,
        max_workers: int = 16,
        timeout_s: float = 30.0,
        interval_s: float | None = None,
        deadline_fraction: float = DEADLINE_FRACTION,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if interval_s is not None and interval_s <= 0:
            raise ValueError(f"interval must be positive, got {interval_s} s")
        if not 0 < deadline_fraction <= 1:
            raise ValueError(f"deadline_fraction must be in (0, 1], got {deadline_fraction}")
        self.samplers = samplers
        self.run_tags = dict(run_tags)
        self._soak = run_tags.get("soak", "")  # the run its metrics are labelled with
        self._closed = False
        self.metrics = metrics
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.deadline_fraction = deadline_fraction
        self.clock = clock
        self.wall_clock_ns = wall_clock_ns
        self.errors: dict[str, int] = {s.name: 0 for s in samplers}
        self.last_durations_s: dict[str, float] = {}
        self.last_tick_s = 0.0  # from the tick's scheduled time to the end of its samplers
        self.last_tick_ns: int | None = None  # the scheduled time of the last tick run
        self._pool = cf.ThreadPoolExecutor(
            max_workers=max(1, min(max_workers, len(samplers))), thread_name_prefix="sampler"
        )
        # sampler index -> (its unfinished run, the tick it was started for)
        self._busy: dict[int, tuple[cf.Future[Outcome], int]] = {}
        # Points of samplers whose points must never be lost (`keep_late`: the load's
        # ledger windows, each stamped with its own second) that came after their
        # tick's deadline: they go out with the next tick, or with close() at the end.
        self._late_points: list[Point] = []
        self._late_lock = threading.Lock()
        # Those samplers' runs that were late, and those whose points were taken: each
        # run's points are taken once, by its callback or by close(), whichever is first.
        self._kept_late: list[cf.Future[Outcome]] = []
        self._taken: set[cf.Future[Outcome]] = set()

    def _deadline_after_tick_s(self, sampler: Sampler) -> float:
        own = getattr(sampler, "deadline_s", None)
        tick_share = (
            math.inf if self.interval_s is None else self.interval_s * self.deadline_fraction
        )
        return min(tick_share, own) if isinstance(own, int | float) else tick_share

    def _wait_budget_s(self, sampler: Sampler, lag_s: float) -> float:
        """How long this tick waits for `sampler`, from now (the tick started `lag_s` late)."""
        deadline_s = self._deadline_after_tick_s(sampler)
        budget_s = deadline_s - lag_s
        if self.interval_s is not None:
            budget_s = max(budget_s, min(deadline_s, self.interval_s * MIN_WAIT_FRACTION))
        return min(budget_s, self.timeout_s)

    def run_tick(self, tick_time_ns: int) -> list[Point]:
        """Every sampler once, concurrently; their points (run tags added) in sampler order."""
        start_s = self.clock()
        lag_s = max(0.0, ns_to_s(self.wall_clock_ns() - tick_time_ns))
        started: list[tuple[int, cf.Future[Outcome], float]] = []  # index, run, budget_s
        by_sampler: list[list[Point]] = [[] for _ in self.samplers]
        for i, sampler in enumerate(self.samplers):
            busy = self._busy.get(i)
            if busy is not None and not busy[0].done():
                age_s = ns_to_s(tick_time_ns - busy[1])
                message = f"still running from the tick {age_s:g} s earlier: no sample this tick"
                by_sampler[i] = [
                    self._failed(sampler.name, message, tick_time_ns, "sampler_overrun")
                ]
                continue
            future = self._pool.submit(sample_once, sampler, tick_time_ns, self.clock)
            self._busy[i] = (future, tick_time_ns)
            started.append((i, future, self._wait_budget_s(sampler, lag_s)))
        for _, future, budget_s in sorted(started, key=lambda s: s[2]):
            remaining_s = start_s + budget_s - self.clock()
            if remaining_s > 0 and not future.done():
                cf.wait([future], timeout=remaining_s)
        for i, future, budget_s in started:
            name = self.samplers[i].name
            keep = bool(getattr(self.samplers[i], "keep_late", False))
            by_sampler[i] = self._collect(name, future, budget_s, lag_s, tick_time_ns, keep)
        points = [p for sampler_points in by_sampler for p in sampler_points]
        with self._late_lock:
            points += self._late_points
            self._late_points = []
            # the late runs whose points are out: close() need not wait for them
            self._kept_late = [f for f in self._kept_late if f not in self._taken]
            self._taken.clear()
        self.last_tick_s = lag_s + (self.clock() - start_s)
        self.last_tick_ns = tick_time_ns
        if self.interval_s is not None and self.last_tick_s > self.interval_s:
            message = (
                f"tick took {self.last_tick_s:.2f} s from its time ({lag_s:.2f} s late to start),"
                f" past the next tick (interval {self.interval_s:g} s)"
            )
            points.append(event_point("tick_overrun", message, tick_time_ns, self.last_tick_s))
        tagged = [p.with_tags(self.run_tags) for p in points]
        self._observe_load(tagged)
        return tagged

    def gap_cause(self, tick_time_ns: int) -> str:
        """Why no tick ran between the last one and `tick_time_ns`, as far as the ticks know."""
        if self.last_tick_ns is None:
            return "no earlier tick ran here"
        since_s = ns_to_s(tick_time_ns - self.last_tick_ns)
        where = f"the tick {since_s:g} s earlier"
        if self.interval_s is not None and self.last_tick_s > self.interval_s:
            return f"{where} overran: its samplers ended {self.last_tick_s:.2f} s after its time"
        return (
            f"{where} had its samples {self.last_tick_s:.2f} s after its time; the tick job did"
            " not start again in time (the process was busy: writes, analysis or no CPU)"
        )

    def _collect(
        self,
        name: str,
        future: cf.Future[Outcome],
        budget_s: float,
        lag_s: float,
        tick_ns: int,
        keep: bool = False,
    ) -> list[Point]:
        if not future.done():
            if keep:
                with self._late_lock:
                    self._kept_late.append(future)
            future.add_done_callback(lambda f: self._observe_late(name, f, keep))
            fate = "its points follow with the next tick" if keep else "this sample is lost"
            message = (
                f"no result {lag_s + budget_s:.2f} s after the tick's time (its deadline;"
                f" started {lag_s:.2f} s late): {fate}"
            )
            return [self._failed(name, message, tick_ns, "sampler_timeout")]
        got, duration_s, error = future.result()
        self.last_durations_s[name] = duration_s
        if self.metrics is not None:
            self.metrics.observe_sampler(self._soak, name, duration_s, error is None)
        if error is not None:
            return [self._failed(name, fault_text(error), tick_ns, count_metric=False), *got]
        return got

    def _observe_late(self, name: str, future: cf.Future[Outcome], keep: bool = False) -> None:
        """A sampler that finished after its deadline: its duration still counts, and the
        points of one that keeps them (`keep_late`) go out with the next tick."""
        if future.cancelled():
            return
        if keep:
            self._take_late(future)
        if self._closed:
            return
        duration_s = future.result()[1]
        self.last_durations_s[name] = duration_s
        if self.metrics is not None:
            self.metrics.observe_sampler(self._soak, name, duration_s, ok=True)

    def _failed(
        self,
        name: str,
        message: str,
        tick_time_ns: int,
        kind: str = "sampler_error",
        *,
        count_metric: bool = True,
    ) -> Point:
        self.errors[name] = self.errors.get(name, 0) + 1
        if count_metric and self.metrics is not None:
            self.metrics.count_sampler_error(self._soak, name)
        return sampler_event(name, message, tick_time_ns, kind, self.errors[name])

    def _observe_load(self, points: list[Point]) -> None:
        if self.metrics is None:
            return
        soak = self._soak
        for p in points:
            if p.measurement != "load" or is_agent_part(p.tags):  # the total only
                continue
            target, achieved = p.fields.get("rate_target"), p.fields.get("rate_achieved")
            if not (isinstance(target, int | float) and isinstance(achieved, int | float)):
                continue
            cls = p.tags.get("class", "all")
            if math.isfinite(target) and math.isfinite(achieved):
                self.metrics.set_load_rate(soak, cls, target, achieved)
            sent, lost, due = p.fields.get("sent"), p.fields.get("lost"), p.fields.get("due")
            if isinstance(sent, int | float) and isinstance(lost, int | float):
                due_n = float(due) if isinstance(due, int | float) else None
                self.metrics.count_load(soak, cls, sent, lost, due_n)

    def _take_late(self, future: cf.Future[Outcome]) -> None:
        """A late run's kept points into the next tick's, once."""
        with self._late_lock:
            if future in self._taken:
                return
            self._taken.add(future)
            self._late_points += future.result()[0]

    def close(self) -> list[Point]:
        """Waits for no sampler still running (one stuck in I/O must not hang shutdown),
        but for those whose points must never be lost (`keep_late`: the load's ledger
        windows), at most `timeout_s` each: their points that no tick took, tagged, for the
        caller to write (a run's end has no next tick)."""
        with self._late_lock:
            waiting = list(self._kept_late)
        for future in waiting:
            cf.wait([future], timeout=self.timeout_s)
            if future.done() and not future.cancelled():
                self._take_late(future)
        self._closed = True  # a sampler finishing later adds no series to an ended run
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._late_lock:
            late, self._late_points = self._late_points, []
        return [p.with_tags(self.run_tags) for p in late]
