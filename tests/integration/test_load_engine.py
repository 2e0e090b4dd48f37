"""The load engine against real servers on loopback: unbound and pdns-recursor."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from soak.load.generator import LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from tests.support.pdns import pdns_recursor
from tests.support.servers import ServerProc, dnsmasq_upstream, module_unbound, unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

MIX = [
    {
        "name": "local",
        "weight": 3,
        "queries": ["www.example.test", "mail.example.test A", "www.example.test AAAA"],
        "expect": {"rcodes": ["NOERROR"]},
    },
    {"name": "blocked", "queries": ["blocked.example.test"], "expect": {"addresses": ["0.0.0.0"]}},
    # www is not blocked: every answer of this class is wrong
    {"name": "wrongly", "queries": ["www.example.test"], "expect": {"addresses": ["0.0.0.0"]}},
    {"name": "miss", "random": {"zone": "example.test"}, "expect": {"rcodes": ["NXDOMAIN"]}},
]


server = module_unbound(threads=1)


def check_accounting(d: dict[str, Any]) -> None:
    assert d["sent"] == d["completed"] + d["lost"]
    for c in d["classes"].values():
        assert c["sent"] == c["completed"] + c["lost"]


@pytest.fixture(params=["compiled", "python"])
def udp_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both loops of each protocol: the compiled one (default) and the pure-Python
    fallback (UDP's, and TCP's since the stream loop is compiled too)."""
    if request.param == "python":
        monkeypatch.setenv("SOAK_LOAD_PURE", "1")  # workers inherit the environment
    else:
        monkeypatch.delenv("SOAK_LOAD_PURE", raising=False)
    return str(request.param)


@pytest.mark.parametrize("protocol", ["udp", "tcp"])
def test_mix_against_unbound(
    server: ServerProc, protocol: str, udp_loop: str, tmp_path: Path
) -> None:
    cfg = LoadConfig(protocol=protocol, flows=4, seed=1, mix=MIX, workers=2)
    result = run_load(cfg, ("127.0.0.1", server.port), 2.0, 600.0, base_dir=tmp_path)
    d = result.to_json_dict()
    check_accounting(d)
    assert d["sent"] == 1200 and d["lost"] == 0 and not d["generator_bound"]
    # two workers start at different points of the mix: each class within 2 of its weight
    assert abs(d["rcodes"]["NXDOMAIN"] - 200) <= 2 and sum(d["rcodes"].values()) == 1200
    classes = d["classes"]
    assert abs(classes["local"]["sent"] - 600) <= 2 and abs(classes["miss"]["sent"] - 200) <= 2
    assert classes["local"]["wrong_answers"] == 0
    assert classes["blocked"]["wrong_answers"] == 0
    assert classes["miss"]["wrong_answers"] == 0
    assert classes["wrongly"]["wrong_answers"] == classes["wrongly"]["completed"] > 190
    # each loop's sockets counted apart from the windows (for TCP: queries written whole)
    assert d["engine_counters"] == {"socket_sent": 1200, "socket_received": 1200, "send_failed": 0}
    lat = d["latency_ms"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"] < 2000


def test_runner_windows_rate_change_and_stop(
    server: ServerProc, udp_loop: str, tmp_path: Path
) -> None:
    cfg = LoadConfig(flows=8, mix=[{"name": "local", "queries": ["www.example.test"]}])
    runner = LoadRunner(cfg, ("127.0.0.1", server.port), base_dir=tmp_path)
    runner.start(200.0, max_duration_s=60.0)
    later: list[dict[str, dict[str, float]]] = []  # the windows closed at 1,000 q/s

    def sent_at_the_new_rate() -> bool:
        window = runner.take_window()
        if window and window["all"]["rate_target"] > 700:  # mostly at 1,000 q/s
            later.append(window)
        return sum(w["all"]["sent"] for w in later) > 1500

    try:
        # waited for, not slept: a busy machine starts its workers late
        first = wait_for(lambda: runner.take_window() or None, 30.0, "a first window", 0.1)
        assert runner.alive()
        runner.set_rate(1000.0)
        wait_for(sent_at_the_new_rate, 30.0, "1,500 queries sent at 1,000 q/s", 0.1)
    finally:
        result = runner.stop()
    assert set(first) == {"local", "all"}
    assert first["all"]["rcode_noerror"] > 0 and first["all"]["lat_p99_ms"] > 0
    assert 0 < first["all"]["sent"] <= 200 * 3
    assert not runner.alive()
    assert runner.stop() is result  # idempotent
    d = result.to_json_dict()
    check_accounting(d)
    assert d["lost"] == 0
    assert d["sent"] >= first["all"]["sent"] + sum(w["all"]["sent"] for w in later)


def test_a_killed_worker_s_seconds_are_closed_and_kept(server: ServerProc, tmp_path: Path) -> None:
    """A worker SIGKILLed mid-run: the seconds it had not closed are closed for it and
    kept (its part due and skipped), so the run's windows are still due exactly rate x
    seconds, each second once, every invariant kept."""
    cfg = LoadConfig(flows=4, workers=2, timeout_s=0.5, mix=MIX)
    runner = LoadRunner(cfg, ("127.0.0.1", server.port), base_dir=tmp_path)
    runner.keep_ledger = True
    runner.start(400.0, max_duration_s=4.0, begin_at_s=time.monotonic() + 0.5)
    try:
        wait_for(lambda: runner.totals().completed > 0, 10, "the first second closed")
        os.kill(runner.pids[1], signal.SIGKILL)
        wait_for(lambda: not runner.alive(), 10, "the worker is gone")
        runner.wait(10.0)  # the other one ends with the schedule
    finally:
        result = runner.stop()
    windows = runner.take_ledger()
    assert [w.second for w in windows] == [0, 1, 2, 3]
    for w in windows:
        assert w.problems() == []
    due = sum(w.total().due for w in windows)
    skipped = sum(w.total().skipped for w in windows)
    assert due == 1600 == result.due  # nothing dropped
    assert 0 < skipped < 800  # the killed worker's part after it went
    assert windows[-1].total().skipped == 200  # its whole share of the last second
    assert result.completed + result.lost == result.sent


def test_server_stopped_mid_run_gives_lost_queries(udp_loop: str, tmp_path: Path) -> None:
    cfg = LoadConfig(flows=4, timeout_s=0.5, mix=[{"name": "q", "queries": ["www.example.test"]}])
    with unbound(tmp_path) as s:
        runner = LoadRunner(cfg, ("127.0.0.1", s.port), base_dir=tmp_path)
        runner.start(500.0, max_duration_s=4.0)
        time.sleep(2.0)
        stopped_at = time.monotonic()
        s.stop()
        time.sleep(1.0)
        # a closed window (on a busy machine the first may close later than 3 s in)
        window = wait_for(lambda: runner.take_window() or None, 30.0, "a first window", 0.1)
        result = runner.stop()
        rest = runner.take_window()
    # The silence runs from the stop to the end of the load (4 s after the start).
    gap_s, gap_end_s = runner.longest_gap()
    assert 1.0 < gap_s < 3.0 and gap_end_s > stopped_at
    d = result.to_json_dict()
    check_accounting(d)
    assert d["completed"] > 300 and d["lost"] > 100
    # windows add up to the totals
    tail = rest.get("all", {"lost": 0, "sent": 0})  # none left if the wait saw them all
    assert window["all"]["lost"] + tail["lost"] == d["lost"]
    assert window["all"]["sent"] + tail["sent"] == d["sent"]


def test_tcp_reconnects_after_the_server_restarts(tmp_path: Path) -> None:
    cfg = LoadConfig(
        protocol="tcp", flows=2, timeout_s=0.5, mix=[{"name": "q", "queries": ["www.example.test"]}]
    )
    with unbound(tmp_path) as s:
        runner = LoadRunner(cfg, ("127.0.0.1", s.port), base_dir=tmp_path)
        runner.start(300.0, max_duration_s=6.0)
        time.sleep(1.5)
        s.stop()
        s.proc = __import__("subprocess").Popen(s.proc.args, cwd=tmp_path, start_new_session=True)
        time.sleep(3.0)
        after = runner.take_window()
        result = runner.stop()
        s.stop()
    d = result.to_json_dict()
    check_accounting(d)
    assert d["lost"] > 0  # while it was down
    assert after["all"]["completed"] > 200  # answered again on new connections
    # Due while no connection was up (or queued on one that broke): counted sent, never
    # written whole, so failed at the socket; every other query was written whole.
    sockets = d["engine_counters"]
    assert sockets["send_failed"] > 0, sockets
    assert sockets["socket_sent"] + sockets["send_failed"] == d["sent"], sockets
    assert d["completed"] <= sockets["socket_received"], sockets


def test_miss_names_through_pdns_recursor(tmp_path: Path) -> None:
    up_dir, rec_dir = tmp_path / "up", tmp_path / "rec"
    up_dir.mkdir()
    rec_dir.mkdir()
    mix = [
        {
            "name": "miss",
            "random": {"zone": "miss.example"},
            "expect": {"addresses": ["192.0.2.1"]},
        },
        {"name": "cached", "queries": ["www.cached.example"], "expect": {"rcodes": ["NOERROR"]}},
    ]
    with dnsmasq_upstream(up_dir) as up, pdns_recursor(rec_dir, up.port) as rec:
        cfg = LoadConfig(seed=5, flows=8, mix=mix)
        result = run_load(cfg, ("127.0.0.1", rec.port), 2.0, 300.0, base_dir=tmp_path)
    d = result.to_json_dict()
    check_accounting(d)
    assert d["lost"] == 0 and d["rcodes"] == {"NOERROR": 600}
    assert d["classes"]["miss"]["wrong_answers"] == 0
    assert d["classes"]["cached"]["wrong_answers"] == 0


def test_dnsperf_engine_against_unbound(server: ServerProc, tmp_path: Path) -> None:
    qfile = tmp_path / "q.txt"
    qfile.write_text("www.example.test\nnothere.example.test A\n")
    cfg = LoadConfig(engine="dnsperf", flows=2, mix=[{"name": "q", "file": str(qfile)}])
    result = run_load(cfg, ("127.0.0.1", server.port), 2.0, 500.0, base_dir=tmp_path)
    d = result.to_json_dict()
    assert d["engine"] == "dnsperf" and d["sent"] == d["completed"] + d["lost"]
    assert 900 <= d["sent"] <= 1001 and d["lost"] == 0
    # the two queries in turn: an odd count has one more of the first
    rcodes = d["rcodes"]
    assert set(rcodes) == {"NOERROR", "NXDOMAIN"} and sum(rcodes.values()) == d["completed"]
    assert 0 <= rcodes["NOERROR"] - rcodes["NXDOMAIN"] <= 1, rcodes
    assert d["latency_ms"]["avg"] > 0 and d["latency_ms"]["p99"] is None


def test_flat_out_answers_everything(server: ServerProc, udp_loop: str, tmp_path: Path) -> None:
    cfg = LoadConfig(
        flows=16, max_outstanding=50, mix=[{"name": "q", "queries": ["www.example.test", "x.test"]}]
    )
    result = run_load(cfg, ("127.0.0.1", server.port), 1.0, 0.0, base_dir=tmp_path)
    d = result.to_json_dict()
    check_accounting(d)
    assert d["lost"] == 0 and d["completed"] > 1000 and not d["generator_bound"]
    # half the questions are www (NOERROR), half x.test (NXDOMAIN), alternating
    assert set(d["rcodes"]) == {"NOERROR", "NXDOMAIN"}
    assert abs(d["rcodes"]["NOERROR"] - d["rcodes"]["NXDOMAIN"]) <= 1


@pytest.mark.parametrize("protocol", ["udp", "tcp"])
def test_every_window_is_due_exactly_its_seconds_share(
    server: ServerProc, protocol: str, udp_loop: str, tmp_path: Path
) -> None:
    """Two workers at 3,000 q/s for 3 s: every grid second is due 3,000 queries, to the
    query (the workers interleave; each query counts in the second it was due, also in
    the compiled loop's batches of 64), and every window keeps its invariants."""
    cfg = LoadConfig.model_validate(
        {"mix": MIX, "protocol": protocol, "workers": 2, "flows": 2, "timeout_s": 1}
    )
    runner = LoadRunner(cfg, ("127.0.0.1", server.port), base_dir=tmp_path)
    runner.keep_ledger = True
    runner.start(3000, 3.0)
    try:
        assert runner.wait(30.0)
    finally:
        result = runner.stop()
    windows = runner.take_ledger()
    assert [w.second for w in windows] == [0, 1, 2]
    for w in windows:
        assert w.problems() == []
        assert w.total().due == 3000, (w.second, w.total().due)
    assert result.due == result.sent == 9000 and result.completed <= result.sent
