"""probes against real servers: unbound answers, a closed port, a real HTTP API."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.probes import dns_query, http_request, tcp_connect
from tests.support.pdns import PDNS_API_KEY, pdns_server
from tests.support.servers import free_port, unbound

pytestmark = pytest.mark.integration


def test_dns_query_unbound_udp_and_tcp(tmp_path: Path) -> None:
    with unbound(tmp_path) as server:
        udp = dns_query("127.0.0.1", server.port, "www.example.test.", "A")
        assert udp.ok and udp.answers == ["192.0.2.10"] and udp.ttls == [3600]
        assert "QR" in udp.flags and "AA" in udp.flags
        tcp = dns_query("127.0.0.1", server.port, "www.example.test.", "AAAA", protocol="tcp")
        assert tcp.ok and tcp.answers == ["2001:db8::10"]
        mx = dns_query("127.0.0.1", server.port, "example.test.", "MX")
        assert mx.answers == ["10 mail.example.test."]
        missing = dns_query("127.0.0.1", server.port, "nope.example.test.")
        assert missing.ok_transport and missing.rcode == "NXDOMAIN" and missing.answers == []


def test_dns_query_nobody_listening() -> None:
    port = free_port()
    result = dns_query("127.0.0.1", port, "www.example.test.", timeout_s=0.3)
    assert not result.ok_transport and result.rcode is None and result.error
    tcp = dns_query("127.0.0.1", port, "www.example.test.", protocol="tcp", timeout_s=0.3)
    assert not tcp.ok_transport and tcp.error
    assert not tcp_connect("127.0.0.1", port, timeout_s=0.3)


def test_http_and_tcp_against_pdns_api(tmp_path: Path) -> None:
    with pdns_server(tmp_path) as server:
        web = server.extra_ports["web"]
        assert tcp_connect("127.0.0.1", web)
        base = f"http://127.0.0.1:{web}"
        denied = http_request("GET", f"{base}/api/v1/servers/localhost")
        assert denied.status == 401
        ok = http_request(
            "GET", f"{base}/api/v1/servers/localhost", headers={"X-API-Key": PDNS_API_KEY}
        )
        assert ok.ok and ok.json()["id"] == "localhost" and ok.bytes == len(ok.body)
        assert ok.headers["content-type"].startswith("application/json")
        closed = http_request("GET", f"http://127.0.0.1:{free_port()}/", timeout_s=1.0)
        assert closed.status is None and closed.error
