"""What one upgrade run gave: its steps as shown, its checks, and its exit code."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from soak.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERNAL, EXIT_OK
from soak.points import Point
from soak.runs.events import EventRecord
from soak.upgrade.checklist import CheckResult
from soak.upgrade.config import ApiStep, CommandStep, DnsStep, PopulateStep
from soak.upgrade.identity import Identity
from soak.upgrade.swap import SwapStats


@dataclass
class StepRecord:
    phase: str
    text: str
    ok: bool = True
    duration_ms: float = 0.0
    start_s: float = 0.0  # when the step began, from the start of the run


@dataclass
class UpgradeResult:
    plan: str
    run_id: str
    run_dir: Path
    keep: bool
    started_at: str
    duration_s: float = 0.0
    old_ready_s: float | None = None
    new_ready_s: float | None = None
    rollback_ready_s: float | None = None
    checks: list[CheckResult] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    # Each step as the run engine records every run's events (runs.events), and their
    # `event` points for the plan's sinks (written at the end with the checks').
    events: list[EventRecord] = field(default_factory=list)
    event_points: list[Point] = field(default_factory=list)
    # The plan could not run (a bad plan, a missing image or binary, the old version
    # failing on its own data): exit 2. The new version failing on the old data is a
    # failed check instead (exit 1).
    start_error: str | None = None
    swap: SwapStats | None = None  # what the plan's `load:` saw through the swap
    interrupted: str | None = None  # the signal that stopped the run (SIGINT, SIGTERM)
    interrupted_where: str = ""  # `during PHASE: STEP was under way; ...`, for its line
    internal_error: str | None = None  # a fault of soak or the engine (exit 3)
    logs_dir: Path | None = None  # a failed run's logs, kept (upgrade.artefacts)
    versions: dict[str, Identity] = field(default_factory=dict)  # by side, as started

    def count(self, status: str) -> int:
        return sum(1 for c in self.checks if c.status == status)

    @property
    def exit_code(self) -> int:
        if self.interrupted is not None:  # as a shell reports it: 128 + the signal
            return 128 + signal.Signals[self.interrupted].value
        if self.internal_error is not None:
            return EXIT_INTERNAL
        if self.start_error is not None:
            return EXIT_BAD_INPUT
        return EXIT_OK if self.checks and self.count("pass") == len(self.checks) else EXIT_FAILED


def run_tags(plan: str, run_id: str, target: str, version: str) -> dict[str, str]:
    """The tags of an upgrade's points (docs/architecture.md "Time series")."""
    return {"soak": run_id, "scenario": plan, "target": target, "version": version, "plan": plan}


def describe_step(step: PopulateStep) -> str:
    if isinstance(step, ApiStep):
        return f"api {step.method.upper()} {step.path}"
    if isinstance(step, DnsStep):
        return f"dns {step.file or f'{len(step.queries)} queries'}"
    if isinstance(step, CommandStep):
        return "command " + " ".join(step.argv)
    return f"wait {step.probe.kind} probe"
