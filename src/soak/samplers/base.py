"""The one interface every sampler implements, and the base of those that read one target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from soak.points import Point
from soak.targets.base import Running

TargetFn = Callable[[], Running | None]
"""The current Running at each tick, or None while the target is not running."""

CfgT = TypeVar("CfgT")
ItemT = TypeVar("ItemT")


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


class ItemsSampler(Generic[ItemT]):
    """A sampler that asks the running target once per item (an API call, a DNS probe):
    the points of every item, nothing while the target is not running."""

    name: str
    items: list[ItemT]
    target: TargetFn

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        if running is None:
            return []
        points: list[Point] = []
        for item in self.items:
            points += self.ask(running, item, tick_time_ns)
        return points

    def ask(self, running: Running, item: ItemT, tick_time_ns: int) -> list[Point]:
        raise NotImplementedError
