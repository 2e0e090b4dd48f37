"""The compiled TCP and DoT loop (soak.load._faststream) against real unbound on loopback.

The same spec through the compiled loop and through the Python one (SOAK_LOAD_PURE=1)
counts alike to the query, each loop's socket counters agree with its ledger, and a
server stopped and started again mid-run is reconnected to, its queries in flight
counted lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.load import stream_fast
from soak.load.generator import LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from tests.support.ledger import assert_every_query_answered
from tests.support.servers import ServerProc, serving, spawn, unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

MIX = [
    {
        "name": "local",
        "weight": 3,
        "queries": ["www.example.test", "mail.example.test A", "www.example.test AAAA"],
        "expect": {"rcodes": ["NOERROR"]},
    },
    # www is not blocked: every answer of this class is wrong
    {"name": "wrongly", "queries": ["www.example.test"], "expect": {"addresses": ["0.0.0.0"]}},
    {"name": "miss", "random": {"zone": "example.test"}, "expect": {"rcodes": ["NXDOMAIN"]}},
]


def test_the_compiled_loop_is_built() -> None:
    # The comparison below would compare the Python loop with itself otherwise.
    assert stream_fast.available()


def sockets_agree_with_ledger(d: dict[str, Any]) -> None:
    assert d["sent"] == d["completed"] + d["lost"]
    counters = d["engine_counters"]
    assert counters["socket_sent"] + counters["send_failed"] == d["sent"]
    # an answer after its query's timeout was read too (a busy machine's), counted late
    assert counters["socket_received"] == d["completed"] + d["late"]


def load_once(server: ServerProc, protocol: str, pure: bool, tmp: Path, mp: Any) -> dict[str, Any]:
    if pure:
        mp.setenv("SOAK_LOAD_PURE", "1")  # workers inherit the environment
    else:
        mp.delenv("SOAK_LOAD_PURE", raising=False)
    cfg = LoadConfig(protocol=protocol, flows=3, seed=1, mix=MIX, workers=2)
    address = ("127.0.0.1", server.port_for(protocol))
    return run_load(cfg, address, 2.0, 500.0, base_dir=tmp).to_json_dict()


@pytest.mark.parametrize("protocol", ["tcp", "dot"])
def test_compiled_and_python_loops_count_alike(
    tls_unbound: ServerProc, protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = load_once(tls_unbound, protocol, False, tmp_path / "c", monkeypatch)
    python = load_once(tls_unbound, protocol, True, tmp_path / "p", monkeypatch)
    for d in (compiled, python):
        assert_every_query_answered(d, 1000)
        lat = d["latency_ms"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"] < 2000
    # the same schedule: the same queries of each class, the same answers to them
    assert compiled["rcodes"] == python["rcodes"]
    assert compiled["rcodes"]["NXDOMAIN"] == 200
    for name in ("local", "wrongly", "miss"):
        c, p = compiled["classes"][name], python["classes"][name]
        assert (c["sent"], c["completed"]) == (p["sent"], p["completed"])
        assert c["wrong_answers"] == p["wrong_answers"]
    assert compiled["classes"]["wrongly"]["wrong_answers"] == 200
    assert compiled["connections"]["opened"] == python["connections"]["opened"] == 6


@pytest.mark.parametrize("protocol", ["tcp", "dot"])
def test_a_server_restarted_mid_run_is_reconnected(
    tls_cert: tuple[Path, Path], protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOAK_LOAD_PURE", raising=False)
    cfg = LoadConfig(protocol=protocol, flows=2, timeout_s=0.5, mix=MIX[:1])
    with unbound(tmp_path, tls=tls_cert) as first:
        port = first.port_for(protocol)
        runner = LoadRunner(cfg, ("127.0.0.1", port), base_dir=tmp_path)
        runner.start(300.0, max_duration_s=60.0)
        try:
            wait_for(lambda: runner.totals().completed > 100, 20, "answers before the stop")
            first.stop()
            wait_for(lambda: runner.totals().lost > 0, 20, "queries lost while it is down")
            argv = ["unbound", "-d", "-c", str(tmp_path / "unbound.conf")]
            again = spawn("unbound", argv, tmp_path, first.port, **first.extra_ports)
            with serving(again, "www.example.test.", port):
                before = runner.totals().completed
                wait_for(lambda: runner.totals().completed > before + 100, 20, "answers once back")
                result = runner.stop()
        finally:
            runner.stop()
    d = result.to_json_dict()
    sockets_agree_with_ledger(d)
    assert d["lost"] > 0 and d["completed"] > 200, d
    conns = d["connections"]
    # the two at the start, and two again once the server is back (refusals in between
    # are counted as errors)
    assert conns["opened"] >= 4 and conns["errors"] > 0, conns
