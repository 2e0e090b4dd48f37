"""The compiled stream replays' constructors (_fastreplay_stream_common.h's engine_args,
layout, replay_setup and replay_made, shared by the TCP/DoT and the DoH engine): what
they accept, and the one clear error of each bad argument."""

from __future__ import annotations

import array
from typing import Any

import pytest

from soak.load.replay import _fastreplay_doh, _fastreplay_stream
from soak.load.replay._engine import sockaddr

CLASSES = 2
MIX = ([[b"\0"]] * CLASSES, [None] * CLASSES, [None] * CLASSES, [0], 0, [0] * CLASSES, 0, 64, 0)


def ints(*values: int) -> bytes:
    return array.array("i", values).tobytes()


def make(
    transport: str,
    clients: int = 2,
    classes: int = CLASSES,
    qstream: bytes = ints(0, 1, 2, 0),
    stream_client: bytes = ints(0, 1, 1),
    engine_args: tuple[object, ...] = MIX,
) -> Any:
    """An Engine of `transport` for 127.0.0.1:53 (nothing is connected by making it)."""
    address = sockaddr("127.0.0.1", 53)
    rest = (clients, classes, 2_000_000_000, 10_000_000_000, False, qstream, stream_client)
    if transport == "doh":
        return _fastreplay_doh.Engine(
            address, (None, None), False, "/dns-query", "127.0.0.1", *rest, engine_args
        )
    return _fastreplay_stream.Engine(address, None, *rest, engine_args)


@pytest.mark.parametrize("transport", ["tcp", "doh"])
def test_a_well_made_engine_has_each_client_and_nothing_in_flight(transport: str) -> None:
    engine = make(transport)
    sent, lost, *_ = engine.stats()
    assert (sent, lost) == ([0, 0], [0, 0])
    assert engine.drain(0) == 0
    assert engine.take(1 << 40, True) == []
    engine.shut()


@pytest.mark.parametrize("transport", ["tcp", "doh"])
@pytest.mark.parametrize(
    ("bad", "error", "says"),
    [
        ({"clients": 0}, ValueError, "bad address, clients"),
        ({"classes": 3}, ValueError, "classes and engine_args disagree"),
        ({"qstream": ints(0, 3)}, ValueError, "a stream or client out of range"),
        ({"stream_client": ints(0, 2, 1)}, ValueError, "a stream or client out of range"),
        ({"engine_args": MIX[:-1]}, TypeError, "argument"),
    ],
)
def test_a_bad_argument_is_one_clear_error(
    transport: str, bad: dict[str, Any], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        make(transport, **bad)
