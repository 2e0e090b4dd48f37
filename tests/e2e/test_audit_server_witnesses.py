"""Servers' own counts as the audit's witnesses, each a real run audited clean and then
its count in the store halved or doubled, which the audit must name: BIND's statistics
channel, knot-resolver's /metrics, PowerDNS Authoritative's API (over TCP, so that the
stream loop's socket counters are held too), and the client queries unbound wrote as
dnstap to the run's capture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.results.reportinput import local_witness_lines
from soak.runs.layout import DataDir
from tests.support.audit_runs import (
    RATE,
    assert_server_count_witnessed,
    audited_run,
    corrupted,
    result_of,
)
from tests.support.servers import unbound_conf, unbound_process_target
from tests.support.traffic import dnstap_conf

pytestmark = pytest.mark.e2e

NAMED_CONF = """options {{
    directory "{{run_dir}}";
    pid-file "{{run_dir}}/named.pid";
    listen-on port {{port.dns}} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
}};
statistics-channels {{ inet 127.0.0.1 port {{port.stats}} allow {{ 127.0.0.1; }}; }};
zone "example.test" {{ type primary; file "{{run_dir}}/example.test.zone"; }};
"""
ZONE = (
    "$TTL 3600\n@ IN SOA ns. hostmaster. 1 3600 600 86400 3600\n@ IN NS ns.\nwww IN A 192.0.2.10\n"
)


@pytest.fixture(scope="module")
def bind_run() -> Iterator[tuple[Path, str]]:
    """One real run of BIND (named), its own query count read from its statistics
    channel (`samplers.server: {kind: bind}`), audited clean."""
    target = {
        "name": "bind9",
        "argv": ["named", "-g", "-c", "{run_dir}/named.conf"],
        "ports": {"dns": {"protocol": "both"}, "stats": {}},
        "files": [
            {"dest": "named.conf", "content": NAMED_CONF.format()},
            {"dest": "example.test.zone", "content": ZONE},
        ],
    }
    samplers = {"server": {"kind": "bind", "port": "stats"}}
    yield from audited_run("bind-witness", target, "www.example.test", samplers)


def test_binds_statistics_channel_is_a_witness(bind_run: tuple[Path, str]) -> None:
    assert_server_count_witnessed(bind_run, "num / 2")


KRESD_CONF = """net.listen('127.0.0.1', {port.dns}, { kind = 'dns' })
net.ipv6 = false
trust_anchors.remove('.')
modules.load('hints > iterate')
hints.set('www.example.com 192.0.2.10')
modules.load('http')
net.listen('127.0.0.1', {port.web}, { kind = 'webmgmt' })
cache.open(16 * MB, 'lmdb://{run_dir}/cache')
"""


@pytest.fixture(scope="module")
def kresd_run() -> Iterator[tuple[Path, str]]:
    """One real run of knot-resolver (kresd), its own query count read from its http
    module's /metrics (`request_total`, through the prom sampler's map), audited clean."""
    target = {
        "name": "knot-resolver",
        "argv": ["kresd", "-n", "-c", "{run_dir}/kresd.conf", "{run_dir}"],
        "ports": {"dns": {"protocol": "both"}, "web": {}},
        "files": [{"dest": "kresd.conf", "content": KRESD_CONF}],
    }
    samplers = {"prom": {"port": "web", "map": {"server_queries": "request_total"}}}
    yield from audited_run("kresd-witness", target, "www.example.com", samplers)


def test_knot_resolvers_metrics_are_a_witness(kresd_run: tuple[Path, str]) -> None:
    assert_server_count_witnessed(kresd_run, "num * 2")


PDNS_KEY = "audit-witness-key"
PDNS_CONF = f"""launch=gsqlite3
gsqlite3-database={{run_dir}}/pdns.sqlite3
local-address=127.0.0.1
local-port={{port.dns}}
api=yes
api-key={PDNS_KEY}
webserver=yes
webserver-address=127.0.0.1
webserver-port={{port.api}}
webserver-allow-from=127.0.0.0/8
security-poll-suffix=
daemon=no
guardian=no
disable-syslog=yes
socket-dir={{run_dir}}
setuid=
setgid=
"""
PDNS_SCHEMA = "/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql"


@pytest.fixture(scope="module")
def pdns_run() -> Iterator[tuple[Path, str]]:
    """One real run of pdns_server (gsqlite3, the zone created through its API), its own
    count read from its API's statistics (`samplers.server: {kind: pdns}`), loaded over
    TCP, audited clean."""
    headers = {"X-API-Key": PDNS_KEY}
    target = {
        "name": "pdns-auth",
        "argv": [
            "sh", "-c",
            f"sqlite3 {{run_dir}}/pdns.sqlite3 < {PDNS_SCHEMA};"
            " exec pdns_server --config-dir={run_dir}/pdns",
        ],
        "ports": {"dns": {"protocol": "both"}, "api": {}},
        "files": [{"dest": "pdns/pdns.conf", "content": PDNS_CONF}],
        "ready": {"probes": [
            {"kind": "http", "port": "api", "path": "/api/v1/servers/localhost",
             "headers": headers},
            {"kind": "dns", "name": "example.test", "rcode": None},
        ]},
    }  # fmt: skip
    zone = {
        "name": "example.test.",
        "kind": "Native",
        "nameservers": ["ns1.example.test."],
        "rrsets": [
            {"name": "www.example.test.", "type": "A", "ttl": 3600,
             "records": [{"content": "192.0.2.10", "disabled": False}]},
        ],
    }  # fmt: skip
    setup = [{
        "method": "POST", "port": "api", "path": "/api/v1/servers/localhost/zones",
        "headers": headers, "status": [201], "body": zone,
    }]  # fmt: skip
    samplers = {"server": {"kind": "pdns", "port": "api", "headers": headers}}
    yield from audited_run(
        "pdns-witness", target, "www.example.test", samplers,
        setup=setup, load={"protocol": "tcp", "flows": 4},
    )  # fmt: skip


def test_pdns_auths_statistics_are_a_witness(pdns_run: tuple[Path, str]) -> None:
    lines = local_witness_lines(DataDir(pdns_run[0]), pdns_run[1])
    # by its last sample, read while the load still ran: more than sent before it
    assert any(
        line.startswith("the server counted ") and "besides: probes, readiness" in line
        for line in lines
    ), lines
    assert any(line.startswith("the engine's sockets took ") for line in lines), lines
    assert_server_count_witnessed(pdns_run, "num / 2")
    assert_server_count_witnessed(pdns_run, "num * 2")


def test_the_stream_loops_socket_counters_are_a_witness(pdns_run: tuple[Path, str]) -> None:
    """The TCP run kept its sockets' counts (queries written whole, answers read off
    the stream) and they agree; each changed in result.json is named."""
    data, run_id = pdns_run
    totals = result_of(data, run_id)[1]["load_totals"]
    counters = totals["engine_counters"]
    assert counters["socket_sent"] + counters["send_failed"] == totals["sent"] > RATE * 10
    assert counters["socket_received"] >= totals["completed"]

    def change(field: str, by: int) -> None:
        def apply(data: Path, run_id: str) -> None:
            path, result = result_of(data, run_id)
            result["load_totals"]["engine_counters"][field] += by
            path.write_text(json.dumps(result))

        found = corrupted(pdns_run, apply)
        named = "the ledger's sent" if field == "socket_sent" else "the ledger's completed"
        assert any(line.startswith(named) for line in found), (field, found)

    change("socket_sent", 1)
    change("socket_received", -counters["socket_received"] // 2)


@pytest.fixture(scope="module")
def dnstap_run() -> Iterator[tuple[Path, str]]:
    """One real run of unbound writing its client queries as dnstap to the run's
    capture socket (`capture:`), audited clean with the capture's count as a witness."""
    conf = unbound_conf("{port.dns}", ["www.example.test. 3600 IN A 192.0.2.10"])  # type: ignore[arg-type]
    conf += dnstap_conf(Path("{run_dir}/dnstap.sock"))
    target = unbound_process_target(conf=conf)
    yield from audited_run(
        "dnstap-witness", target, "www.example.test", {}, capture={"clients_by_port": True}
    )


def test_a_dnstap_captures_count_is_a_witness(dnstap_run: tuple[Path, str]) -> None:
    """The capture counted the load's queries from the run's origin (every one answered
    at least: a datagram lost on loopback never reached the server), and `soak audit`
    says so; its count halved or doubled in result.json is named."""
    data, run_id = dnstap_run
    result = result_of(data, run_id)[1]
    counted = result["capture"]["counted"]["client_queries"]
    totals = result["load_totals"]
    sent = totals["sent"]
    assert sent > RATE * 10 and totals["completed"] <= counted <= sent + 200, (counted, totals)
    said = f"the dnstap capture counted {min(counted, sent):,} of the {sent:,} queries sent"
    assert said in local_witness_lines(DataDir(data), run_id)

    def change(by: float) -> None:
        def apply(data: Path, run_id: str) -> None:
            path, result = result_of(data, run_id)
            result["capture"]["counted"]["client_queries"] *= by
            path.write_text(json.dumps(result))

        found = corrupted(dnstap_run, apply)
        assert any(line.startswith("the dnstap capture counted") for line in found), (by, found)

    change(0.5)
    change(2)
