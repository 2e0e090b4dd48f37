"""The compiled TCP/DoT replay (soak.load.replay._fastreplay_stream) writes what a play
step hands a connection at once: a client's burst (queries due at the same instant)
leaves in one write (one SSL_write over DoT, one send over TCP), and every query of it
is answered by unbound; the socket's count of the queries it took stays whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.load.replay import Replay, _engine, _stream
from soak.traffic.replay_config import ReplayConfig
from tests.integration.test_replay_doh_batch import BURST, burst_capture
from tests.support.servers import ServerProc

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("transport", ["dot", "tcp"])
def test_a_clients_burst_over_a_stream_leaves_in_one_write_and_is_answered(
    transport: str, tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines: list[Any] = []

    class Kept(_stream.StreamEngine):  # the compiled engine kept for its writes()
        def __init__(self, replay: Replay, address: bytes) -> None:
            super().__init__(replay, address)
            engines.append(self.engine)

    monkeypatch.setattr(_engine, "StreamEngine", Kept)
    monkeypatch.setenv(_engine.ENV, "compiled")
    cfg = ReplayConfig(file=Path("unused"), loops=1, transport=transport)  # type: ignore[arg-type]
    replay = Replay(cfg, burst_capture(), "127.0.0.1", tls_unbound.port_for(transport), 2.0)
    assert _engine.python_reason(replay) is None
    d = replay.run(None).as_dict()
    assert (d["sent"], d["completed"], d["lost"]) == (BURST + 1, BURST + 1, 0), d
    stats = engines[0].stats()
    assert (stats[8], stats[9]) == (BURST + 1, 0), stats  # taken whole by the socket, failed
    # The first query's write, and the burst's one (a query at a time: BURST of them).
    # A full socket could split a write in two; 1.6 KB on loopback does not fill it.
    assert 1 <= engines[0].writes() <= 3, engines[0].writes()
