"""The `target` sampler: one `event` point per tick while the target is not running.

The other samplers return nothing while target() is None, so the gap in their
series is explained once per tick here instead of once per sampler.
"""

from __future__ import annotations

from collections.abc import Callable

from soak.points import Point, event_point
from soak.targets.base import Running


class TargetSampler:
    name = "target"

    def __init__(self, target: Callable[[], Running | None]) -> None:
        self.target = target

    def sample(self, tick_time_ns: int) -> list[Point]:
        if self.target() is not None:
            return []
        return [event_point("target_not_running", "the target is not running", tick_time_ns)]
