"""The replay's compiled TCP and DoT loop (soak.load.replay._fastreplay_stream) and its DoH
loop (_fastreplay_doh) against the Python loop, on the same plan and a real unbound: the
same queries from the same clients in the same windows, to the query, over the same
connections; a server stopped and started again mid-replay (its queries lost, counted,
the connections opened again); and the Python loop taken where no compiled one plays, or
when forced, said on stderr."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from soak.load.ledger import Window
from soak.load.replay import Replay, ReplayResult, _engine, _stream
from soak.load.replay._conns import ClientConns
from soak.traffic.capture_file import TCP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.integration.test_replay_compiled import (
    NAMES,
    SAID,
    assert_counters_agree,
    counts,
)
from tests.support.servers import ServerProc, unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def capture(n: int = 900, clients: int = 25, transport: int = TCP) -> Capture:
    """`n` queries over 1.8 s (500 q/s), clients in turn, the names in turn; every fifth
    client with two connections of its own, its queries on each in turn."""
    qs = [
        Query(
            k * 2_000_000,
            k % clients,
            (k // clients) % 2 if k % clients % 5 == 0 else 0,
            0x0100 if k % 3 else 0x0110,  # RD, and RD+CD: the captured flags kept
            NAMES[k % 4][1],
            transport,
            NAMES[k % 4][0],
        )
        for k in range(n)
    ]
    return Capture("t", [f"10.0.0.{c}" for c in range(clients)], qs)


def play(
    port: int, transport: str, loop: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[ReplayResult, list[Window]]:
    """Two loops of the capture (new connections each loop), every closed window kept."""
    monkeypatch.setenv(_engine.ENV, loop)
    cfg = ReplayConfig(file=Path("unused"), loops=2, transport=transport)  # type: ignore[arg-type]
    # A long timeout: on a busy machine the Python DoH loop answered 1,668 of 1,800 within
    # 2 s (its latency max 1.7 s); a loss here must be a real one, not a slow answer.
    replay = Replay(cfg, capture(), "127.0.0.1", port, 10.0)
    windows: list[Window] = []

    def closed(w: Window) -> None:  # as a soak run's replay process reads them (_child)
        windows.append(w)
        opened_by_window.append(replay.conns.counts()["opened"])
        offsets = replay.offsets.take(w.second).counts  # one per query the window sent
        assert sum(offsets.values()) == w.total().sent, (w.second, offsets)

    opened_by_window: list[int] = []
    replay.offsets.by_second = {}  # each window's offsets kept apart, as _child asks
    replay.ledger.on_window = closed
    assert (_engine.python_reason(replay) is None) == (loop == "compiled")
    result = replay.run(None)
    # The connections of the first second are counted by the time its window closes.
    assert opened_by_window[0] >= 30, opened_by_window
    return result, windows


@pytest.mark.parametrize("transport", ["tcp", "doh"])
def test_the_compiled_stream_loops_are_built(transport: str) -> None:
    assert _stream.compiled_stream(transport) is not None, _engine.BUILD_HINT


@pytest.mark.parametrize("transport", ["tcp", "dot", "doh"])
def test_compiled_and_python_stream_replays_send_the_same_queries_in_the_same_windows(
    tls_unbound: ServerProc,
    transport: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = tls_unbound.port_for(transport)
    runs = {}
    for loop in ("python", "compiled"):
        runs[loop] = play(port, transport, loop, monkeypatch)
        assert (SAID in capsys.readouterr().err) == (loop == "python")
    (py, py_windows), (fast, fast_windows) = runs["python"], runs["compiled"]
    assert py.as_dict()["completed"] == 1800, py.as_dict()  # every query answered

    def seen(windows: list[Window]) -> list[object]:
        """Each window's counts per class, and its rcodes."""
        rcodes = [[cw.rcodes for cw in w.classes] for w in windows]
        return list(zip(counts(windows), rcodes, strict=True))

    assert seen(fast_windows) == seen(py_windows)
    assert 3 in fast_windows[0].classes[0].rcodes  # NXDOMAIN of nope.example.test
    per_client = [(r.sent_per_client, r.lost_per_client) for r in (py, fast)]
    assert per_client == [([72] * 25, [0] * 25)] * 2
    assert (fast.windows, fast.problems) == (py.windows, py.problems) == (len(py_windows), [])
    assert len(py_windows) >= 3
    # A connection per client and connection number, each loop its own: 30 a loop.
    for result in (py, fast):
        conns = result.connections
        assert (conns["opened"], conns["errors"], conns["reused"]) == (60, 0, 1740), conns
        assert conns["handshake_max_us"] > 0, conns
        assert_counters_agree(result)


def test_doh_get_requests_give_the_same_windows_in_both_loops(
    tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DoH's GET (?dns=) as the Python loop's DohFlow sends it when asked, in both loops."""
    from soak.load.doh import DohFlow

    monkeypatch.setattr(DohFlow, "doh_get", True)
    assert _stream.doh_request(_conns_of(tls_unbound))[0] is True
    port = tls_unbound.port_for("doh")
    (py, py_windows), (fast, fast_windows) = (
        play(port, "doh", loop, monkeypatch) for loop in ("python", "compiled")
    )
    assert py.as_dict()["completed"] == fast.as_dict()["completed"] == 1800
    assert counts(fast_windows) == counts(py_windows)
    assert_counters_agree(fast)


@pytest.mark.parametrize("transport", ["dot", "doh"])
def test_the_compiled_stream_replays_give_back_the_buffers_of_each_closed_connection(
    tls_unbound: ServerProc, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool keeps its entries, not their buffers: a closed connection holds none, so
    what the pool holds follows the connections open, not the most ever open at once
    (a kept 32-KiB read buffer per entry made the DoT replay's memory rise for minutes as
    clients' connections were replaced each loop; DoH's kept each write buffer)."""
    engines: list[_stream.StreamEngine] = []

    class Kept(_stream.StreamEngine):
        def __init__(self, replay: Replay, address: bytes) -> None:
            super().__init__(replay, address)
            engines.append(self)

    monkeypatch.setattr(_engine, "StreamEngine", Kept)
    result, _ = play(tls_unbound.port_for(transport), transport, "compiled", monkeypatch)
    assert result.connections["opened"] == 60, result.connections  # 30 a loop
    entries, open_now, held = engines[0].engine.held()
    assert entries >= 30 and open_now == 0, (entries, open_now)
    assert held == 0, f"{held} bytes held by {entries} pool entries, none open"


def _conns_of(server: ServerProc) -> ClientConns:
    cfg = ReplayConfig(file=Path("unused"), transport="doh")
    return Replay(cfg, capture(4, 2), "127.0.0.1", server.port_for("doh"), 2.0).conns


@pytest.mark.parametrize("transport", ["tcp", "dot", "doh"])
def test_a_server_restarted_mid_replay_loses_its_queries_and_is_connected_again(
    tls_cert: tuple[Path, Path], tmp_path: Path, transport: str
) -> None:
    cfg = ReplayConfig(file=Path("unused"), transport=transport, idle_timeout_s=30)  # type: ignore[arg-type]
    windows: list[Window] = []
    stop = threading.Event()
    result: list[ReplayResult] = []

    def answered_after(second: int) -> bool:
        return any(w.second > second and w.classes[0].completed for w in list(windows))

    with unbound(tmp_path, tls=tls_cert) as s:
        replay = Replay(cfg, capture(400, 10), "127.0.0.1", s.port_for(transport), 0.5)
        assert _engine.python_reason(replay) is None
        replay.ledger.on_window = windows.append
        player = threading.Thread(
            target=lambda: result.append(replay.run(60.0, stopping=stop.is_set))
        )
        player.start()
        try:
            wait_for(lambda: answered_after(-1), 20, "answers before the stop", 0.01)
            s.stop()
            lost = wait_for(
                lambda: next((w.second for w in list(windows) if w.classes[0].lost), None),
                20, "queries lost while it is down", 0.01,
            )  # fmt: skip
            s.proc = subprocess.Popen(s.proc.args, cwd=tmp_path, start_new_session=True)
            wait_for(lambda: answered_after(lost), 30, "answers on new connections", 0.01)
        finally:
            stop.set()
            player.join(60)
    assert not player.is_alive()
    d = result[0].as_dict()
    assert d["sent"] == d["completed"] + d["lost"] and d["lost"] > 0 and d["problems"] == [], d
    assert sum(d["lost_per_client"]) == d["lost"], d
    conns = d["connections"]
    assert conns["opened"] > 10 and conns["errors"] > 0, conns  # refused while it was down
    # Due while no connection was up: counted sent, never written, failed at the socket.
    sockets = d["engine_counters"]
    assert sockets["send_failed"] > 0, sockets
    assert sockets["socket_sent"] + sockets["send_failed"] == d["sent"], sockets
    assert sockets["socket_received"] >= d["completed"], sockets


def test_a_forced_doh_takes_the_python_loop_and_says_so(
    tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(_engine.ENV, raising=False)
    cfg = ReplayConfig(file=Path("unused"), transport="doh")
    doh = tls_unbound.port_for("doh")
    replay = Replay(cfg, capture(40, 4), "127.0.0.1", doh, 2.0)
    assert _engine.python_reason(replay) is None  # built: the compiled DoH loop plays it
    monkeypatch.setenv(_engine.ENV, "python")
    d = Replay(cfg, capture(40, 4), "127.0.0.1", doh, 2.0).run(None).as_dict()
    assert d["completed"] == 40, d
    err = capsys.readouterr().err
    assert f"{SAID} {_engine.ENV}=python" in err, err


def test_stream_clients_split_across_worker_processes_send_the_same_windows(
    tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two worker processes (client k in worker k mod 2) against one, over TCP: the same
    windows, each client its own queries, the workers' connections summed."""
    from soak.load.replay._workers import run_split

    monkeypatch.delenv(_engine.ENV, raising=False)
    cfg = ReplayConfig(file=Path("unused"), loops=2, transport="tcp")
    runs = []
    for workers in (1, 2):
        replay = Replay(cfg, capture(), "127.0.0.1", tls_unbound.port, 2.0)
        windows: list[Window] = []
        replay.ledger.on_window = windows.append
        runs.append((run_split(replay, workers, None, 50_000_000), windows))
    (one, one_w), (two, two_w) = runs
    assert two.as_dict()["completed"] == 1800, two.as_dict()
    assert counts(two_w) == counts(one_w)
    assert two.sent_per_client == one.sent_per_client == [72] * 25
    assert two.connections == {
        **one.connections,
        **{k: v for k, v in two.connections.items() if "handshake" in k},
    }
    assert two.connections["opened"] == 60 and two.connections["reused"] == 1740
    assert_counters_agree(two)
