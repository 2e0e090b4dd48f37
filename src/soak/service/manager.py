"""The runs of one service (or one foreground command): submit, start, stop, resume, look up.

The manager owns the state store, the scheduler and the service's metrics
registry, and the live Run objects; each run is driven by its soak plan
(`plans.soak`), whose steps the scheduler times. The HTTP API and the foreground command
both drive it; neither holds a Run of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from soak.config import Scenario
from soak.errors import InputError, SoakError
from soak.plans.soak import SoakPlan
from soak.results.alerts import LeakAlerts
from soak.results.judge import judge_and_report
from soak.results.status import run_status
from soak.runs.context import RunContext
from soak.runs.layout import DataDir
from soak.runs.leftovers import sweep_leftovers
from soak.runs.live import LiveFigures
from soak.runs.owed import OwedSpools
from soak.runs.reap import reap
from soak.runs.reserve import make_reserve
from soak.runs.run import Run
from soak.runs.runid import new_run_id
from soak.runs.state import ACTIVE, RunRecord, RunStatus, StateStore
from soak.runs.supervise import ABANDONED_WHY, owner_alive
from soak.service.scheduler import SoakScheduler
from soak.sinks.metrics import ServiceMetrics

log = logging.getLogger(__name__)


class UnknownRun(InputError):
    """No run with that id."""


# How often the owed spools of ended runs are looked at (a spool waits at most this
# long past its scenario's `spool.retry_interval_s`), cheap when nothing is owed.
OWED_CHECK_INTERVAL_S = 5.0


class RunManager:
    def __init__(self, data_dir: Path, *, registry: CollectorRegistry | None = None) -> None:
        self.data_dir = DataDir(data_dir).create()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = ServiceMetrics(self.registry)
        self.state = StateStore(self.data_dir.state_db)
        self.scheduler = SoakScheduler()
        # A run's end (criteria, result, reports) is this hook's, not the run's.
        self.ctx = RunContext(
            self.state,
            self.data_dir,
            self.metrics,
            on_end=judge_and_report,
            on_finished=self._finished,
            listen=LeakAlerts,
        )
        self.owed = OwedSpools(self.state, self.data_dir, self.metrics)
        self.runs: dict[str, Run] = {}
        self._lock = threading.Lock()
        # What start() removed (one line) and what it left (one line each).
        self.leftovers: list[str] = []

    # ---------------------------------------------------------------- lifecycle

    def start(self, *, resume: bool = True) -> list[str]:
        """Start the scheduler; resume the runs a previous service left running."""
        make_reserve(self.data_dir)  # space to record a run's end if the disk fills
        self.scheduler.start()
        self.reap_abandoned()
        self.leftovers = self.sweep(resuming=resume)
        # What ended runs' sinks still owe: replayed until taken, by whoever holds the
        # data directory (this service, or a foreground command).
        self.scheduler.every("service:owed-spools", OWED_CHECK_INTERVAL_S, self.owed.drain)
        return self.resume_all() if resume else []

    def sweep(self, *, resuming: bool) -> list[str]:
        """Remove what dead runs left (processes, containers, swarm services); the lines
        that say so and name what was left. Kept: the service runs of this data directory
        that a service resumes (this one, when `resuming`, or a later one)."""
        statuses = (RunStatus.RUNNING,) if resuming else ACTIVE
        keep = [r.id for r in self.state.list_runs(statuses) if not r.foreground]
        return sweep_leftovers(self.data_dir.root, keep).lines()

    def reap_abandoned(self) -> list[str]:
        """Foreground runs whose command died (SIGKILL): their targets are stopped."""
        reaped = []
        for record in self.state.list_runs(ACTIVE):
            if record.foreground and not owner_alive(record.target_state):
                reap(record, self.ctx, ABANDONED_WHY)
                reaped.append(record.id)
        return reaped

    def shutdown(self, *, stop_runs: bool = False) -> None:
        """Service exit: runs are detached (targets keep running) unless `stop_runs`."""
        for run in list(self.runs.values()):
            if stop_runs:
                run.stop()
            else:
                run.detach()
        self.scheduler.shutdown()
        self.owed.close()  # after the scheduler: no replay is under way
        self.state.close()

    def resume_all(self) -> list[str]:
        resumed = []
        for record in self.state.list_runs((RunStatus.RUNNING,)):
            if record.foreground:
                continue  # its own process owns it; `soak start --foreground` does not resume
            plan = SoakPlan(Run(record, self.ctx))
            try:
                plan.resume()
            except SoakError as exc:
                log.warning("run %s could not be resumed: %s", record.id, exc)
                self.metrics.end_run(record.id, RunStatus.ERROR)
                continue
            self._hold(plan.run)
            self._adopt(plan)  # an end already past runs at once (date job, no grace limit)
            resumed.append(plan.id)
        # A run still `pending` never got its target ready: it cannot be resumed.
        for record in self.state.list_runs((RunStatus.PENDING,)):
            if not record.foreground:
                self.state.update_run(
                    record.id, status=RunStatus.ERROR, message="service stopped while starting"
                )
        return resumed

    # ---------------------------------------------------------------- runs

    def create(self, scenario: Scenario, *, foreground: bool = False) -> Run:
        run_id = new_run_id(scenario.name)
        run_dir = self.data_dir.run_dir(run_id)
        record = self.state.create_run(run_id, scenario, run_dir, foreground=foreground)
        run = Run(record, self.ctx)
        self._hold(run)  # known from its record on: a stop or a status finds it while it starts
        return run

    def _hold(self, run: Run) -> None:
        """The one place a run enters `self.runs` (created here, or resumed); it leaves
        when it has ended (`_finished`) or could not start (`launch`)."""
        with self._lock:
            self.runs[run.id] = run

    def launch(self, run: Run) -> None:
        """Start the run's parts now (blocking) and schedule its plan's steps; raise if it
        cannot start."""
        plan = SoakPlan(run)
        try:
            plan.start()
        except BaseException:
            with self._lock:
                self.runs.pop(run.id, None)
            self.metrics.end_run(run.id, RunStatus.ERROR)
            raise
        self._adopt(plan)

    def submit(self, scenario: Scenario) -> RunRecord:
        """The API's POST /runs: the record now, the start in a scheduler thread."""
        run = self.create(scenario)

        def start() -> None:
            for line in self.sweep(resuming=False):  # the log and the run's events say it
                log.warning("%s", line)
                run.event("cleanup", line)
            try:
                self.launch(run)
            except BaseException as exc:  # recorded by the run as its `error` status
                log.warning("run %s did not start: %s", run.id, exc)

        self.scheduler.run_soon(run.id, "start", start)
        return run.record

    def _adopt(self, plan: SoakPlan) -> None:
        sc = plan.run.scenario
        self.metrics.start_run(plan.id, sc.name, sc.alerting.labels)
        self.scheduler.add_plan(plan, time.time_ns())

    def _finished(self, run_id: str) -> None:
        """A run has ended: its jobs and its series on /metrics go (its outcome is
        counted); its record, events and files stay."""
        self.scheduler.remove_run(run_id)
        with self._lock:
            run = self.runs.pop(run_id, None)  # a service that runs for months holds no old runs
        outcome = run.outcome if run is not None else None
        self.metrics.end_run(run_id, outcome.status if outcome is not None else RunStatus.ERROR)

    def stop(self, run_id: str) -> RunRecord:
        record = self.get_record(run_id)
        run = self.runs.get(run_id)
        if run is None or not record.active:
            return record
        self.scheduler.run_soon(run_id, "stop", run.stop)
        return record

    def get_record(self, run_id: str) -> RunRecord:
        record = self.state.get_run(run_id)
        if record is None:
            raise UnknownRun(f"no run {run_id!r}")
        return record

    def status(self, run_id: str, *, with_size: bool = False) -> dict[str, Any]:
        """`with_size`: the run's bytes in its store (results.status.stored_size)."""
        record = self.get_record(run_id)
        points_db = self.data_dir.points_path(record.scenario, record.run_dir)
        return run_status(
            record, self._live(run_id), self.state, points_db=points_db, with_size=with_size
        )

    def list_status(self) -> list[dict[str, Any]]:
        return [
            run_status(r, self._live(r.id), self.state, brief=True) for r in self.state.list_runs()
        ]

    def _live(self, run_id: str) -> Callable[[], LiveFigures] | None:
        run = self.runs.get(run_id)
        return run.live_figures if run is not None else None

    def active_ids(self) -> list[str]:
        return [r.id for r in self.state.list_runs(ACTIVE)]
