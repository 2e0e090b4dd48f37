"""The shared server starters themselves: each real server answers on loopback."""

import dns.message
import dns.query
import dns.rcode
import httpx
import pytest

from tests.support import pdns, servers

pytestmark = pytest.mark.integration


def ask(port: int, name: str, rtype: str = "A") -> dns.message.Message:
    return dns.query.udp(dns.message.make_query(name, rtype), "127.0.0.1", port=port, timeout=2)


def test_unbound_answers_local_data(tmp_path):
    with servers.unbound(tmp_path) as srv:
        reply = ask(srv.port, "www.example.test.")
        assert reply.rcode() == dns.rcode.NOERROR
        assert "192.0.2.10" in reply.answer[0].to_text()


def test_recursor_forwards_to_dnsmasq(tmp_path):
    (tmp_path / "up").mkdir()
    (tmp_path / "rec").mkdir()
    with (
        servers.dnsmasq_upstream(tmp_path / "up") as up,
        pdns.pdns_recursor(tmp_path / "rec", up.port) as rec,
    ):
        reply = ask(rec.port, "anything.example.")
        assert reply.rcode() == dns.rcode.NOERROR
        assert "192.0.2.1" in reply.answer[0].to_text()


def test_pdns_server_api_and_metrics(tmp_path):
    with pdns.pdns_server(tmp_path) as srv:
        base = f"http://127.0.0.1:{srv.extra_ports['web']}"
        headers = {"X-API-Key": pdns.PDNS_API_KEY}
        r = httpx.get(f"{base}/api/v1/servers/localhost/zones", headers=headers)
        assert r.status_code == 200 and r.json() == []
        assert "pdns_auth_" in httpx.get(f"{base}/metrics").text
