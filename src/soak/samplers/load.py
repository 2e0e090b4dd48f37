"""The `load` sampler: the load engine's stats of the last interval, per class and in total.

Where load agents run, the same seconds also go out per agent as `load` points
with the tag `agent` (soak.names.AGENT_TAG): the store and the dashboards leave
those out of every read of the run's total, so an agent's part is never added to
the total it is already in.
"""

from __future__ import annotations

from typing import Protocol

from soak.names import AGENT_TAG
from soak.points import FieldValue, Point


class LoadSource(Protocol):
    def take_window(self) -> dict[str, dict[str, float]]:
        """Stats since the last call: class name (or "all") -> field -> value."""
        ...

    def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]:
        """Each agent's part of the last window (empty without agents)."""
        ...


def window_points(
    measurement: str, window: dict[str, dict[str, float]], time_ns: int, tags: dict[str, str]
) -> list[Point]:
    points = []
    for cls, stats in sorted(window.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        fields: dict[str, FieldValue] = {k: float(v) for k, v in stats.items()}
        if fields:
            points.append(Point(measurement, fields, time_ns, {**tags, "class": cls}))
    return points


class LoadSampler:
    name = "load"

    def __init__(self, source: LoadSource) -> None:
        self.source = source

    def sample(self, tick_time_ns: int) -> list[Point]:
        points = window_points("load", self.source.take_window(), tick_time_ns, {})
        for agent, window in sorted(self.source.take_agent_windows().items()):
            points += window_points("load", window, tick_time_ns, {AGENT_TAG: str(agent)})
        return points
