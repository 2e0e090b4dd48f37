"""Replays of real captures against real servers: a dnstap capture of `soak load`
driving unbound, a tcpdump of dnsperf, a TCP replay's connections as the server
sees them, and fresh names per loop as the server receives them."""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import dns.rdatatype
import pytest

from soak.load.replay import Replay, format_replay
from soak.traffic.capture_file import TCP, UDP, Builder, Capture, Query, qname_text, write_capture
from soak.traffic.dnstap import Listener
from soak.traffic.pcap import read_pcap
from soak.traffic.replay_config import ReplayConfig
from soak.traffic.sources import finish
from tests.support.servers import unbound
from tests.support.traffic import PROBE, TapRecording, named_dnstap, tcpdump_lo, unbound_dnstap
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

SOAK = str(Path(sys.executable).parent / "soak")
LINES = ["mail.example.test A", "ns.example.test A", "www.example.test AAAA", "example.test MX"]


def soak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SOAK, *args], capture_output=True, text=True, timeout=120)


def soak_load_json(port: int, qfile: Path) -> dict[str, int]:
    """`soak load` of `qfile`'s lines in turn, 300 q/s for 2 s over 4 UDP flows."""
    proc = soak(
        "load", "--server", f"127.0.0.1:{port}", "--queries", str(qfile),
        "--rate", "300", "--duration", "2", "--flows", "4", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result: dict[str, int] = json.loads(proc.stdout)
    return result


def subdir(tmp: Path, name: str) -> Path:
    path = tmp / name
    path.mkdir(exist_ok=True)
    return path


def qtype_counts(c: Capture) -> dict[str, int]:
    return dict(collections.Counter(dns.rdatatype.to_text(q.qtype) for q in c.queries))  # type: ignore[arg-type]


def per_client(c: Capture) -> list[int]:
    counts = collections.Counter(q.client for q in c.queries)
    return [counts[i] for i in range(len(c.clients))]


def replay_json(tmp: Path, capture: Capture, port: int, *extra: str) -> dict[str, object]:
    path = tmp / "c.soakcap"
    write_capture(path, capture)
    proc = soak("load", "--server", f"127.0.0.1:{port}", "--replay", str(path), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def check_replay_matches(d: dict[str, object], capture: Capture) -> None:
    """The replay sent each client's queries and the capture's qtype mix, all answered."""
    assert d["sent_per_client"] == per_client(capture)
    classes = d["classes"]
    assert isinstance(classes, dict)
    assert {k: v["sent"] for k, v in classes.items()} == qtype_counts(capture)
    assert d["completed"] == d["sent"] == d["due"] == len(capture.queries)
    assert d["problems"] == []


def test_dnstap_capture_of_soak_load_replays_its_mix(tmp_path: Path) -> None:
    qfile = tmp_path / "q.txt"
    qfile.write_text("\n".join(LINES) + "\n")
    recording = TapRecording(tmp_path / "tap.sock")
    try:
        with unbound_dnstap(tmp_path, recording.listener.path) as a:
            sent = soak_load_json(a.port, qfile)["sent"]
            recording.wait(sent)
    finally:
        recording.close()
    capture = finish(recording.builder, "dnstap")
    check_load_mix(capture, sent)
    with unbound(subdir(tmp_path, "b")) as b:
        check_replay_matches(replay_json(tmp_path, capture, b.port), capture)


def check_load_mix(capture: Capture, sent: int) -> None:
    """The capture holds what `soak_load_json` sent of LINES, and the readiness probe."""
    load_part = [q for q in capture.queries if (qname_text(q.qname), q.qtype) != PROBE]
    # The load cycles through the file's lines: the capture holds that mix exactly.
    mix = collections.Counter(dns.rdatatype.to_text(q.qtype) for q in load_part)  # type: ignore[arg-type]
    assert mix == {
        "A": sent // 4 * 2 + min(sent % 4, 2),
        "AAAA": sent // 4 + (sent % 4 > 2),
        "MX": sent // 4,
    }
    assert len(load_part) == sent
    assert len({q.client for q in load_part}) == 4  # the load's four source ports


@pytest.mark.parametrize(
    ("recursion", "tap"),
    [(False, "auth query;"), (True, "client query;")],
    ids=["authoritative-auth-query", "recursive-client-query"],
)
def test_dnstap_capture_of_bind9(tmp_path: Path, recursion: bool, tap: str) -> None:
    """BIND 9.18 writes its clients' queries as dnstap: an authoritative server's as
    AUTH_QUERY (`dnstap { auth query; }`), a recursive one's (RD set) as CLIENT_QUERY."""
    qfile = tmp_path / "q.txt"
    qfile.write_text("\n".join(LINES) + "\n")
    recording = TapRecording(tmp_path / "tap.sock")
    try:
        with named_dnstap(tmp_path, recording.listener.path, recursion=recursion, tap=tap) as a:
            sent = soak_load_json(a.port, qfile)["sent"]
            recording.wait(sent)
    finally:
        recording.close()
    check_load_mix(finish(recording.builder, "dnstap"), sent)


def test_authoritative_bind9_selects_no_client_query(tmp_path: Path) -> None:
    """Why `dnstap { client query; }` gives nothing from an authoritative BIND: it logs
    a query as CLIENT_QUERY only when recursion is available to the client (else
    AUTH_QUERY), while its responses to RD queries are CLIENT_RESPONSE. So every
    response of the load arrives, and no query."""
    qfile = tmp_path / "q.txt"
    qfile.write_text("\n".join(LINES) + "\n")
    listener = Listener(tmp_path / "tap.sock")
    builder = Builder("dnstap")
    want = [-1]  # the responses to wait for, once known; 0: stop

    def answered() -> bool:
        return want[0] >= 0 and builder.responses >= want[0]

    recorder = threading.Thread(target=listener.record, args=(120, builder, answered))
    recorder.start()
    tap = "client query; client response;"
    try:
        with named_dnstap(tmp_path, listener.path, recursion=False, tap=tap) as a:
            answers = soak_load_json(a.port, qfile)["completed"] + 1  # and the readiness probe
            want[0] = answers
            recorder.join(120)
    finally:
        want[0] = 0
        recorder.join()
        listener.close()
    assert builder.responses >= answers > 1
    assert len(builder) == 0


def test_pcap_of_dnsperf_udp_and_tcp_replays(tmp_path: Path) -> None:
    qfile = tmp_path / "q.txt"
    qfile.write_text("\n".join(LINES) + "\n")
    pcap = tmp_path / "lo.pcap"
    with unbound(subdir(tmp_path, "a")) as a, tcpdump_lo(a.port, pcap):
        base = ["dnsperf", "-s", "127.0.0.1", "-p", str(a.port), "-d", str(qfile)]
        udp = subprocess.run(
            [*base, "-l", "2", "-Q", "200", "-c", "3"], capture_output=True, text=True
        )
        tcp = subprocess.run(
            [*base, "-l", "1", "-Q", "100", "-c", "2", "-m", "tcp"], capture_output=True, text=True
        )
        sent = [sent_by(p.stdout) for p in (udp, tcp)]
        wait_for(lambda: len(read_pcap(pcap)) == sum(sent), 60, "tcpdump wrote every query", 0.1)
    out = tmp_path / "cap.soakcap"
    proc = soak("capture", "--from", str(pcap), "--clients-by-port", "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["transports"] == {"udp": sent[0], "tcp": sent[1]}
    # Without --json: lines for a reader, not a Python dict.
    text = soak("capture", "--from", str(pcap), "--clients-by-port", "-o", str(out)).stdout
    assert text.splitlines() == [
        f"{out}: {sum(sent):,} queries from {info['clients']:,} client(s)"
        f" over {info['duration_s']:g} s",
        "  by type: " + ", ".join(f"{t} {n:,}" for t, n in info["qtypes"].items()),
        f"  by transport: udp {sent[0]:,}, tcp {sent[1]:,}",
    ], text
    from soak.traffic.capture_file import read_capture

    capture = read_capture(out)
    tcp_conns = {(q.client, q.conn) for q in capture.queries if q.transport == TCP}
    assert len(tcp_conns) >= 2
    with unbound(subdir(tmp_path, "b")) as b:
        d = replay_json(tmp_path, capture, b.port)
    check_replay_matches(d, capture)
    conns = d["connections"]
    assert isinstance(conns, dict)
    assert conns["opened"] == len(tcp_conns)  # one per captured connection, reused


def sent_by(dnsperf_out: str) -> int:
    found = re.search(r"Queries sent:\s+(\d+)", dnsperf_out)
    assert found, dnsperf_out
    return int(found.group(1))


def socket_fds(pid: int) -> int:
    fd_dir = Path(f"/proc/{pid}/fd")
    return sum(1 for f in fd_dir.iterdir() if os.readlink(f).startswith("socket:"))


def bursts(clients: int, gap_ns: int) -> Capture:
    """Each client asks 10 queries 50 ms apart, falls silent for `gap_ns`, asks 10 more."""
    qs = []
    for burst in range(2):
        for k in range(10):
            for c in range(clients):
                t = burst * (450_000_000 + gap_ns) + k * 50_000_000 + c * 1_000_000
                qs.append(Query(t, c, 0, 0x0100, 1, UDP, b"\x03www\x07example\x04test\x00"))
    qs.sort(key=lambda q: q.offset_ns)
    return Capture("t", [f"10.0.0.{c}" for c in range(clients)], qs)


def test_tcp_replay_one_connection_per_client_until_idle(tmp_path: Path) -> None:
    capture = bursts(3, 1_500_000_000)
    cfg = ReplayConfig(file=tmp_path / "unused", transport="tcp", idle_timeout_s=0.4)
    with unbound(tmp_path) as server:
        base = socket_fds(server.pid)
        replay = Replay(cfg, capture, "127.0.0.1", server.port, 2.0)
        result = []
        t = threading.Thread(target=lambda: result.append(replay.run(None)))
        t.start()
        # The server holds one connection per client through the burst, none in the silence.
        wait_for(lambda: socket_fds(server.pid) == base + 3, 10, "3 client connections", 0.01)
        wait_for(lambda: socket_fds(server.pid) == base, 10, "the connections idled out", 0.01)
        wait_for(lambda: socket_fds(server.pid) == base + 3, 10, "3 new connections", 0.01)
        t.join(30)
        assert not t.is_alive()
    d = result[0].as_dict()
    assert d["connections"]["opened"] == 6
    assert d["connections"]["idled_out"] == 3
    # The six set-up times, kept as a bounded histogram; the book's whole-µs dict emptied.
    assert 0 < d["connections"]["handshake_p50_us"] <= d["connections"]["handshake_max_us"]
    assert sum(replay.conns.handshake.counts.values()) == 6
    assert replay.conns.book.handshake_us == {}
    # The totals keep counts, not a day of latencies (those go out with each window).
    assert [cw.completed for cw in replay.ledger.per_class] == [60]
    assert all(cw.lat_us == {} for cw in replay.ledger.per_class)
    assert d["completed"] == d["sent"] == 60 and d["sent_per_client"] == [20, 20, 20]
    # The connections' own counts: every query written whole, every answer read.
    want = {"socket_sent": 60, "socket_received": 60, "send_failed": 0}
    assert d["engine_counters"] == want, d


def test_two_loops_with_rewriting_send_fresh_names(tmp_path: Path) -> None:
    names = [f"n{i}.example.test" for i in range(5)]
    qs = [Query(k * 20_000_000, k % 2, 0, 0x0100, 1, UDP, _wire(names[k % 5])) for k in range(10)]
    capture = Capture("t", ["10.0.0.1", "10.0.0.2"], qs)
    cfg = ReplayConfig.model_validate(
        {"file": "unused", "loops": 2, "rewrite": {"zones": ["example.test."]}}
    )
    sock = tmp_path / "tap.sock"
    listener = Listener(sock)
    seen = Builder("dnstap", by_port=True)
    done = threading.Event()

    def heard() -> bool:
        return (
            done.is_set() and sum(1 for r in seen._raw if (qname_text(r[6]), r[5]) != PROBE) >= 20
        )

    recorder = threading.Thread(target=listener.record, args=(120, seen, heard))
    recorder.start()
    try:
        with unbound_dnstap(tmp_path, sock) as b:
            result = Replay(cfg, capture, "127.0.0.1", b.port, 2.0, seed=7).run(None)
            done.set()
            recorder.join(120)
    finally:
        done.set()
        listener.close()
    assert result.loops == 2
    heard_queries = [q for q in finish(seen, "t").queries if qname_text(q.qname) != PROBE[0]]
    got = [qname_text(q.qname) for q in heard_queries]
    first, second = got[:10], got[10:]
    # rename_clients: the second loop's two clients come from new source ports
    ports = [{q.client for q in heard_queries[:10]}, {q.client for q in heard_queries[10:]}]
    assert len(ports[0]) == len(ports[1]) == 2 and not ports[0] & ports[1]
    assert first == [names[k % 5] + "." for k in range(10)]  # loop 0 as captured
    assert len(second) == 10 and not set(second) & set(first)
    assert all(re.fullmatch(r"[0-9a-f]{12}\.example\.test\.", n) for n in second)
    # one new name per captured name: the capture's repeats stay repeats
    assert len(set(second)) == 5
    assert [second.index(n) for n in second] == [first.index(n) for n in first]


def _wire(name: str) -> bytes:
    import dns.name

    out = dns.name.from_text(name).to_wire()
    assert out is not None
    return out


@pytest.mark.parametrize("transport", ["dot", "doh"])
def test_tls_replay_per_client_connections(tmp_path: Path, transport: str) -> None:
    from tests.support.tls import make_cert

    capture = bursts(2, 100_000_000)
    cfg = ReplayConfig(file=tmp_path / "unused", transport=transport, idle_timeout_s=30)  # type: ignore[arg-type]
    with unbound(tmp_path, tls=make_cert(tmp_path)) as server:
        port = server.port_for(transport)
        d = Replay(cfg, capture, "127.0.0.1", port, 2.0).run(None).as_dict()
    assert d["completed"] == d["sent"] == 40 and d["sent_per_client"] == [20, 20]
    assert d["connections"]["opened"] == 2 and d["connections"]["errors"] == 0
    want = {"socket_sent": 40, "socket_received": 40, "send_failed": 0}
    assert d["engine_counters"] == want, d


def test_doh_over_the_servers_streams_waits_on_its_connection(tmp_path: Path) -> None:
    """unbound with `http-max-streams: 1` lets a DoH connection carry one query at a
    time (its SETTINGS): a client asking two at once on an open connection keeps it, the
    second waiting for the first's stream to end, as an HTTP/2 client does: one
    connection, nothing refused or lost (test_replay_doh_full.py: both loops)."""
    from tests.support.tls import make_cert

    www = b"\x03www\x07example\x04test\x00"
    times_ns = [0, 300_000_000, 300_000_000, 600_000_000, 600_000_000]
    capture = Capture("t", ["10.0.0.1"], [Query(t, 0, 0, 0x0100, 1, UDP, www) for t in times_ns])
    cfg = ReplayConfig(file=tmp_path / "unused", transport="doh", idle_timeout_s=30)
    cert = make_cert(tmp_path)
    with unbound(tmp_path, tls=cert, tls_options="http-max-streams: 1") as server:
        d = Replay(cfg, capture, "127.0.0.1", server.port_for("doh"), 2.0).run(None).as_dict()
    assert d["completed"] == d["sent"] == 5 and d["lost"] == 0, d
    conns = d["connections"]
    assert conns["errors"] == 0 and conns["opened"] == 1, conns
    assert conns["streams_reset"] == 0, conns


def test_clients_past_the_servers_tcp_slots_lose_every_query_and_are_named(
    tmp_path: Path,
) -> None:
    """unbound with 10 TCP slots (`incoming-num-tcp`, one thread) and 40 TCP clients, each
    with a connection it keeps: the connections past its slots wait unread in its
    backlog, their queries are lost, and the replay says how many clients lost every
    query, from the same losses as its ledger."""
    www = b"\x03www\x07example\x04test\x00"
    qs = [Query(k * 2_500_000, k % 40, 0, 0x0100, 1, TCP, www) for k in range(1200)]
    capture = Capture("t", [f"10.0.0.{c}" for c in range(40)], qs)
    cfg = ReplayConfig(file=tmp_path / "unused", transport="tcp", idle_timeout_s=30)
    with unbound(tmp_path, tcp_slots=10) as server:
        result = Replay(cfg, capture, "127.0.0.1", server.port, 0.5).run(None)
    d = result.as_dict()
    assert sum(d["lost_per_client"]) == d["lost"] > 0 and d["sent"] == 1200, d
    assert 0 < d["clients_all_lost"] <= 40 - 10, d
    assert d["lost_per_client"].count(0) >= 1, d  # and some clients had every answer
    # The sockets' counts hold the ledger where connections wait unread: each query
    # taken by its socket or counted failed, no more answers than were read.
    c = d["engine_counters"]
    assert c["socket_sent"] + c["send_failed"] == d["sent"], d
    assert d["completed"] <= c["socket_received"], d
    text = format_replay(result, "unbound")
    assert f"Clients with every query lost: {d['clients_all_lost']} of 40" in text, text


def test_udp_sockets_idle_out_too(tmp_path: Path) -> None:
    """A capture's clients may outnumber the file descriptors: a UDP client's socket
    closes after idle_timeout_s with nothing in flight, and opens again when it asks."""
    www = b"\x03www\x07example\x04test\x00"
    qs = [Query(k * 50_000_000, k % 30, 0, 0x0100, 1, UDP, www) for k in range(60)]
    capture = Capture("t", [f"10.0.0.{c}" for c in range(30)], qs)
    cfg = ReplayConfig(file=tmp_path / "unused", idle_timeout_s=0.2)
    with unbound(tmp_path) as server:
        d = Replay(cfg, capture, "127.0.0.1", server.port, 2.0).run(None).as_dict()
    assert d["completed"] == d["sent"] == 60 and d["sent_per_client"] == [2] * 30
    assert d["client_sockets_peak"] < 15  # 30 clients, never all open at once
