"""The `load` sampler: the load engine's stats of the last interval, per class and in total.

Where load agents run, the same seconds also go out per agent as `load_agent`
points (tags `class` and `agent`): a measurement of their own, so that a query of
`load` (the report, the criteria, every dashboard) never adds an agent's part to
the total it is already in.
"""

from __future__ import annotations

from typing import Protocol

from soak.points import FieldValue, Point

AGENT_MEASUREMENT = "load_agent"


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
            points += window_points(AGENT_MEASUREMENT, window, tick_time_ns, {"agent": str(agent)})
        return points
