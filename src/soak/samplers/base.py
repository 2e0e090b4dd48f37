"""The one interface every sampler implements, and the base of those that read one target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from soak.points import Point
from soak.targets.base import Running

TargetFn = Callable[[], Running | None]
"""The current Running at each tick, or None while the target is not running."""

CfgT = TypeVar("CfgT")


class Sampler(Protocol):
    name: str

    def sample(self, tick_time_ns: int) -> list[Point]:
        """Points stamped with `tick_time_ns`, the tick's scheduled time."""
        ...


class TargetSectionSampler(Generic[CfgT]):
    """A sampler of one config section (`samplers.<name>`) that reads the current target."""

    name: str

    def __init__(self, cfg: CfgT, target: TargetFn) -> None:
        self.cfg, self.target = cfg, target
