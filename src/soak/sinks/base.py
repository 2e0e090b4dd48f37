"""The one interface every sink implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from soak.errors import SinkError
from soak.points import Point


class Sink(Protocol):
    name: str

    def write(self, points: Sequence[Point]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class SinkWriteError(SinkError):
    """A write that was not (wholly) accepted.

    `accepted`: how many of the points, from the start, the sink did take (a
    batched write can fail after earlier batches went through), so the caller
    spools only the rest. `rejected`: the server understood the request and
    refused the data (HTTP 400): retrying would never succeed.
    """

    def __init__(self, message: str, *, accepted: int = 0, rejected: bool = False) -> None:
        super().__init__(message)
        self.accepted = accepted
        self.rejected = rejected
