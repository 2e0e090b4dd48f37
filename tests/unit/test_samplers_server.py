"""unbound's own figures from its remote control's `stats_noreset` (a real reply, recorded
from Debian's unbound 1.17 with extended-statistics), and the protocol spoken to a socket."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from soak.samplers.server import (
    parse_bind_stats,
    parse_pdns_stats,
    parse_unbound_stats,
    unbound_control,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "unbound-stats-noreset.txt"


def test_the_server_counts_and_cache_figures_from_a_real_reply() -> None:
    fields = parse_unbound_stats(FIXTURE.read_text())
    assert fields == {"server_queries": 30.0, "cache_bytes": 132144.0, "cache_entries": 0.0}


def test_without_extended_statistics_only_the_query_count() -> None:
    text = "thread0.num.queries=5\ntotal.num.queries=5\ntime.now=1.5\n"
    assert parse_unbound_stats(text) == {"server_queries": 5.0}


def serve_once(path: Path, reply: bytes) -> tuple[threading.Thread, list[bytes]]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    asked: list[bytes] = []

    def answer() -> None:
        conn, _ = server.accept()
        with conn, server:
            asked.append(conn.recv(100))
            conn.sendall(reply)

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    return t, asked


def test_the_control_protocol_is_spoken_as_unbound_control_speaks_it(tmp_path: Path) -> None:
    t, asked = serve_once(tmp_path / "c.sock", b"total.num.queries=7\n")
    assert unbound_control(tmp_path / "c.sock", "stats_noreset", 5.0) == "total.num.queries=7\n"
    t.join(5)
    assert asked == [b"UBCT1 stats_noreset\n"]


def test_an_error_reply_is_an_error(tmp_path: Path) -> None:
    t, _ = serve_once(tmp_path / "c.sock", b"error unknown command 'x'\n")
    with pytest.raises(RuntimeError, match="unknown command"):
        unbound_control(tmp_path / "c.sock", "x", 5.0)
    t.join(5)


def test_binds_statistics_channel_gives_the_queries_it_received() -> None:
    """/json/v1/server as BIND 9.18 answers it (the sections that matter): opcodes.QUERY
    is the queries received (an UPDATE is another opcode); none without it."""
    doc = {
        "json-stats-version": "1.7",
        "opcodes": {"QUERY": 3612, "IQUERY": 0, "UPDATE": 4},
        "nsstats": {"Requestv4": 3616, "ReqEdns0": 3612, "QrySuccess": 3612},
    }
    assert parse_bind_stats(doc) == {"server_queries": 3612.0}
    assert parse_bind_stats({"nsstats": {"Requestv4": 3}}) == {}
    assert parse_bind_stats({"opcodes": {"QUERY": True}}) == {}
    assert parse_bind_stats([]) == {}


def test_pdns_statistics_give_the_udp_and_tcp_queries_it_received() -> None:
    """/api/v1/servers/localhost/statistics as pdns_server 4.7 answers it: values are
    strings; udp-queries plus tcp-queries; none unless both are there."""
    doc = [
        {"name": "corrupt-packets", "type": "StatisticItem", "value": "0"},
        {"name": "tcp-queries", "type": "StatisticItem", "value": "12"},
        {"name": "udp-queries", "type": "StatisticItem", "value": "3600"},
        {"name": "udp4-queries", "type": "StatisticItem", "value": "3600"},
        {"name": "response-by-qtype", "type": "MapStatisticItem", "value": []},
    ]
    assert parse_pdns_stats(doc) == {"server_queries": 3612.0}
    assert parse_pdns_stats(doc[2:]) == {}  # no tcp-queries
    assert parse_pdns_stats([{"name": "udp-queries", "value": "x"}, doc[1]]) == {}
    assert parse_pdns_stats({"udp-queries": 3}) == {}
