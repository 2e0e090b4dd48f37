"""The compiled stream replays write what a play step hands a connection at once: a
client's burst (queries due at the same instant) leaves in one write and every query of
it is answered. Over DoH (soak.load.replay._fastreplay_doh) by unbound and by
knot-resolver (which refuses a request whose HEADERS come while another's body is still
due); over DoT and TCP (soak.load.replay._fastreplay_stream: one SSL_write, one send) by
unbound, the socket's count of the queries it took whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.load.replay import Replay, _engine, _stream
from soak.traffic.capture_file import TCP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.integration.test_replay_compiled import NAMES
from tests.support.servers import ServerProc

pytestmark = pytest.mark.integration

BURST = 40
# Writes allowed, by transport. DoH: the first query with the connection's preface and
# SETTINGS, the ack of the server's SETTINGS, a WINDOW_UPDATE or two, and the burst's one.
# DoT and TCP: the first query's and the burst's (a full socket could split a write in
# two; 1.6 KB on loopback does not fill it). A request at a time would be BURST more.
MAX_WRITES = {"doh": 6, "dot": 3, "tcp": 3}


def burst_capture() -> Capture:
    """One client: a query at 0 (its connection opens), then BURST queries due together
    at 0.5 s, on the connection by then up."""
    due_ns = [0] + [500_000_000] * BURST
    qs = [
        Query(t, 0, 0, 0x0100, NAMES[k % 3][1], TCP, NAMES[k % 3][0]) for k, t in enumerate(due_ns)
    ]
    return Capture("t", ["10.0.0.1"], qs)


@pytest.mark.parametrize(
    ("transport", "server"),
    [("doh", "tls_unbound"), ("doh", "tls_kresd"), ("dot", "tls_unbound"), ("tcp", "tls_unbound")],
)
def test_a_clients_burst_leaves_in_one_write_and_is_answered(
    transport: str, server: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc: ServerProc = request.getfixturevalue(server)
    engines: list[Any] = []

    class Kept(_stream.StreamEngine):  # the compiled engine kept for its writes()
        def __init__(self, replay: Replay, address: bytes) -> None:
            super().__init__(replay, address)
            engines.append(self.engine)

    monkeypatch.setattr(_engine, "StreamEngine", Kept)
    monkeypatch.setenv(_engine.ENV, "compiled")
    cfg = ReplayConfig(file=Path("unused"), loops=1, transport=transport)  # type: ignore[arg-type]
    replay = Replay(cfg, burst_capture(), "127.0.0.1", proc.port_for(transport), 2.0)
    assert _engine.python_reason(replay) is None
    d = replay.run(None).as_dict()
    assert (d["sent"], d["completed"], d["lost"]) == (BURST + 1, BURST + 1, 0), d
    if transport != "doh":
        stats = engines[0].stats()
        assert (stats[8], stats[9]) == (BURST + 1, 0), stats  # taken whole by the socket, failed
    assert 1 <= engines[0].writes() <= MAX_WRITES[transport], engines[0].writes()
