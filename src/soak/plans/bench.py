"""A bench, as a plan: what happens when.

Every side's targets started through the engine (runs.live_targets.LiveGroup: helpers,
then the target, ready), the loop run over the sides in turns (bench.loop: per class a
fresh target, the warm pass, the throwaway run, the measured runs, the knee and the
fixed rates), each side's result assembled with what it ran on, and every side stopped
whatever happened. The run id is the engine's
(soak.runs.runid), each side's `<id>-<label>` when there are two.
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


def run_bench(
    sides: list[Side],
    cfg: BenchConfig,
    engine: str,
    run_id: str,
    host: dict[str, Any],
    started_s: float,
    echo: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """Each side's result (the bench.json dict), by its label."""
    two = len(sides) > 1
    try:
        for side in sides:
            side.targets.start()
        rows = Bench(sides, cfg, engine, echo).run()
        return {
            side.label: assemble(
                side_id(run_id, side.label, two), side, cfg, engine, rows[side.label], host,
                started_s,
            )
            for side in sides
        }  # fmt: skip
    finally:
        for side in sides:
            side.targets.stop()
