"""The `load` sampler: the load engine's stats of the last interval, per class and in total
(and, where load agents run, per agent: soak.load.supervised.load_points).
"""

from __future__ import annotations

from typing import Protocol

from soak.load.supervised import load_points
from soak.points import Point


class LoadSource(Protocol):
    def take_window(self) -> dict[str, dict[str, float]]:
        """Stats since the last call: class name (or "all") -> field -> value."""
        ...

    def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]:
        """Each agent's part of the last window (empty without agents)."""
        ...


class LoadSampler:
    name = "load"

    def __init__(self, source: LoadSource) -> None:
        self.source = source

    def sample(self, tick_time_ns: int) -> list[Point]:
        return load_points(
            self.source.take_window(), self.source.take_agent_windows(), tick_time_ns
        )
