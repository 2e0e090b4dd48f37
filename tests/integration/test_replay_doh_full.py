"""A DoH replay client whose connection is full (as many streams in flight as the server's
SETTINGS_MAX_CONCURRENT_STREAMS) stays on it: its next queries wait on that connection
for a stream to free, as an HTTP/2 client does, and the replay opens no connection the
capture does not have (docs/replay.md). Both loops, against real unbound with
`http-max-streams: 2`, to the query. And the requests a server's GOAWAY left
unprocessed are sent once on the client's next connection (tests/support/doh_goaway.py:
no server here says GOAWAY on purpose)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.load.ledger import Window
from soak.load.replay import Replay, ReplayResult, _engine
from soak.traffic.capture_file import TCP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.integration.test_replay_compiled import NAMES, assert_counters_agree, counts
from tests.support.doh_goaway import goaway_server
from tests.support.servers import ServerProc, unbound
from tests.support.tls import make_cert

pytestmark = pytest.mark.integration

MAX_STREAMS = 2
BURST = 20  # queries due together on each captured connection
# (client, captured connection number): three connections, one client with two
CONNS = [(0, 0), (0, 1), (1, 0)]
BURST_NS = 1_000_000_000  # after each connection's first answer (and the server's SETTINGS)


@pytest.fixture(scope="module")
def narrow_unbound(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    tmp = tmp_path_factory.mktemp("unbound")
    with unbound(tmp, tls=make_cert(tmp), tls_options=f"http-max-streams: {MAX_STREAMS}") as s:
        yield s


def capture() -> Capture:
    """Each captured connection: one query at the start (it opens, the server's SETTINGS
    arrive), then BURST queries due at the same moment, names in turn."""
    qs = []
    for k, (client, conn) in enumerate(CONNS):
        dues = [k * 1_000_000] + [BURST_NS] * BURST
        for j, due in enumerate(dues):
            name, qtype = NAMES[j % 4]
            qs.append(Query(due, client, conn, 0x0100, qtype, TCP, name))
    qs.sort(key=lambda q: q.offset_ns)
    return Capture("t", ["10.0.0.1", "10.0.0.2"], qs)


def play(
    port: int,
    loop: str,
    monkeypatch: pytest.MonkeyPatch,
    cap: Capture | None = None,
    timeout_s: float = 10.0,
) -> tuple[ReplayResult, list[Window]]:
    monkeypatch.setenv(_engine.ENV, loop)
    cfg = ReplayConfig(file=Path("unused"), transport="doh", idle_timeout_s=30)
    # A long timeout: a loss here must be a real one, not a slow answer on a busy machine.
    replay = Replay(cfg, cap or capture(), "127.0.0.1", port, timeout_s)
    assert (_engine.python_reason(replay) is None) == (loop == "compiled")
    windows: list[Window] = []
    replay.ledger.on_window = windows.append
    return replay.run(None), windows


def test_a_full_doh_connection_keeps_its_queries_in_both_loops(
    narrow_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each connection's 20 queries due together meet unbound's 2 streams at once: 18 wait
    on the connection and leave as streams free. Every query answered, one connection per
    captured connection (3), none refused, in both loops, window for window. Before, the
    third query of a burst retired its connection and opened another: 6 connections in
    the compiled loop, and in the Python loop the new connection's requests, sent before
    unbound's SETTINGS came, were refused and lost."""
    port = narrow_unbound.port_for("doh")
    total = len(CONNS) * (1 + BURST)
    runs = {loop: play(port, loop, monkeypatch) for loop in ("python", "compiled")}
    (py, py_windows), (fast, fast_windows) = runs["python"], runs["compiled"]
    for result in (py, fast):
        d = result.as_dict()
        assert (d["sent"], d["completed"], d["lost"]) == (total, total, 0), d
        conns = d["connections"]
        assert (conns["opened"], conns["errors"]) == (len(CONNS), 0), conns
        assert conns["reused"] == total - len(CONNS), conns
        assert (conns["streams_reset"], conns["goaways"]) == (0, 0), conns
        assert_counters_agree(result)
    assert counts(fast_windows) == counts(py_windows)
    assert [(r.sent_per_client, r.lost_per_client) for r in (py, fast)] == [
        ([2 * (1 + BURST), 1 + BURST], [0, 0])
    ] * 2


@pytest.mark.parametrize(("due", "answered"), [(8, 8), (10, 8)])
def test_requests_a_goaway_left_unprocessed_go_once_on_the_next_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, due: int, answered: int
) -> None:
    """A server that answers 4 requests a connection, then says GOAWAY (its last stream
    the 4th): of `due` queries due together on one captured connection, the ones above
    that stream go once on the client's next connection. 8: all answered over 2
    connections, 4 retried. 10: 6 retried, the second connection answers 4 and goes
    away too, and the 2 above its last stream, moved once already, are lost. The same in
    both loops, window for window. Before, the requests above the last stream were lost."""
    www = NAMES[0][0]
    cap = Capture("t", ["10.0.0.1"], [Query(0, 0, 0, 0x0100, 1, TCP, www)] * due)
    with goaway_server(make_cert(tmp_path), per_connection=4) as port:
        runs = [play(port, loop, monkeypatch, cap, 3.0) for loop in ("python", "compiled")]
    (py, py_windows), (fast, fast_windows) = runs
    for result in (py, fast):
        d = result.as_dict()
        assert (d["sent"], d["completed"], d["lost"]) == (due, answered, due - answered), d
        conns = d["connections"]
        assert (conns["opened"], conns["streams_retried"]) == (2, due - 4), conns
        assert conns["reused"] == due - 1, conns  # a moved request is not another query
        assert d["engine_counters"] == {
            "socket_sent": due,  # each once, though some left twice
            "socket_received": answered,
            "send_failed": 0,
        }, d
    assert fast.connections["goaways"] == 2, fast.connections
    assert counts(fast_windows) == counts(py_windows)
