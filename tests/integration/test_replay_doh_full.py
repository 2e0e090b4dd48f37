"""A DoH replay client whose connection is full (as many streams in flight as the server's
SETTINGS_MAX_CONCURRENT_STREAMS) stays on it: its next queries wait on that connection
for a stream to free, as an HTTP/2 client does, and the replay opens no connection the
capture does not have (docs/replay.md). Both loops, against real unbound with
`http-max-streams: 2`, to the query."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.load.ledger import Window
from soak.load.replay import Replay, ReplayResult, _engine
from soak.traffic.capture_file import TCP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.integration.test_replay_compiled import NAMES, assert_counters_agree, counts
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
    port: int, loop: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[ReplayResult, list[Window]]:
    monkeypatch.setenv(_engine.ENV, loop)
    cfg = ReplayConfig(file=Path("unused"), transport="doh", idle_timeout_s=30)
    # A long timeout: a loss here must be a real one, not a slow answer on a busy machine.
    replay = Replay(cfg, capture(), "127.0.0.1", port, 10.0)
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
