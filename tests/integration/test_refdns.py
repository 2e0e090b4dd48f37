"""The reference Go DNS server (testbed/refdns), the real binary on loopback.

What the soak tests and the demo rely on: its DNS paths, its API and token, its
/metrics (the Go runtime's own series), the query log's shedding and trimming, and
the format-1 -> format-2 migration of its data directory.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import httpx
import pytest

from soak.samplers.promexpr import parse_expr, parse_samples
from tests.support.refdns import api_get, refdns, refdns_binary
from tests.support.servers import ServerProc, dnsmasq_upstream, free_port, spawn

pytestmark = pytest.mark.integration


def ask(server: ServerProc, name: str, rtype: str = "A", tcp: bool = False) -> dns.message.Message:
    query = dns.message.make_query(name, rtype)
    send = dns.query.tcp if tcp else dns.query.udp
    reply: dns.message.Message = send(query, "127.0.0.1", port=server.port, timeout=2.0)
    return reply


def addresses(reply: dns.message.Message) -> list[str]:
    return sorted(rr.to_text() for rrset in reply.answer for rr in rrset)


def wait_until(check: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s")


def metrics(server: ServerProc) -> str:
    return httpx.get(f"http://127.0.0.1:{server.extra_ports['api']}/metrics", timeout=5).text


def prom(text: str, expr: str) -> float:
    """The value soak's prom sampler maps `expr` to (-1 when nothing matches)."""
    value = parse_expr(expr).evaluate(parse_samples(text))
    return -1.0 if value is None else value


@contextlib.contextmanager
def list_server(body: bytes) -> Iterator[str]:
    """A block list served over HTTP on loopback."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hosts.txt"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_dns_paths_api_and_metrics(tmp_path: Path) -> None:
    hosts = b"# a hosts list\n0.0.0.0 listed.test\n0.0.0.0 ads.listed.example\n"
    with (
        dnsmasq_upstream(tmp_path) as up,
        list_server(hosts) as url,
        refdns(tmp_path / "data", f"-blocklist={url}", upstream_port=up.port) as srv,
    ):
        assert addresses(ask(srv, "www.home.arpa")) == ["192.168.1.10"]
        assert ask(srv, "nothing.home.arpa").rcode() == dns.rcode.NXDOMAIN
        assert addresses(ask(srv, "x.blocked.example")) == ["0.0.0.0"]
        assert addresses(ask(srv, "x.blocked.example", "AAAA")) == ["::"]
        # The HTTP list is swapped in after the starter list; wait for it.
        wait_until(lambda: addresses(ask(srv, "sub.listed.test")) == ["0.0.0.0"])
        assert addresses(ask(srv, "www.example.com")) == ["192.0.2.1"]
        assert addresses(ask(srv, "www.example.com", tcp=True)) == ["192.0.2.1"]

        assert api_get(srv, "/stats/summary", token="wrong").status_code == 401
        summary = api_get(srv, "/stats/summary").json()
        assert summary["queries"]["forwarded"] == 1  # the TCP ask came from the cache
        assert summary["queries"]["cached"] == 1
        assert summary["blocklist_entries"] == 5  # the starter list's 3 and the URL's 2
        wait_until(lambda: len(api_get(srv, "/queries?limit=100").json()) >= 8)
        rows = api_get(srv, "/queries?limit=100").json()
        assert {r["action"] for r in rows} >= {"local", "blocked", "forwarded", "cached"}
        assert (
            httpx.get(f"http://127.0.0.1:{srv.extra_ports['api']}/healthz/ready").status_code == 200
        )

        text = metrics(srv)
        assert prom(text, "go_goroutines") > 0
        assert prom(text, "go_memstats_heap_inuse_bytes") > 0
        assert prom(text, "process_resident_memory_bytes") > 0
        assert prom(text, 'sum(refdns_querylog_dropped_total{stage="queue"})') == 0


def test_query_log_sheds_when_full_and_trims(tmp_path: Path) -> None:
    # A slow disk (5 ms a row, one row a transaction: at most 200 rows/s) behind a
    # 16-event queue: a burst of 400 queries must shed, and DNS answers them all.
    args = ["-querylog-slow-disk=5ms", "-querylog-batch=1", "-querylog-queue=16",
            "-querylog-max-rows=10", "-querylog-trim-interval=200ms"]  # fmt: skip
    with refdns(tmp_path / "data", *args) as srv:
        for i in range(400):
            assert addresses(ask(srv, f"h{i % 4}.blocked.example")) == ["0.0.0.0"]
        dropped = prom(metrics(srv), 'sum(refdns_querylog_dropped_total{stage="queue"})')
        assert dropped > 0
        # Every event is either written or counted as dropped, once the queue drains.
        answered = prom(metrics(srv), "sum(refdns_queries_total)")
        assert answered >= 400  # and the readiness probe's
        wait_until(
            lambda: prom(metrics(srv), "refdns_querylog_written_total") + dropped == answered
        )
        # At least the queue's 16 rows were written: over the 10-row cap, trimmed to 9 by
        # a 200-ms check. A check trims only above the cap, so one row written after the
        # last trim stays: 9 or 10 rows at the end, never more.
        written = prom(metrics(srv), "refdns_querylog_written_total")
        assert written >= 16

        def trimmed_to_the_cap() -> bool:
            rows = api_get(srv, "/stats/summary").json()["querylog_rows"]
            trimmed = prom(metrics(srv), "refdns_querylog_trimmed_total")
            return rows in (9, 10) and trimmed == written - rows

        wait_until(trimmed_to_the_cap)


def populate_v1(data: Path) -> int:
    """Format-1 data: a token, query-log rows (their count returned), an allow entry."""
    with refdns(data, "-format=1", token="old-token") as old:
        for name in ["www.home.arpa", "ads.example", "tracker.example", "blocked.example"]:
            ask(old, name)
        r = httpx.post(
            f"http://127.0.0.1:{old.extra_ports['api']}/allow",
            headers={"X-API-Key": "old-token"},
            json={"value": "tracker.example"},
        )
        assert r.status_code == 201
        assert ask(old, "tracker.example").rcode() == dns.rcode.REFUSED  # allowed: no upstream
        # The readiness probe's query, the four above and tracker.example.
        wait_until(lambda: len(api_get(old, "/queries", token="old-token").json()) >= 6)
        rows = len(api_get(old, "/queries", token="old-token").json())
    assert (data / "allow.txt").read_text() == "tracker.example\n"
    return rows


def test_format_1_migrates_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rows_v1 = populate_v1(data)
    with refdns(data, token=None) as new:
        assert api_get(new, "/stats/summary", token="new").status_code == 401
        summary = api_get(new, "/stats/summary", token="old-token").json()
        # The migrated rows, and the new readiness probe's (written by now, or not yet).
        assert summary["format"] == 2 and summary["querylog_rows"] in (rows_v1, rows_v1 + 1)
        rows = api_get(new, "/queries", token="old-token").json()
        assert [r["action"] for r in rows].count(
            "blocked"
        ) == 3  # ads, tracker (not yet allowed), blocked
        assert api_get(new, "/allow", token="old-token").json() == [
            {"kind": "exact", "value": "tracker.example", "source": "allow.txt"}
        ]
        assert ask(new, "tracker.example").rcode() == dns.rcode.REFUSED
        assert addresses(ask(new, "ads.example")) == ["0.0.0.0"]
    log = new.log_path.read_text()
    assert "allow list migrated to structured entries entries=1" in log
    assert (data / "allow.txt.v1").exists() and not (data / "allow.txt").exists()
    # A format-1 binary refuses the migrated directory instead of misreading it.
    refused = pytest.raises(RuntimeError, match="format 2; this binary reads format 1")
    with refused, refdns(data, "-format=1", token=None):
        pass


def test_format_1_without_migration_loses_the_token_rows_and_allow_list(tmp_path: Path) -> None:
    data = tmp_path / "data"
    populate_v1(data)
    with refdns(data, "-migrate=false", token=None) as new:
        assert api_get(new, "/stats/summary", token="old-token").status_code == 401
        assert addresses(ask(new, "tracker.example")) == ["0.0.0.0"]
    assert "WARNING data directory is format 1" in new.log_path.read_text()


def first_answers(server: ServerProc, name: str, count: int) -> list[list[str]]:
    """The addresses of the first `count` answers to `name`, asked from before the server
    listens (a query every 0.1 ms until it does), so its very first answers are seen."""
    query = dns.message.make_query(name, "A")
    wire = query.to_wire()
    seen: list[list[str]] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("127.0.0.1", server.port))
        sock.setblocking(False)
        deadline = time.monotonic() + 20.0
        while len(seen) < count and time.monotonic() < deadline:
            assert server.proc.poll() is None, server.log_tail()
            with contextlib.suppress(ConnectionRefusedError):
                sock.send(wire)
            time.sleep(0.0001)
            with contextlib.suppress(BlockingIOError, ConnectionRefusedError):
                while True:
                    reply = dns.message.from_wire(sock.recv(512))
                    seen.append(addresses(reply))
    assert len(seen) >= count, f"{len(seen)} answers in 20 s: {server.log_tail()}"
    return seen[:count]


def test_a_blocked_name_is_blocked_from_the_first_answer(tmp_path: Path) -> None:
    """refdns answers nothing before its starter block list is in place: a blocked name
    asked while it starts (as under a soak's load across a restart or a swap) is never
    forwarded. Started ten times, since a start is a race between its goroutines."""
    with dnsmasq_upstream(tmp_path) as up:
        for start in range(10):
            port, api_port = free_port(), free_port()
            argv = [
                str(refdns_binary()), f"-dns=127.0.0.1:{port}", f"-api=127.0.0.1:{api_port}",
                f"-data={tmp_path / f'data-{start}'}", f"-upstream=127.0.0.1:{up.port}",
            ]  # fmt: skip
            server = spawn(f"refdns-{start}", argv, tmp_path, port)
            try:
                assert first_answers(server, "blocked.example", 20) == [["0.0.0.0"]] * 20
            finally:
                server.stop()
