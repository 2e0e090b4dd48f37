"""A DoH request held on a full connection (the server's streams all in flight) whose
query times out meanwhile is never sent: a client gives up on it, and an overloaded
server is not handed work nobody waits for (docs/replay.md). Both loops, against real
unbound with `http-max-streams: 1` and its own count of the queries it received."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.samplers.server import unbound_control
from soak.traffic.capture_file import TCP, Capture, Query
from tests.integration.test_replay_compiled import NAMES
from tests.integration.test_replay_doh_full import play
from tests.support.servers import ServerProc
from tests.support.tls import make_cert
from tests.support.unbound_counts import unbound_with_control

pytestmark = pytest.mark.integration

BURST = 600  # due together on one connection: one stream at a time, far past the timeout
TIMEOUT_S = 0.05
BURST_NS = 1_000_000_000  # after the connection's first answer (and unbound's SETTINGS)
LAST_NS = 2_500_000_000  # another client's query: the replay runs on meanwhile


@pytest.fixture(scope="module")
def one_stream_unbound(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProc, Path]]:
    tmp = tmp_path_factory.mktemp("unbound")
    with unbound_with_control(tmp, make_cert(tmp), "http-max-streams: 1") as s:
        yield s


def https_queries(sock: Path) -> int:
    """The DoH queries unbound received so far, by its own count."""
    text = unbound_control(sock, "stats_noreset", 10)
    stats = dict(line.split("=", 1) for line in text.splitlines())
    return int(stats.get("num.query.https", "0"))


def capture() -> Capture:
    www = NAMES[0][0]
    qs = [Query(0, 0, 0, 0x0100, 1, TCP, www), Query(0, 1, 0, 0x0100, 1, TCP, www)]
    qs += [
        Query(BURST_NS, 0, 0, 0x0100, NAMES[j % 4][1], TCP, NAMES[j % 4][0]) for j in range(BURST)
    ]
    qs.append(Query(LAST_NS, 1, 0, 0x0100, 1, TCP, www))
    return Capture("t", ["10.0.0.1", "10.0.0.2"], qs)


@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_a_held_request_past_its_timeout_is_not_sent(
    one_stream_unbound: tuple[ServerProc, Path], monkeypatch: pytest.MonkeyPatch, loop: str
) -> None:
    """600 queries due together meet unbound's one stream with a 50-ms timeout: those
    still held at their timeout never leave (send_failed, each lost at its timeout), and
    unbound receives exactly what the replay's sockets took. Before, every held request
    was sent once a stream freed, long after its timeout (the run goes on for another
    client): send_failed 0, and unbound worked for hundreds of answers nobody waited
    for."""
    server, sock = one_stream_unbound
    before = https_queries(sock)
    result, _ = play(server.port_for("doh"), loop, monkeypatch, capture(), TIMEOUT_S)
    d = result.as_dict()
    ec = d["engine_counters"]
    assert d["sent"] == BURST + 3, d
    assert ec["socket_sent"] + ec["send_failed"] == d["sent"], d
    assert ec["send_failed"] > 0, d  # the burst cannot all leave within its timeout
    assert https_queries(sock) - before == ec["socket_sent"], d
    assert d["completed"] + d["lost"] == d["sent"], d
