"""The runs of one service (or one foreground command): submit, start, stop, resume, look up.

The manager owns the state store, the scheduler and the service's metrics
registry, and the live Run objects. The HTTP API and the foreground command
both drive it; neither holds a Run of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from soak.config import Scenario
from soak.errors import InputError, SoakError
from soak.service.reserve import make_reserve
from soak.service.run import Run, RunContext, owner_alive, points_path
from soak.service.scheduler import SoakScheduler
from soak.service.state import ACTIVE, RunRecord, StateStore, new_run_id
from soak.service.status import run_status
from soak.sinks.metrics import ServiceMetrics

log = logging.getLogger(__name__)


class UnknownRun(InputError):
    """No run with that id."""


class RunManager:
    def __init__(self, data_dir: Path, *, registry: CollectorRegistry | None = None) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = ServiceMetrics(self.registry)
        self.state = StateStore(data_dir / "state.db")
        self.scheduler = SoakScheduler()
        self.ctx = RunContext(self.state, data_dir, self.metrics, on_finished=self._finished)
        self.runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- lifecycle

    def start(self, *, resume: bool = True) -> list[str]:
        """Start the scheduler; resume the runs a previous service left running."""
        make_reserve(self.ctx.data_dir)  # space to record a run's end if the disk fills
        self.scheduler.start()
        self.reap_abandoned()
        return self.resume_all() if resume else []

    def reap_abandoned(self) -> list[str]:
        """Foreground runs whose command died (SIGKILL): their targets are stopped."""
        reaped = []
        for record in self.state.list_runs(ACTIVE):
            if record.foreground and not owner_alive(record.target_state):
                Run(record, self.ctx).reap("the foreground command that ran it is gone")
                reaped.append(record.id)
        return reaped

    def shutdown(self, *, stop_runs: bool = False) -> None:
        """Service exit: runs are detached (targets keep running) unless `stop_runs`."""
        for run in list(self.runs.values()):
            if stop_runs:
                run.finish("stopped")
            else:
                run.detach()
        self.scheduler.shutdown()
        self.state.close()

    def resume_all(self) -> list[str]:
        resumed = []
        for record in self.state.list_runs(("running",)):
            if record.foreground:
                continue  # its own process owns it; `soak start --foreground` does not resume
            run = Run(record, self.ctx)
            try:
                run.resume()
            except SoakError as exc:
                log.warning("run %s could not be resumed: %s", record.id, exc)
                continue
            self._adopt(run)  # an end already past runs at once (date job, no grace limit)
            resumed.append(run.id)
        # A run still `pending` never got its target ready: it cannot be resumed.
        for record in self.state.list_runs(("pending",)):
            if not record.foreground:
                self.state.update_run(
                    record.id, status="error", message="service stopped while starting"
                )
        return resumed

    # ---------------------------------------------------------------- runs

    def create(self, scenario: Scenario, *, foreground: bool = False) -> Run:
        run_id = new_run_id(scenario.name)
        run_dir = self.data_dir / "runs" / run_id
        record = self.state.create_run(run_id, scenario, run_dir, foreground=foreground)
        return Run(record, self.ctx)

    def launch(self, run: Run) -> None:
        """Start the run's parts now (blocking) and schedule its jobs; raise if it cannot start."""
        with self._lock:
            self.runs[run.id] = run
        try:
            run.start()
        except BaseException:
            with self._lock:
                self.runs.pop(run.id, None)
            raise
        self._adopt(run)

    def submit(self, scenario: Scenario) -> RunRecord:
        """The API's POST /runs: the record now, the start in a scheduler thread."""
        run = self.create(scenario)
        with self._lock:
            self.runs[run.id] = run

        def start() -> None:
            try:
                self.launch(run)
            except BaseException as exc:  # recorded by the run as its `error` status
                log.warning("run %s did not start: %s", run.id, exc)

        self.scheduler.run_soon(run.id, "start", start)
        return run.record

    def _adopt(self, run: Run) -> None:
        with self._lock:
            self.runs[run.id] = run
        self.scheduler.add_run(run, time.time_ns())

    def _finished(self, run_id: str) -> None:
        """A run has ended: its jobs go; its record, events and files stay."""
        self.scheduler.remove_run(run_id)
        with self._lock:
            self.runs.pop(run_id, None)  # a service that runs for months holds no old runs

    def stop(self, run_id: str) -> RunRecord:
        record = self.get_record(run_id)
        run = self.runs.get(run_id)
        if run is None or not record.active:
            return record
        self.scheduler.run_soon(run_id, "stop", lambda: run.finish("stopped"))
        return record

    def get_record(self, run_id: str) -> RunRecord:
        record = self.state.get_run(run_id)
        if record is None:
            raise UnknownRun(f"no run {run_id!r}")
        return record

    def status(self, run_id: str) -> dict[str, Any]:
        record = self.get_record(run_id)
        points_db = points_path(record.scenario, self.data_dir, record.run_dir)
        return run_status(record, self.runs.get(run_id), self.state, points_db=points_db)

    def list_status(self) -> list[dict[str, Any]]:
        return [
            run_status(r, self.runs.get(r.id), self.state, brief=True)
            for r in self.state.list_runs()
        ]

    def active_ids(self) -> list[str]:
        return [r.id for r in self.state.list_runs(ACTIVE)]
