"""Ticks: every sampler of one tick runs concurrently; every point carries the scheduled time.

A sampler that raises, or is still running at the tick's deadline, costs an
error count and an `event` point; the other samplers' points are kept. A
sampler still busy from an earlier tick is not started twice.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import time
from collections.abc import Callable

from soak.points import Point, event_point
from soak.samplers.base import Sampler
from soak.sinks.metrics import ServiceMetrics

NS_PER_S = 1_000_000_000

Outcome = tuple[list[Point], float, BaseException | None]  # points, duration_s, error


def next_tick_ns(now_ns: int, interval_s: float, origin_ns: int) -> int:
    """The first time at or after `now_ns` on the grid origin + k * interval (k >= 0).

    Ticks are absolute: a late tick does not shift the ones after it, and ticks
    missed while the process was busy are skipped, not run in a burst.
    """
    interval_ns = round(interval_s * NS_PER_S)
    if interval_ns <= 0:
        raise ValueError(f"interval must be positive, got {interval_s} s")
    if now_ns <= origin_ns:
        return origin_ns
    k = -(-(now_ns - origin_ns) // interval_ns)  # ceiling division on integers
    return origin_ns + k * interval_ns


def _run_one(sampler: Sampler, tick_time_ns: int, clock: Callable[[], float]) -> Outcome:
    start_s = clock()
    try:
        points = sampler.sample(tick_time_ns)
    except Exception as exc:  # any failure of one sampler is recorded; the others go on
        return [], clock() - start_s, exc
    return points, clock() - start_s, None


class TickRunner:
    def __init__(
        self,
        samplers: list[Sampler],
        *,
        run_tags: dict[str, str],
        metrics: ServiceMetrics | None = None,
        max_workers: int = 8,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.samplers = samplers
        self.run_tags = dict(run_tags)
        self.metrics = metrics
        self.timeout_s = timeout_s
        self.clock = clock
        self.errors: dict[str, int] = {s.name: 0 for s in samplers}
        self.last_durations_s: dict[str, float] = {}
        self._pool = cf.ThreadPoolExecutor(
            max_workers=max(1, min(max_workers, len(samplers))), thread_name_prefix="sampler"
        )
        self._busy: dict[int, cf.Future[Outcome]] = {}  # sampler index -> unfinished run

    def run_tick(self, tick_time_ns: int) -> list[Point]:
        """Every sampler once, concurrently; their points (run tags added) in sampler order."""
        started: list[tuple[int, cf.Future[Outcome]]] = []
        points: list[Point] = []
        for i, sampler in enumerate(self.samplers):
            if i in self._busy and not self._busy[i].done():
                points.append(
                    self._failed(
                        sampler.name,
                        "still running from an earlier tick",
                        tick_time_ns,
                        kind="sampler_overrun",
                    )
                )
                continue
            future = self._pool.submit(_run_one, sampler, tick_time_ns, self.clock)
            self._busy[i] = future
            started.append((i, future))
        cf.wait([f for _, f in started], timeout=self.timeout_s)
        for i, future in started:
            name = self.samplers[i].name
            if not future.done():
                message = f"no result after {self.timeout_s:g} s"
                points.append(self._failed(name, message, tick_time_ns, kind="sampler_timeout"))
                continue
            got, duration_s, error = future.result()
            self.last_durations_s[name] = duration_s
            if self.metrics is not None:
                self.metrics.observe_sampler(name, duration_s, error is None)
            if error is not None:
                message = f"{type(error).__name__}: {error}"
                points.append(self._failed(name, message, tick_time_ns, count_metric=False))
            points.extend(got)
        tagged = [p.with_tags(self.run_tags) for p in points]
        self._observe_load(tagged)
        return tagged

    def _failed(
        self,
        name: str,
        message: str,
        tick_time_ns: int,
        *,
        kind: str = "sampler_error",
        count_metric: bool = True,
    ) -> Point:
        self.errors[name] = self.errors.get(name, 0) + 1
        if count_metric and self.metrics is not None:
            self.metrics.sampler_errors.labels(name).inc()
        p = event_point(kind, f"{name}: {message}", tick_time_ns, self.errors[name])
        return p.with_tags({"sampler": name})

    def _observe_load(self, points: list[Point]) -> None:
        if self.metrics is None:
            return
        soak = self.run_tags.get("soak", "")
        for p in points:
            if p.measurement != "load":
                continue
            target, achieved = p.fields.get("rate_target"), p.fields.get("rate_achieved")
            if not (isinstance(target, int | float) and isinstance(achieved, int | float)):
                continue
            cls = p.tags.get("class", "all")
            if math.isfinite(target) and math.isfinite(achieved):
                self.metrics.set_load_rate(soak, cls, target, achieved)
            sent, lost = p.fields.get("sent"), p.fields.get("lost")
            if isinstance(sent, int | float) and isinstance(lost, int | float):
                self.metrics.count_load(soak, cls, sent, lost)

    def close(self) -> None:
        """Waits for no sampler still running (one stuck in I/O must not hang shutdown)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
