"""The replay's connection set-up times: a bounded histogram however long the replay."""

from __future__ import annotations

from pathlib import Path

from soak.load.replay import ClientConns
from soak.traffic.replay_config import ReplayConfig


def conns() -> ClientConns:
    cfg = ReplayConfig(file=Path("unused"), transport="tcp")
    return ClientConns(cfg, 1, ("127.0.0.1", 53), None, abandon=print, waiting=bool)


def test_handshakes_fold_to_three_digits_and_empty_the_book() -> None:
    c = conns()
    c.book.handshake_us.update({37: 2, 1234: 1, 1239: 1, 250_417: 1})
    c.fold_handshakes()
    assert c.book.handshake_us == {}
    assert c.handshake.counts == {37: 2, 1230: 2, 250_000: 1}
    # Tail values a µs apart share a key: a day of them adds no key per µs.
    c.book.handshake_us.update({us: 1 for us in range(1_000_000, 1_010_000)})
    c.fold_handshakes()
    assert len(c.handshake.counts) == 4 and c.handshake.counts[1_000_000] == 10_000
    assert c.handshake.quantiles()["max"] == 1_000_000
    c.shut()
