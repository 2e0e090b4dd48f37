"""The one interface every sink implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from soak.points import Point


class Sink(Protocol):
    name: str

    def write(self, points: Sequence[Point]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
