"""Connection policies that churn (a quota per connection, an idle time, an age) and
hang up in the compiled TCP/DoT loop, against real unbound on loopback.

The same churning spec through the compiled loop and through the Python one
(SOAK_LOAD_PURE=1): the same counts to the query, per class; the server's own count of
the queries it received over TCP (unbound-control stats) equal to what each loop sent;
and the connections each loop says it opened equal to the SYNs tcpdump saw reach the
server, and equal between the loops; with hang-ups, the same queries abandoned per
class and the same connections hung up, as many as the policy says.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from soak.load import stream_fast
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from tests.support.ledger import assert_every_query_answered
from tests.support.servers import ServerProc
from tests.support.traffic import tcpdump_lo
from tests.support.unbound_counts import unbound_queries

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


def syns(pcap: Path, port: int) -> int:
    """Connections opened to `port` in the capture: SYNs without ACK."""
    tcpdump = shutil.which("tcpdump") or "/usr/bin/tcpdump"
    flt = f"dst port {port} and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"
    out = subprocess.run(
        [tcpdump, "-r", str(pcap), "-n", flt], capture_output=True, text=True, check=True
    ).stdout
    return len(out.splitlines())


def churn_once(
    server: tuple[ServerProc, Path],
    protocol: str,
    pure: bool,
    tmp: Path,
    mp: Any,
    rate_qps: float = 500.0,
    duration_s: float = 2.0,
    **cfg: Any,
) -> tuple[dict[str, Any], int, int]:
    """One run: its result, the queries the server counted, the SYNs it was sent."""
    proc, sock = server
    if pure:
        mp.setenv("SOAK_LOAD_PURE", "1")  # workers inherit the environment
    else:
        mp.delenv("SOAK_LOAD_PURE", raising=False)
    port = proc.port_for(protocol)
    tmp.mkdir()
    before = unbound_queries(sock)[1]
    config = LoadConfig(protocol=protocol, seed=1, **{"flows": 2, "workers": 2, "mix": MIX, **cfg})
    with tcpdump_lo(port, tmp / "c.pcap"):
        d = run_load(config, ("127.0.0.1", port), duration_s, rate_qps, base_dir=tmp)
    return d.to_json_dict(), unbound_queries(sock)[1] - before, syns(tmp / "c.pcap", port)


@pytest.mark.parametrize("protocol", ["tcp", "dot"])
def test_a_quota_per_connection_churns_alike_on_both_loops(
    counted_unbound: tuple[ServerProc, Path],
    protocol: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert stream_fast.available()  # or this compares the Python loop with itself
    runs = {
        pure: churn_once(counted_unbound, protocol, pure, tmp_path / str(pure), monkeypatch)
        for pure in (False, True)
    }
    (compiled, c_queries, c_syns), (python, p_queries, p_syns) = runs[False], runs[True]
    for d, queries in ((compiled, c_queries), (python, p_queries)):
        assert_every_query_answered(d, 1000)
        assert queries == 1000  # the server's own count: every query reached it once
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
    counted_unbound: tuple[ServerProc, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reconnect_every_s: each connection retires at 0.45 s of age, its answers kept. Not
    0.5: the fifth would retire as the 2-s run ends, and its replacement's SYN might
    leave before the end while its handshake ends after it (seen once: 5 SYNs, 4
    opened)."""
    mix = [{**MIX[0], "connection": {"reconnect_every_s": 0.45}}]
    d, queries, seen = churn_once(
        counted_unbound, "dot", False, tmp_path / "c", monkeypatch, mix=mix, flows=1, workers=1
    )
    assert d["sent"] == 1000 == d["completed"] == queries
    conns = d["connections"]
    # one at the start and one at every 0.45 s of age over 2 s (fewer if the loop was slow)
    assert 3 <= conns["opened"] <= 5 and conns["errors"] == 0, conns
    assert conns["opened"] == seen
    assert conns["tls_resumed"] >= conns["opened"] - 2  # each offered its slot's session


# Hang-ups (one worker, one slot per class): class a's every second connection hangs
# up after 4 queries, each of class b's after 7. The reset follows a connection's last
# query in the same turn, before anything is read, so each hung-up connection abandons
# its last query, and only it if its earlier answers are in by then: a class's queries
# leave at least 16 ms apart over TCP (60 q/s), 50 ms over DoT (20 q/s). Over DoT at
# 60 q/s one or two of 30 connections abandoned two queries on both loops alike (an
# answer more than 33 ms late); at 20 q/s none did in 3 runs; over TCP at 60 q/s, with
# the machine busy, one did (so the test bounds what each loop abandons, not its sum).
HANG_A, HANG_B = 4, 7
HANGING_MIX = [
    {**MIX[0], "connection": {"queries_per_connection": HANG_A, "hangup_fraction": 0.5}},
    {**MIX[1], "connection": {"queries_per_connection": HANG_B, "hangup_fraction": 1.0}},
]


def hung_up_expected(sent: int, quota: int, fraction: float) -> int:
    """The connections of a class that carry `sent` queries and hang up: of those spent
    (the last one never is: `sent` is no multiple of the quota), the share tcp.hangs_up
    picks (the compiled loop's hangs_up is the same sum)."""
    spent = sent // quota
    return sum(1 for n in range(spent) if math.floor((n + 1) * fraction) > math.floor(n * fraction))


def hung_up_alike(
    compiled_run: tuple[dict[str, Any], int, int],
    python_run: tuple[dict[str, Any], int, int],
    total: int,
) -> None:
    """HANGING_MIX on both loops (each run: its result, the queries the server counted,
    the SYNs tcpdump saw): the same connections hung up, opened and seen, and each
    class's queries abandoned within what its hung-up connections carried."""
    (compiled, c_queries, c_syns), (python, p_queries, p_syns) = compiled_run, python_run
    hung = 0
    for name, quota, fraction in (("a", HANG_A, 0.5), ("b", HANG_B, 1.0)):
        c, p = compiled["classes"][name], python["classes"][name]
        assert c["sent"] == p["sent"] and c["sent"] % quota != 0, (c, p)
        hung_up = hung_up_expected(c["sent"], quota, fraction)
        assert hung_up > 0
        for got in (c, p):
            # Each hung-up connection abandons its last query, and an earlier one whose
            # answer is not in yet (a busy machine's late answer): never more than the
            # queries it carried. Nothing else is lost.
            assert hung_up <= got["abandoned"] <= hung_up * quota, (name, got)
            assert (got["completed"], got["lost"]) == (c["sent"] - got["abandoned"], 0), got
        hung += hung_up
    spent = sum(compiled["classes"][n]["sent"] // q for n, q in (("a", HANG_A), ("b", HANG_B)))
    for d, syn, queries in ((compiled, c_syns, c_queries), (python, p_syns, p_queries)):
        assert d["sent"] == total == d["completed"] + d["abandoned"], d
        conns = d["connections"]
        assert (conns["hung_up"], conns["errors"]) == (hung, 0), conns
        assert conns["opened"] == spent + 2 == syn, (conns, syn)  # each slot's last one too
        assert d["engine_counters"] == {
            "socket_sent": total,
            "socket_received": d["completed"],
            "send_failed": 0,
        }
        # the server read every query but those a reset may have beaten
        assert d["completed"] <= queries <= total
        assert sum(d["rcodes"].values()) == d["completed"]
    assert compiled["rcodes"].keys() == python["rcodes"].keys()


@pytest.mark.parametrize(
    ("protocol", "rate_qps", "duration_s"), [("tcp", 60.0, 3.0), ("dot", 20.0, 4.5)]
)
def test_hang_ups_abandon_alike_on_both_loops(
    counted_unbound: tuple[ServerProc, Path],
    protocol: str,
    rate_qps: float,
    duration_s: float,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert stream_fast.available()  # or this compares the Python loop with itself
    cfg = {"mix": HANGING_MIX, "flows": 2, "workers": 1}
    total = round(rate_qps * duration_s)
    runs = {}
    for pure in (False, True):
        tmp = tmp_path / str(pure)
        runs[pure] = churn_once(
            counted_unbound, protocol, pure, tmp, monkeypatch, rate_qps, duration_s, **cfg
        )
    hung_up_alike(runs[False], runs[True], total)


def test_hang_ups_run_the_compiled_loop_and_nothing_is_said(
    counted_unbound: tuple[ServerProc, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Hang-ups no longer go to the Python loop (which would say so on stderr)."""
    config = LoadConfig(protocol="tcp", flows=1, mix=HANGING_MIX[:1])
    d = run_load(config, ("127.0.0.1", counted_unbound[0].port), 1.0, 200.0, base_dir=tmp_path)
    assert d.to_json_dict()["connections"]["hung_up"] > 0
    assert "runs the Python loop" not in capfd.readouterr().err
