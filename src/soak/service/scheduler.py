"""The service's scheduler: it runs soak plans, each step of a plan one job.

The plan (`plans.soak`) says what happens when (its phases, ticks, leak passes and
end); this only times the steps. One APScheduler 3.x BackgroundScheduler holds the
jobs of every run. A step on a grid is an interval trigger whose start is the grid's
origin, so ticks fall on the absolute grid origin + k*interval. A late tick runs once
(coalesce, no grace limit) and the run records its lag; it is never run twice to
catch up.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from soak.clock import ns_to_s
from soak.plans.soak import Every, SoakPlan
from soak.runs.run import Run

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})

log = logging.getLogger(__name__)

JOB_DEFAULTS = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}


def _utc(time_ns: int) -> datetime:
    return datetime.fromtimestamp(ns_to_s(time_ns), tz=UTC)


class SoakScheduler:
    def __init__(self, max_threads: int = 16) -> None:
        self._sched = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_threads)},
            job_defaults=dict(JOB_DEFAULTS),
            timezone=UTC,
        )

    def start(self) -> None:
        # A skipped or late tick is the run's own `ticks_missed` event and lag metric; the
        # scheduler's warning for the same thing would only be noise on the terminal.
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        self._sched.start()

    def shutdown(self) -> None:
        if self._sched.running:
            self._sched.shutdown(wait=True)

    def add_plan(self, plan: SoakPlan, now_ns: int) -> None:
        """Jobs for the rest of a soak plan whose run has started (or resumed) at `now_ns`."""
        for step in plan.steps(now_ns):
            job = _guarded(plan.run, step.name, step.step)
            job_id = f"{plan.id}:{step.job}"
            if isinstance(step, Every):
                self._sched.add_job(
                    job,
                    "interval",
                    seconds=step.interval_s,
                    start_date=_utc(step.start_ns),
                    end_date=_utc(step.end_ns),
                    id=job_id,
                    replace_existing=True,
                )
            else:
                run_date = _utc(step.at_ns)
                self._sched.add_job(
                    job, "date", run_date=run_date, id=job_id, replace_existing=True
                )

    def run_soon(self, run_id: str, name: str, func: Callable[[], Any]) -> None:
        """A one-off job now (start, stop): the API answers without waiting for it."""
        self._sched.add_job(
            func, "date", run_date=None, id=f"{run_id}:{name}", replace_existing=True
        )

    def every(self, job_id: str, interval_s: float, func: Callable[[], Any]) -> None:
        """A job of the service's own (not a run's), every `interval_s` from now."""
        self._sched.add_job(func, "interval", seconds=interval_s, id=job_id, replace_existing=True)

    def remove_run(self, run_id: str) -> None:
        for job in self._sched.get_jobs():
            if job.id.startswith(f"{run_id}:") and not job.id.endswith((":stop", ":start")):
                job.remove()


def storage_fault(exc: BaseException) -> bool:
    """The data directory cannot take writes: disk full, quota, read-only, I/O error."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return any(w in text for w in ("full", "disk i/o", "readonly", "read-only"))
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def _guarded(run: Run, name: str, func: Callable[[], Any]) -> Callable[[], None]:
    """A job that fails is an event of its run, never a silent scheduler log line."""

    def job() -> None:
        try:
            func()
        except Exception as exc:
            if storage_fault(exc):  # nothing more can be kept: the run ends, its target stops
                run.storage_failed(name, exc)
                return
            log.exception("run %s: job %s failed", run.id, name)
            try:
                run.event("error", f"{name} job failed: {type(exc).__name__}: {exc}", 0.0)
            except Exception:
                log.exception("run %s: could not record the failure of %s", run.id, name)

    return job
