"""Which version of a soak's target runs now, after the swaps (and rollbacks) its
`upgrade:` section has made (swaps.json in the run directory, soak.upgrade.inswap writes
it): what a resumed run re-attaches to and restarts, and what reaps it. Before any swap:
the scenario's target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soak.config import Scenario
from soak.config.upgrade import swap_versions
from soak.runs.layout import read_swaps
from soak.targets.specs import TargetConfig

# A swap whose new version was started: it runs now, whether its checks passed, failed,
# or never ran (a service stopped during the swap).
STARTED = ("pass", "failed", "interrupted", "running")


def move_key(record: dict[str, Any]) -> tuple[int, bool]:
    """A swaps.json record's place in the run: swap i, then its rollback, then swap i+1."""
    return int(record["index"]), bool(record.get("rollback"))


def segment_now(run_dir: Path) -> int:
    """The index of the run's version segment now: one more for each swap or rollback
    begun (its record in swaps.json), as the report splits a run into segments."""
    return len(read_swaps(run_dir))


def target_now(scenario: Scenario, run_dir: Path) -> TargetConfig:
    """The target's config as the run's swaps and rollbacks have left it."""
    if scenario.upgrade is None:
        return scenario.target
    made = [s for s in read_swaps(run_dir) if s.get("status") in STARTED and "ready_s" in s]
    if not made:
        return scenario.target
    index, rollback = max(move_key(s) for s in made)
    versions = swap_versions(scenario.upgrade, scenario.target)[index]
    return versions.before if rollback else versions.after
