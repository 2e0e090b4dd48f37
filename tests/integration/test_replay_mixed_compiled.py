"""A capture that mixes UDP and TCP queries, played by the compiled UDP and TCP replay
loops side by side, each in a process of its own (soak.load.replay._workers), against
the Python loop on the same plan and a real unbound: the same windows to the query, the
same connections, unbound's own counts of all and TCP queries the ledger's split; the
Python loop only when forced; a play resumed mid-loop, stopped, or with a failed
process; and `soak load --replay --workers` of one."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from soak.load.ledger import Window
from soak.load.replay import Replay, ReplayResult, _engine
from soak.traffic.capture_file import TCP, UDP, Capture, write_capture
from soak.traffic.replay_config import ReplayConfig
from tests.integration.test_replay_compiled import (
    SAID,
    SOAK,
    assert_counters_agree,
    counts,
)
from tests.integration.test_replay_stream_compiled import capture
from tests.support.servers import ServerProc
from tests.support.unbound_counts import unbound_queries
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def mixed_capture(n: int = 900, clients: int = 25) -> Capture:
    """capture(), every other query UDP (conn 0, as captured): each client asks over
    both transports in turn (25 clients in turn: a client's queries alternate), every
    fifth client's TCP queries on its two connections in turn."""
    tcp = capture(n, clients)
    queries = [
        dataclasses.replace(q, transport=UDP, conn=0)
        if k % 2
        else dataclasses.replace(q, conn=(k // (2 * clients)) % 2 if q.client % 5 == 0 else 0)
        for k, q in enumerate(tcp.queries)
    ]
    return Capture("t", tcp.clients, queries)


def play_mixed(
    server: tuple[ServerProc, Path], loop: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[ReplayResult, list[Window], list[int], tuple[int, int]]:
    """Two loops of mixed_capture(): the result, every closed window, the send offsets
    each window carried (taken as _child takes them), and what unbound counted."""
    monkeypatch.setenv(_engine.ENV, loop)
    cfg = ReplayConfig(file=Path("unused"), loops=2)
    replay = Replay(cfg, mixed_capture(), "127.0.0.1", server[0].port, 2.0)
    windows: list[Window] = []
    sent_us: list[int] = []
    replay.offsets.by_second = {}

    def closed(w: Window) -> None:
        windows.append(w)
        sent_us.append(sum(replay.offsets.take(w.second).counts.values()))

    replay.ledger.on_window = closed
    before = unbound_queries(server[1])
    result = replay.run(None)
    after = unbound_queries(server[1])
    return result, windows, sent_us, (after[0] - before[0], after[1] - before[1])


def test_a_mixed_capture_plays_compiled_with_the_python_loops_windows(
    counted_unbound: tuple[ServerProc, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """UDP and TCP queries of the same clients: the compiled loops (a process each) send
    the same queries in the same windows as the Python loop, over as many connections;
    unbound counts the TCP queries the connections carried, and the rest over UDP."""
    runs = {}
    for loop in ("python", "compiled"):
        runs[loop] = play_mixed(counted_unbound, loop, monkeypatch)
        assert (SAID in capsys.readouterr().err) == (loop == "python")
    (py, py_w, py_us, py_got), (fast, fast_w, fast_us, fast_got) = runs["python"], runs["compiled"]
    assert py.as_dict()["completed"] == 1800, py.as_dict()
    assert counts(fast_w) == counts(py_w)
    assert [[c.rcodes for c in w.classes] for w in fast_w] == [
        [c.rcodes for c in w.classes] for w in py_w
    ]
    # Every window carries one send offset per query it sent, from both processes.
    assert fast_us == py_us == [w.total().sent for w in py_w]
    assert fast.offset_us["max"] > 0
    assert (fast.windows, fast.problems) == (py.windows, py.problems) == (len(py_w), [])
    per_client = [(r.sent_per_client, r.lost_per_client) for r in (py, fast)]
    assert per_client == [([72] * 25, [0] * 25)] * 2
    for result, got in ((py, py_got), (fast, fast_got)):
        conns = result.connections
        # A connection per client and connection number, each loop: 30 a loop, and
        # every TCP query either opened one or was carried by an open one.
        assert (conns["opened"], conns["errors"], conns["reused"]) == (60, 0, 840), conns
        assert got == (1800, conns["opened"] + conns["reused"]), got
        assert_counters_agree(result)


def test_a_mixed_capture_takes_the_python_loop_only_when_told_and_says_so(
    tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(_engine.ENV, raising=False)
    cfg = ReplayConfig(file=Path("unused"))
    replay = Replay(cfg, mixed_capture(40, 4), "127.0.0.1", tls_unbound.port, 2.0)
    assert _engine.python_reason(replay) is None
    assert replay.run(None).as_dict()["completed"] == 40
    assert SAID not in capsys.readouterr().err
    monkeypatch.setenv(_engine.ENV, "python")
    replay = Replay(cfg, mixed_capture(40, 4), "127.0.0.1", tls_unbound.port, 2.0)
    assert replay.run(None).as_dict()["completed"] == 40
    err = capsys.readouterr().err
    assert f"{SAID} {_engine.ENV}=python" in err, err


def test_a_mixed_capture_resumed_mid_loop_plays_the_python_loops_windows(
    tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A soak run's play from 1 s after the origin (a restart): the queries due from
    there, in the same windows, in both loops."""
    cfg = ReplayConfig(file=Path("unused"))
    runs = []
    for loop in ("python", "compiled"):
        monkeypatch.setenv(_engine.ENV, loop)
        replay = Replay(cfg, mixed_capture(), "127.0.0.1", tls_unbound.port, 2.0)
        windows: list[Window] = []
        replay.ledger.on_window = windows.append
        result = replay.run(None, stopping=lambda: False, start_ns=1_000_000_000)
        runs.append((result.as_dict(), counts(windows)))
    (py, py_w), (fast, fast_w) = runs
    assert py["due"] == py["completed"] == 400, py  # 2 ms apart: 1.0 s to 1.798 s
    assert fast_w == py_w and fast_w[0][0] == 1
    assert fast["connections"]["opened"] == py["connections"]["opened"] > 0


def test_a_mixed_capture_in_its_processes_stops_when_told(
    tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a soak run's replay process plays it (_child): told to stop, both processes
    send no more, what is in flight ends; each window carries its send offsets and the
    connections opened by then."""
    monkeypatch.delenv(_engine.ENV, raising=False)
    cfg = ReplayConfig(file=Path("unused"))  # loops until told
    replay = Replay(cfg, mixed_capture(), "127.0.0.1", tls_unbound.port, 2.0)
    replay.offsets.by_second = {}
    seen: list[tuple[Window, int, int]] = []  # window, its offsets, connections opened

    def closed(w: Window) -> None:
        taken = sum(replay.offsets.take(w.second).counts.values())
        seen.append((w, taken, replay.conns.counts()["opened"]))

    replay.ledger.on_window = closed
    stop = threading.Event()
    result: list[ReplayResult] = []
    player = threading.Thread(target=lambda: result.append(replay.run(60.0, stopping=stop.is_set)))
    player.start()
    try:
        wait_for(lambda: any(w.second >= 2 for w, _, _ in list(seen)), 30, "two loops", 0.01)
    finally:
        stop.set()
        player.join(60)
    assert not player.is_alive() and SAID not in capsys.readouterr().err
    d = result[0].as_dict()
    assert d["sent"] == d["completed"] and d["problems"] == [] and d["due"] < 60 * 500, d
    assert [n for _, n, _ in seen] == [w.total().sent for w, _, _ in seen]
    assert seen[0][2] > 0 and d["connections"]["opened"] >= seen[-1][2]
    assert_counters_agree(result[0])


def test_a_failed_process_of_a_mixed_capture_stops_the_other_and_is_told(
    tls_unbound: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The TCP process fails at its start: the UDP one is stopped (not 60 s of queries),
    its windows closed, the failure raised; wind_up then closes what is left."""
    from soak.load.replay import _workers

    def failing(replay: Replay, *args: object) -> ReplayResult:
        if args[-1] == TCP:
            raise OSError("no TCP today")
        return _engine.run_compiled(replay, *args)  # type: ignore[arg-type]

    monkeypatch.delenv(_engine.ENV, raising=False)
    monkeypatch.setattr(_workers, "run_compiled", failing)
    cfg = ReplayConfig(file=Path("unused"))
    replay = Replay(cfg, mixed_capture(), "127.0.0.1", tls_unbound.port, 2.0)
    windows: list[Window] = []
    replay.ledger.on_window = windows.append
    with pytest.raises(RuntimeError, match="replay worker 1: OSError: no TCP today"):
        replay.run(60.0, stopping=lambda: False)
    replay.wind_up(1_000_000_000 * (windows[-1].second + 2) if windows else 2_000_000_000)
    assert windows and windows[-1].second < 30, [w.second for w in windows]
    assert all(cw.completed == cw.sent for w in windows for cw in w.classes)


def test_soak_load_replay_plays_a_mixed_capture_compiled_in_workers(
    tls_unbound: ServerProc, tmp_path: Path
) -> None:
    """`soak load --replay --workers 2` of a mixed capture: four processes (a UDP and a
    TCP one per worker), every query answered, the sockets' counts summed to the
    ledger's, no word of the Python loop."""
    path = tmp_path / "c.soakcap"
    write_capture(path, mixed_capture(300, 10))
    env = {k: v for k, v in os.environ.items() if k != _engine.ENV}
    for workers in ("1", "2"):
        argv = [
            SOAK, "load", "--server", f"127.0.0.1:{tls_unbound.port}", "--replay", str(path),
            "--workers", workers, "--json",
        ]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0 and SAID not in proc.stderr, proc.stderr
        d = json.loads(proc.stdout)
        assert d["completed"] == 300 and d["sent_per_client"] == [30] * 10, d
        want = {"socket_sent": 300, "socket_received": 300, "send_failed": 0}
        assert d["engine_counters"] == want, (workers, d)
        conns = d["connections"]
        assert conns["opened"] + conns["reused"] == 150 and conns["errors"] == 0, conns
