"""The replay's compiled UDP loop against its Python loop, on the same plan and a real
unbound: the same queries from the same clients in the same windows, to the query; and
the Python loop taken where the compiled one is not, said on stderr (the TCP and DoT
loop: test_replay_stream_compiled.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soak import procfs
from soak.load.ledger import Window
from soak.load.replay import Offsets, Replay, ReplayResult, _engine
from soak.load.replay._result import three_digits
from soak.traffic.capture_file import TCP, UDP, Capture, Query, write_capture
from soak.traffic.replay_config import ReplayConfig
from tests.support.servers import ServerProc, module_unbound

pytestmark = pytest.mark.integration

server = module_unbound()
SOAK = str(Path(sys.executable).parent / "soak")
NAMES = [
    (b"\x03www\x07example\x04test\x00", 1),  # A
    (b"\x03www\x07example\x04test\x00", 28),  # AAAA
    (b"\x07example\x04test\x00", 15),  # MX
    (b"\x04nope\x07example\x04test\x00", 1),  # NXDOMAIN: the rcodes count too
]
SAID = "soak: replay in the Python loop:"
LOOPS = ("python", "compiled")


def capture(n: int = 900, clients: int = 25) -> Capture:
    """`n` queries over 1.8 s (500 q/s), clients in turn, the names in turn."""
    qs = [
        Query(k * 2_000_000, k % clients, 0, 0x0100, NAMES[k % 4][1], UDP, NAMES[k % 4][0])
        for k in range(n)
    ]
    return Capture("t", [f"10.0.0.{c}" for c in range(clients)], qs)


def play(
    port: int, loop: str, monkeypatch: pytest.MonkeyPatch, host: str = "127.0.0.1"
) -> tuple[ReplayResult, list]:
    """Two loops of the capture (new sockets each loop), every closed window kept."""
    monkeypatch.setenv(_engine.ENV, loop)
    cfg = ReplayConfig(file=Path("unused"), loops=2)
    replay = Replay(cfg, capture(), host, port, 2.0)
    windows: list[Window] = []
    replay.ledger.on_window = windows.append
    assert (_engine.python_reason(replay) is None) == (loop == "compiled")
    return replay.run(None), windows


def counts(windows: list[Window]) -> list[tuple[int, list[tuple[int, ...]]]]:
    return [
        (
            w.second,
            [
                (c.due, c.sent, c.skipped, c.completed, c.lost, sum(c.lat_us.values()))
                for c in w.classes
            ],
        )
        for w in windows
    ]


def test_the_compiled_loop_is_built() -> None:
    """`pip install -e .` builds it (a missing compiler is told there, and here)."""
    assert _engine.compiled() is not None, _engine.BUILD_HINT


def test_compiled_and_python_loops_send_the_same_queries_in_the_same_windows(
    server: ServerProc, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    py, py_windows = play(server.port, "python", monkeypatch)
    assert SAID in capsys.readouterr().err
    fast, fast_windows = play(server.port, "compiled", monkeypatch)
    assert SAID not in capsys.readouterr().err
    assert py.as_dict()["completed"] == 1800, py.as_dict()  # every query answered
    assert counts(fast_windows) == counts(py_windows)
    assert [[c.rcodes for c in w.classes] for w in fast_windows] == [
        [c.rcodes for c in w.classes] for w in py_windows
    ]
    assert 3 in fast_windows[0].classes[0].rcodes  # NXDOMAIN of nope.example.test
    assert fast.sent_per_client == py.sent_per_client == [72] * 25
    assert fast.lost_per_client == py.lost_per_client
    assert fast.windows == py.windows == len(py_windows) >= 3
    assert fast.problems == py.problems == []
    # Each loop its own sockets, every client's closed before it asks again.
    assert fast.fds_peak == py.fds_peak == 25
    # The sockets' own counts, apart from the ledger, in both loops: every query sent
    # was taken by its socket, and every answer read (nothing stray from unbound).
    for result in (py, fast):
        assert_counters_agree(result)


def assert_counters_agree(result: ReplayResult) -> None:
    """A clean replay's socket counters equal the ledger's sent and completed."""
    d = result.as_dict()
    assert d["engine_counters"] == {
        "socket_sent": d["sent"],
        "socket_received": d["completed"],
        "send_failed": 0,
    }, d


def test_the_compiled_loops_latencies_are_the_histograms_buckets(
    server: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each answer counted at its bucket's lowest µs (soak.histogram), so the windows
    merge with any other's histogram bucket for bucket."""
    from soak.histogram import bucket_of, bucket_range

    _, windows = play(server.port, "compiled", monkeypatch)
    values = {us for w in windows for c in w.classes for us in c.lat_us}
    assert values and all(bucket_range(bucket_of(us))[0] == us for us in values)


def test_a_tcp_capture_plays_in_the_compiled_stream_loop(
    tmp_path: Path, server: ServerProc
) -> None:
    """A capture of TCP queries only: `soak load --replay` plays it in the compiled TCP loop
    (_fastreplay_stream), without a word on stderr (test_replay_stream_compiled.py)."""
    qs = [Query(k * 10_000_000, 0, 0, 0x0100, 1, TCP, NAMES[0][0]) for k in range(20)]
    path = tmp_path / "c.soakcap"
    write_capture(path, Capture("t", ["10.0.0.1"], qs))
    argv = [SOAK, "load", "--server", f"127.0.0.1:{server.port}", "--replay", str(path)]
    env = {k: v for k, v in os.environ.items() if k != _engine.ENV}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and SAID not in proc.stderr, proc.stderr
    assert "Queries completed:    20" in proc.stdout, proc.stdout


def test_a_build_without_the_compiled_loop_says_what_to_install(
    server: ServerProc, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(_engine.ENV, raising=False)
    monkeypatch.setattr(_engine, "compiled", lambda: None)
    cfg = ReplayConfig(file=Path("unused"))
    d = Replay(cfg, capture(40), "127.0.0.1", server.port, 2.0).run(None).as_dict()
    assert d["completed"] == 40, d
    err = capsys.readouterr().err
    assert f"{SAID} the compiled loop is not built (install gcc and python3-dev" in err, err


def test_soak_load_replay_plays_udp_in_the_compiled_loop(
    tmp_path: Path, server: ServerProc
) -> None:
    path = tmp_path / "c.soakcap"
    write_capture(path, capture(100))
    argv = [SOAK, "load", "--server", f"127.0.0.1:{server.port}", "--replay", str(path)]
    env = {k: v for k, v in os.environ.items() if k != _engine.ENV}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and SAID not in proc.stderr, proc.stderr
    assert "Queries completed:    100" in proc.stdout, proc.stdout


@pytest.mark.parametrize("loop", ["compiled", "python"])
def test_soak_load_replay_json_carries_the_sockets_counts(
    tmp_path: Path, server: ServerProc, loop: str
) -> None:
    """`soak load --replay --json`: engine_counters, in either loop and with --workers 2
    (the compiled loop's split), equal to the ledger's sent and completed."""
    path = tmp_path / "c.soakcap"
    write_capture(path, capture(300))
    env = {**os.environ, _engine.ENV: loop}
    for workers in ("1", "2") if loop == "compiled" else ("1",):
        argv = [
            SOAK, "load", "--server", f"127.0.0.1:{server.port}", "--replay", str(path),
            "--workers", workers, "--json",
        ]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0, proc.stderr
        d = json.loads(proc.stdout)
        assert d["completed"] == 300, d
        want = {"socket_sent": 300, "socket_received": 300, "send_failed": 0}
        assert d["engine_counters"] == want, (workers, d)


def test_clients_past_the_descriptors_lose_their_queries_counted(
    tmp_path: Path, server: ServerProc
) -> None:
    """100 clients, 64 descriptors for the whole process: the clients whose socket cannot
    be opened lose their queries, each counted (udp_socket_errors), the rest answered."""
    import json
    import resource

    path = tmp_path / "c.soakcap"
    write_capture(path, capture(400, clients=100))
    argv = [SOAK, "load", "--server", f"127.0.0.1:{server.port}", "--replay", str(path), "--json"]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)),
    )
    assert proc.returncode == 0 and SAID not in proc.stderr, proc.stderr
    d = json.loads(proc.stdout)
    errors = d["connections"]["udp_socket_errors"]
    assert 0 < errors == d["lost"] and d["completed"] + d["lost"] == d["sent"] == 400, d
    assert d["client_sockets_peak"] < 64, d


def test_clients_split_across_worker_processes_send_the_same_windows(
    server: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two worker processes (client k in worker k mod 2) against one: the merged windows
    hold the same queries, per second and class, and each client its own."""
    from soak.load.replay._workers import run_split

    monkeypatch.delenv(_engine.ENV, raising=False)
    cfg = ReplayConfig(file=Path("unused"), loops=2)
    runs = []
    for workers in (1, 2):
        replay = Replay(cfg, capture(), "127.0.0.1", server.port, 2.0)
        windows: list[Window] = []
        replay.ledger.on_window = windows.append
        result = run_split(replay, workers, None, 50_000_000)
        runs.append((result, windows))
    (one, one_w), (two, two_w) = runs
    assert two.as_dict()["completed"] == 1800, two.as_dict()
    assert counts(two_w) == counts(one_w)
    assert two.sent_per_client == one.sent_per_client == [72] * 25
    assert two.windows == one.windows and two.problems == []
    assert two.fds_peak == 25  # 13 and 12 clients, each its own socket
    # The workers' socket counts, summed.
    assert_counters_agree(two)
    assert two.engine_counters["socket_sent"] == 1800


def test_workers_below_one_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "c.soakcap"
    write_capture(path, capture(10))
    argv = [SOAK, "load", "--server", "127.0.0.1:9", "--replay", str(path), "--workers", "0"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr == "soak: --workers must be at least 1: 0\n", proc.stderr


def offsets_per_window(
    port: int, loop: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[ReplayResult, list[tuple[int, int, Offsets]]]:
    """play(), each closed window's (second, sent, send offsets) taken as a soak run's
    replay process takes them (soak.load.replay._child)."""
    monkeypatch.setenv(_engine.ENV, loop)
    replay = Replay(ReplayConfig(file=Path("unused"), loops=2), capture(), "127.0.0.1", port, 2.0)
    replay.offsets.by_second = {}
    windows: list[tuple[int, int, Offsets]] = []

    def took(w: Window) -> None:
        windows.append((w.second, w.total().sent, replay.offsets.take(w.second)))

    replay.ledger.on_window = took
    return replay.run(None), windows


def test_each_window_carries_its_queries_send_offsets_in_both_loops(
    server: ServerProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled loop counts the send offsets in C, per window: each window hands
    over one offset per query it sent, in the values three_digits keeps, as the Python
    loop's windows do; the whole replay's offsets are the windows' together."""
    by_loop = {loop: offsets_per_window(server.port, loop, monkeypatch) for loop in LOOPS}
    sent = {loop: [(s, n) for s, n, _ in windows] for loop, (_, windows) in by_loop.items()}
    assert sent["compiled"] == sent["python"]
    for result, windows in by_loop.values():
        assert [sum(o.counts.values()) for _, _, o in windows] == [n for _, n, _ in windows]
        values = {us for _, _, o in windows for us in o.counts}
        assert values and all(three_digits(us) == us for us in values)
        assert result.offset_us["max"] == max(values)
        assert sum(n for _, n, _ in windows) == result.as_dict()["sent"] == 1800


def test_a_server_given_by_name_is_replayed_by_the_compiled_loop(
    server: ServerProc, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`localhost` is resolved once, as the Python loop's sockets resolve it: the same
    windows as the address gives, every query answered."""
    by_name, by_name_windows = play(server.port, "compiled", monkeypatch, host="localhost")
    assert SAID not in capsys.readouterr().err
    by_address, by_address_windows = play(server.port, "compiled", monkeypatch)
    assert by_name.as_dict()["completed"] == 1800, by_name.as_dict()
    assert counts(by_name_windows) == counts(by_address_windows)
    assert by_name.sent_per_client == by_address.sent_per_client == [72] * 25
    assert_counters_agree(by_name)


def test_a_server_name_that_does_not_resolve_is_said_before_a_query_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(OSError, match="does not resolve"):
        play(53, "compiled", monkeypatch, host="no-such-host.invalid")


@pytest.mark.parametrize("loop", LOOPS)
def test_answers_in_flight_at_a_new_loop_are_read_from_the_old_port(
    server: ServerProc, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client's new loop (rename_clients) moves it to a new source port while answers
    to its last loop's queries are on the way: a burst of 100 due at the first loop's
    end and the second loop's first query 10 µs later leave in one play step, so the
    burst's answers arrive after the move. The old socket is read until its last
    query's timeout, so none of them is lost; before, it closed at the move and the
    kernel dropped the answers at a closed port (NoPorts), counted lost. What the
    kernel dropped at unbound's own socket, on a busy machine, is the only loss
    allowed."""
    monkeypatch.setenv(_engine.ENV, loop)
    www = NAMES[0]
    burst = [Query(1_000_000, 0, 0, 0x0100, www[1], UDP, www[0]) for _ in range(100)]
    cap = Capture("t", ["10.0.0.1"], [Query(0, 0, 0, 0x0100, www[1], UDP, www[0]), *burst])
    replay = Replay(ReplayConfig(file=Path("unused"), loops=2), cap, "127.0.0.1", server.port, 2.0)
    assert (_engine.python_reason(replay) is None) == (loop == "compiled")
    dropped_before = procfs.udp_drops(server.pid, server.port)
    d = replay.run(None).as_dict()
    dropped = procfs.udp_drops(server.pid, server.port) - dropped_before
    assert d["sent"] == d["due"] == 2 * 101, d
    assert d["lost"] <= dropped and d["completed"] == d["sent"] - d["lost"], (d, dropped)
    assert d["engine_counters"]["socket_received"] == d["completed"], d
