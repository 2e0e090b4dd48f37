"""A bench, as a plan: what happens when.

Every side's targets started through the engine (runs.live_targets.LiveGroup: helpers,
then the target, ready), the loop run over the sides in turns (bench.loop: per class a
fresh target, the warm pass, the throwaway run, the measured runs, the knee and the
fixed rates), each side's result assembled with what it ran on, and every side stopped
whatever happened (each side is on the plan's teardown from its start: soak.plans.engine).
The run id is the engine's (soak.runs.runid), each side's `<id>-<label>` when there are two.

BenchPlan is the registered plan `bench`: the results handed to the command's `report`
(written, printed, compared), which names the failed criteria: any is exit 1.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from soak.bench.loop import Bench
from soak.bench.record import assemble
from soak.bench.side import Side
from soak.config.bench import BenchConfig
from soak.config.scenario import Scenario
from soak.errors import CheckFailed, SoakError
from soak.plans.engine import Teardown
from soak.runs.live_targets import LiveGroup
from soak.runs.runid import new_run_id

log = logging.getLogger(__name__)


def bench_id(scenario: Scenario) -> str:
    return new_run_id(f"bench-{scenario.name}")


def side_id(run_id: str, label: str, two: bool) -> str:
    return f"{run_id}-{label}" if two else run_id


def new_side(label: str, scenario: Scenario, run_id: str) -> Side:
    """A side named; its targets are the engine's, nothing started yet."""

    def on_event(kind: str, message: str, value: float) -> None:
        if kind == "error":  # a part that would not stop, volumes left: said, not fatal
            log.warning("%s: %s", label, message)

    targets = LiveGroup(scenario, label=label, run_id=run_id, on_event=on_event)
    return Side(label, scenario, run_id, targets)


# The results by side label -> the failed criteria (`name (label)`): the command's.
Report = Callable[[dict[str, dict[str, Any]]], list[str]]


class BenchPlan:
    stopped_note = "its targets were stopped"

    def __init__(
        self,
        sides: list[Side],
        cfg: BenchConfig,
        engine: str,
        run_id: str,
        host: dict[str, Any],
        started_s: float,
        echo: Callable[[str], None],
        report: Report,
    ) -> None:
        self.sides, self.cfg, self.engine, self.run_id = sides, cfg, engine, run_id
        self.host, self.started_s, self.echo, self.report = host, started_s, echo, report
        self.failed: list[str] = []

    def check(self) -> None:
        """Nothing more: the command checked the scenarios and classes (exit 2)."""

    def run(self, started: Teardown) -> None:
        results = run_bench(
            self.sides, self.cfg, self.engine, self.run_id, self.host, self.started_s, self.echo,
            started,
        )  # fmt: skip
        self.failed = self.report(results)

    def outcome(self) -> SoakError | None:
        return CheckFailed(f"bench failed: {', '.join(self.failed)}") if self.failed else None


def run_bench(
    sides: list[Side],
    cfg: BenchConfig,
    engine: str,
    run_id: str,
    host: dict[str, Any],
    started_s: float,
    echo: Callable[[str], None],
    started: Teardown,
) -> dict[str, dict[str, Any]]:
    """Each side's result (the bench.json dict), by its label, assembled while its
    target still runs (its CPUs, its fd limit); every side then stopped, and by
    `started` whatever ends the run early."""
    two = len(sides) > 1
    for side in sides:
        started.push(f"bench side {side.label}", side.targets.stop)
        side.targets.start()
    rows = Bench(sides, cfg, engine, echo).run()
    results = {
        side.label: assemble(
            side_id(run_id, side.label, two), side, cfg, engine, rows[side.label], host,
            started_s,
        )
        for side in sides
    }  # fmt: skip
    for side in sides:
        started.stop(f"bench side {side.label}")
    return results
