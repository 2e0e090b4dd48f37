"""What the service lends every run: state, where files go, its own metrics, its hooks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from soak.runs.ending import EndHook
from soak.runs.layout import DataDir
from soak.runs.listening import Listen, unheard
from soak.runs.state import StateStore
from soak.sinks.metrics import ServiceMetrics


def _nothing(run_id: str) -> None:
    return None


@dataclass
class RunContext:
    """`on_end` judges a run whose parts have stopped and returns its outcome (the
    manager registers `results.judge.judge_and_report`); `listen` gives each run the
    listener of its leak passes (the manager registers `results.alerts.LeakAlerts`);
    `on_finished` is told once a run has ended, whatever way."""

    state: StateStore
    data_dir: DataDir
    metrics: ServiceMetrics
    on_end: EndHook
    on_finished: Callable[[str], None] = _nothing
    listen: Listen = unheard
