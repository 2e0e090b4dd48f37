"""The `load` sampler: the load engine's stats of the last interval, per class and in total."""

from __future__ import annotations

from typing import Protocol

from soak.points import FieldValue, Point


class LoadSource(Protocol):
    def take_window(self) -> dict[str, dict[str, float]]:
        """Stats since the last call: class name (or "all") -> field -> value."""
        ...


class LoadSampler:
    name = "load"

    def __init__(self, source: LoadSource) -> None:
        self.source = source

    def sample(self, tick_time_ns: int) -> list[Point]:
        window = self.source.take_window()
        points = []
        for cls, stats in sorted(window.items(), key=lambda kv: (kv[0] != "all", kv[0])):
            fields: dict[str, FieldValue] = {k: float(v) for k, v in stats.items()}
            if fields:
                points.append(Point("load", fields, tick_time_ns, {"class": cls}))
        return points
