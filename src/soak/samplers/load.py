"""The `load` sampler: the load engine's closed windows, per class and in total (and, where
load agents run, per agent: soak.load.supervised.load_points).
"""

from __future__ import annotations

from typing import Protocol

from soak.points import Point


class LoadSource(Protocol):
    def take_points(self, time_ns: int) -> list[Point]:
        """The `load` points of the windows closed since the last call."""
        ...


class LoadSampler:
    name = "load"
    # Its points are the run's ledger (closed windows taken out of the engine, each
    # stamped with its own second): a result after the tick's deadline is written with
    # the next tick, never dropped (soak.samplers.tick).
    keep_late = True

    def __init__(self, source: LoadSource) -> None:
        self.source = source

    def sample(self, tick_time_ns: int) -> list[Point]:
        return self.source.take_points(tick_time_ns)
