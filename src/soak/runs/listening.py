"""What a run tells the layers above it while it goes: each pass of its leak analysis.

The run does not know who listens (its leak alerts live in soak.results.alerts):
whoever builds its RunContext registers a `Listen`, as it registers the end hook
(runs.ending). The run calls it once it has its parts, for a listener of its own; the
listener hears every leak pass, says what it did as `event` points (an alert sent, a
receiver that failed), and is closed when the run's parts stop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from soak.analysis.leaks import LeakVerdict
from soak.analysis.rundata import StoreReader
from soak.config import Scenario
from soak.points import Point


@dataclass(frozen=True)
class RunFacts:
    """The run a listener follows."""

    run_id: str
    scenario: Scenario
    run_dir: Path
    run_tags: dict[str, str]


@dataclass(frozen=True)
class LeakPass:
    """One pass of the run's leak analysis: its verdicts over the samples since
    `since_ns` (the warm-up's end), read from `store`."""

    verdicts: list[LeakVerdict]
    store: StoreReader
    since_ns: int


class RunListener(Protocol):
    def heard(self, leak_pass: LeakPass) -> list[Point]:
        """The `event` points of what it did on hearing a pass."""
        ...

    def close(self) -> None: ...


class Unheard:
    """The listener of a run nobody listens to."""

    def heard(self, leak_pass: LeakPass) -> list[Point]:
        return []

    def close(self) -> None:
        return None


Listen = Callable[[RunFacts], RunListener]


def unheard(run: RunFacts) -> RunListener:
    return Unheard()
