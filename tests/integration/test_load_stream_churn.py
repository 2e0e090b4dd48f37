"""Connection policies that churn (a quota per connection, an idle time, an age) in the
compiled TCP/DoT loop, against real unbound on loopback.

The same churning spec through the compiled loop and through the Python one
(SOAK_LOAD_PURE=1): the same counts to the query, per class; the server's own count of
the queries it received over TCP (unbound-control stats) equal to what each loop sent;
and the connections each loop says it opened equal to the SYNs tcpdump saw reach the
server, and equal between the loops.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soak.load import stream_fast
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from soak.samplers.server import unbound_control
from tests.support import servers
from tests.support.servers import ServerProc, free_port
from tests.support.traffic import tcpdump_lo

pytestmark = pytest.mark.integration

# Quotas that no worker's class count is a multiple of: the last connection of each
# is never spent, so no replacement opens while the run ends (a race either loop may
# win or lose) and the counts of connections are exact.
QUOTA_A, QUOTA_B = 37, 11
MIX = [
    {
        "name": "a",
        "queries": ["www.example.test", "mail.example.test A"],
        "connection": {"queries_per_connection": QUOTA_A, "idle_s": 0.05},
    },
    {
        "name": "b",
        "random": {"zone": "example.test"},
        "expect": {"rcodes": ["NXDOMAIN"]},
        "connection": {"queries_per_connection": QUOTA_B},
    },
]


@contextlib.contextmanager
def unbound_with_control(tmp: Path, cert: tuple[Path, Path]) -> Iterator[tuple[ServerProc, Path]]:
    """unbound with DoT and its remote-control socket: the server's own query counts
    (num.query.tcp is among the extended statistics)."""
    port, dot, doh = free_port(), free_port(), free_port()
    sock = tmp / "control.sock"
    server_lines = servers.unbound_tls_conf(cert[0], cert[1], dot, doh)
    server_lines += "\n    extended-statistics: yes"
    conf = servers.unbound_conf(port, servers.DEFAULT_LOCAL_DATA, 1, server_lines)
    conf = conf.replace(
        "control-enable: no",
        f'control-enable: yes\n    control-interface: "{sock}"\n    control-use-cert: no',
    )
    (tmp / "unbound.conf").write_text(conf)
    argv = ["unbound", "-d", "-c", str(tmp / "unbound.conf")]
    proc = servers.spawn("unbound", argv, tmp, port, dot=dot, doh=doh)
    with servers.serving(proc, "www.example.test.") as s:
        yield s, sock


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, tls_cert: tuple[Path, Path]
) -> Iterator[tuple[ServerProc, Path]]:
    with unbound_with_control(tmp_path_factory.mktemp("unbound"), tls_cert) as s:
        yield s


def tcp_queries(sock: Path) -> int:
    """The queries unbound received over TCP (DoT included), by its own count."""
    stats = dict(
        line.split("=", 1) for line in unbound_control(sock, "stats_noreset", 10).splitlines()
    )
    return int(stats.get("num.query.tcp", "0"))


def syns(pcap: Path, port: int) -> int:
    """Connections opened to `port` in the capture: SYNs without ACK."""
    tcpdump = shutil.which("tcpdump") or "/usr/bin/tcpdump"
    flt = f"dst port {port} and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"
    out = subprocess.run(
        [tcpdump, "-r", str(pcap), "-n", flt], capture_output=True, text=True, check=True
    ).stdout
    return len(out.splitlines())


def churn_once(
    server: tuple[ServerProc, Path], protocol: str, pure: bool, tmp: Path, mp: Any, **cfg: Any
) -> tuple[dict[str, Any], int, int]:
    """One run: its result, the queries the server counted, the SYNs it was sent."""
    proc, sock = server
    if pure:
        mp.setenv("SOAK_LOAD_PURE", "1")  # workers inherit the environment
    else:
        mp.delenv("SOAK_LOAD_PURE", raising=False)
    port = proc.port_for(protocol)
    tmp.mkdir()
    before = tcp_queries(sock)
    config = LoadConfig(protocol=protocol, seed=1, **{"flows": 2, "workers": 2, "mix": MIX, **cfg})
    with tcpdump_lo(port, tmp / "c.pcap"):
        d = run_load(config, ("127.0.0.1", port), 2.0, 500.0, base_dir=tmp).to_json_dict()
    return d, tcp_queries(sock) - before, syns(tmp / "c.pcap", port)


@pytest.mark.parametrize("protocol", ["tcp", "dot"])
def test_a_quota_per_connection_churns_alike_on_both_loops(
    server: tuple[ServerProc, Path], protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stream_fast.available()  # or this compares the Python loop with itself
    runs = {
        pure: churn_once(server, protocol, pure, tmp_path / str(pure), monkeypatch)
        for pure in (False, True)
    }
    (compiled, c_queries, c_syns), (python, p_queries, p_syns) = runs[False], runs[True]
    for d, queries in ((compiled, c_queries), (python, p_queries)):
        assert d["sent"] == 1000 == d["completed"] and d["lost"] == 0, d
        assert queries == 1000  # the server's own count: every query reached it once
        assert d["engine_counters"] == {
            "socket_sent": 1000,
            "socket_received": 1000,
            "send_failed": 0,
        }
        assert d["connections"]["errors"] == 0
    for name in ("a", "b"):
        c, p = compiled["classes"][name], python["classes"][name]
        assert (c["sent"], c["completed"]) == (p["sent"], p["completed"])
    assert compiled["rcodes"] == python["rcodes"]
    # Each worker has one slot per class (2 flows, 2 classes that churn): a class's n
    # queries take ceil(n / quota) connections there; over two workers at least this
    # many, and at most one more per worker and class.
    least = sum(
        math.ceil(compiled["classes"][name]["sent"] / quota)
        for name, quota in (("a", QUOTA_A), ("b", QUOTA_B))
    )
    opened = compiled["connections"]["opened"]
    assert least <= opened <= least + 4
    assert opened == c_syns == python["connections"]["opened"] == p_syns
    if protocol == "dot":
        # Every connection but each slot's first (4) resumes its slot's session, but for
        # the successor of a first one that spent its quota still opening (a handshake
        # slower than 11 queries' time: seen once, 55). Handing on an unresumable session
        # gave 47-52 here.
        for d in (compiled, python):
            assert opened - 6 <= d["connections"]["tls_resumed"] <= opened - 4, d["connections"]


def test_an_age_churns_connections_seen_at_the_server(
    server: tuple[ServerProc, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reconnect_every_s: each connection retires at 0.45 s of age, its answers kept. Not
    0.5: the fifth would retire as the 2-s run ends, and its replacement's SYN might
    leave before the end while its handshake ends after it (seen once: 5 SYNs, 4
    opened)."""
    mix = [{**MIX[0], "connection": {"reconnect_every_s": 0.45}}]
    d, queries, seen = churn_once(
        server, "dot", False, tmp_path / "c", monkeypatch, mix=mix, flows=1, workers=1
    )
    assert d["sent"] == 1000 == d["completed"] == queries
    conns = d["connections"]
    # one at the start and one at every 0.45 s of age over 2 s (fewer if the loop was slow)
    assert 3 <= conns["opened"] <= 5 and conns["errors"] == 0, conns
    assert conns["opened"] == seen
    assert conns["tls_resumed"] >= conns["opened"] - 2  # each offered its slot's session


def test_hang_ups_run_the_python_loop_and_say_so(
    server: tuple[ServerProc, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    mix = [{**MIX[0], "connection": {"queries_per_connection": 10, "hangup_fraction": 0.5}}]
    config = LoadConfig(protocol="tcp", flows=1, mix=mix)
    d = run_load(config, ("127.0.0.1", server[0].port), 1.0, 200.0, base_dir=tmp_path)
    result = d.to_json_dict()
    assert result["connections"]["hung_up"] > 0  # only the Python loop hangs up
    assert "tcp runs the Python loop (a connection policy hangs up" in capfd.readouterr().err
