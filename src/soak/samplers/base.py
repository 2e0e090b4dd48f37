"""The one interface every sampler implements."""

from __future__ import annotations

from typing import Protocol

from soak.points import Point


class Sampler(Protocol):
    name: str

    def sample(self, tick_time_ns: int) -> list[Point]:
        """Points stamped with `tick_time_ns`, the tick's scheduled time."""
        ...
