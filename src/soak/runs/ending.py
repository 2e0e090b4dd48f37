"""How a run ends: why (an explicit enum and a message), what it leaves for judging, and
the hook that judges it.

The run does not know who judges it or writes its reports: whoever builds its
RunContext registers an `EndHook` (the manager registers `results.judge.judge_and_report`),
as Locust's stats listen to `test_stop`. The hook gets a `RunEnd`, the run's facts at
its end, and returns the run's `Outcome`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from soak.analysis.leaks import LeakVerdict
from soak.config import Scenario
from soak.runs.state import RunStatus, StateStore


class Ending(Enum):
    """Why a run ends. Only a completed run is judged by its criteria; the others end
    with the status of their name."""

    COMPLETED = "completed"  # its timeline ran out
    STOPPED = "stopped"  # a stop request (API, Ctrl-C)
    FAILED = "failed"  # the target exited and is not to be restarted
    ERROR = "error"  # a fault: a restart that failed, the data directory full, ...

    @property
    def status(self) -> RunStatus | None:
        """The final status this ending gives without judging; None for COMPLETED."""
        return None if self is Ending.COMPLETED else RunStatus(self.value)


@dataclass
class Outcome:
    status: RunStatus  # one of the final statuses
    message: str
    criteria: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RunEnd:
    """A run's facts once its parts have stopped and its points are flushed."""

    run_id: str
    scenario: Scenario
    run_dir: Path
    points_path: Path
    origin_ns: int
    warmup_end_ns: int
    ended_ns: int
    ending: Ending
    message: str
    verdicts: list[LeakVerdict]
    restarts: int
    load_totals: dict[str, Any]
    state: StateStore
    event: Callable[[str, str, float], None]  # kind, message, value: into the run's events
    lost_agents: list[str] = field(default_factory=list)  # load agents lost, as their events say
    capture: dict[str, Any] | None = None  # `capture:`: the file written and its figures


EndHook = Callable[[RunEnd], Outcome]
