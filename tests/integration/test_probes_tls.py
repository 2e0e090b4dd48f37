"""DNS probes (dig sampler, upgrade checks and snapshots) over DoT and DoH against unbound."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from soak.probes import dns_query
from soak.samplers.selection import DigProbeConfig
from soak.upgrade.config.checks import DigCheck
from tests.support.servers import ServerProc, unbound
from tests.support.tls import make_cert

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    cert = make_cert(tmp_path_factory.mktemp("cert"))
    with unbound(tmp_path_factory.mktemp("unbound"), tls=cert) as s:
        yield s


@pytest.mark.parametrize("protocol", ["dot", "doh"])
def test_dns_query_over_tls(ub: ServerProc, protocol: str) -> None:
    r = dns_query("127.0.0.1", ub.extra_ports[protocol], "www.example.test", protocol=protocol)
    assert r.ok_transport and r.rcode == "NOERROR" and r.answers == ["192.0.2.10"]
    assert r.latency_ms is not None and r.latency_ms > 0


@pytest.mark.parametrize("protocol", ["dot", "doh"])
def test_nothing_listening_is_a_transport_error_not_an_exception(protocol: str) -> None:
    # the plain DNS port speaks neither TLS nor HTTP/2
    r = dns_query("127.0.0.1", 1, "www.example.test", protocol=protocol, timeout_s=1.0)
    assert not r.ok_transport and r.error


def test_probe_and_check_configs_take_the_new_protocols() -> None:
    assert DigProbeConfig(name="www.example.test", protocol="doh").protocol == "doh"
    check = DigCheck.model_validate(
        {"kind": "dig", "name": "c", "qname": "www.example.test", "protocol": "dot"}
    )
    assert check.protocol == "dot"
