"""DoT and DoH load against real servers on loopback with a certificate made here.

unbound (tls-port, https-port) and knot-resolver (kind tls, doh2), connection
policies that churn connections, TLS session resumption on and off, and the
server's file descriptors coming back down after the churn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from tests.support.servers import ServerProc, dnsdist
from tests.support.tls import SERVER_NAME

pytestmark = pytest.mark.integration

LOCAL = {"name": "local", "queries": ["www.example.test", "mail.example.test A"]}


@pytest.fixture(scope="module")
def dd(
    tmp_path_factory: pytest.TempPathFactory, tls_cert: tuple[Path, Path], tls_unbound: ServerProc
) -> Iterator[ServerProc]:
    with dnsdist(tmp_path_factory.mktemp("dnsdist"), tls_unbound.port, tls=tls_cert) as s:
        yield s


# Every TLS frontend: DoT, and DoH by POST and by GET.
FRONTENDS = pytest.mark.parametrize(
    ("protocol", "method"), [("dot", None), ("doh", "POST"), ("doh", "GET")]
)


def load(
    server: ServerProc, protocol: str, tmp: Path, method: str | None = None, **cfg: Any
) -> dict[str, Any]:
    if method is not None:
        cfg["doh"] = {"method": method}
    port = server.extra_ports["dot" if protocol == "dot" else "doh"]
    duration_s, rate = cfg.pop("duration_s", 1.5), cfg.pop("rate", 300.0)
    config = LoadConfig(protocol=protocol, flows=cfg.pop("flows", 2), mix=[LOCAL], **cfg)
    return run_load(config, ("127.0.0.1", port), duration_s, rate, base_dir=tmp).to_json_dict()


@FRONTENDS
def test_unbound_answers_every_query(
    tls_unbound: ServerProc, protocol: str, method: str | None, tmp_path: Path
) -> None:
    d = load(tls_unbound, protocol, tmp_path, method)
    assert d["sent"] == 450 and d["completed"] == 450 and d["rcodes"] == {"NOERROR": 450}
    # counted at the connections: queries written whole, answers read off the stream
    assert d["engine_counters"] == {"socket_sent": 450, "socket_received": 450, "send_failed": 0}
    conns = d["connections"]
    assert conns["opened"] == 2 and conns["errors"] == 0
    assert 0 < conns["handshake_ms"]["p50"] <= conns["handshake_ms"]["max"]
    assert d["latency_ms"]["p50"] > 0


@pytest.mark.parametrize("protocol", ["dot", "doh"])
def test_knot_resolver_answers_every_query(
    tls_kresd: ServerProc, protocol: str, tmp_path: Path
) -> None:
    d = load(tls_kresd, protocol, tmp_path)
    assert d["sent"] == 450 and d["completed"] == 450 and d["lost"] == 0
    assert d["connections"]["errors"] == 0


@FRONTENDS
def test_dnsdist_frontends_answer_every_query(
    dd: ServerProc, protocol: str, method: str | None, tmp_path: Path
) -> None:
    d = load(dd, protocol, tmp_path, method)
    assert d["completed"] == 450 and d["rcodes"] == {"NOERROR": 450}
    assert d["connections"]["opened"] == 2 and d["connections"]["errors"] == 0


@pytest.mark.parametrize("resumption", [True, False])
def test_queries_per_connection_churns_and_resumes_sessions(
    tls_unbound: ServerProc, resumption: bool, tmp_path: Path
) -> None:
    mix = [{**LOCAL, "connection": {"queries_per_connection": 20, "idle_s": 0.05}}]
    cfg = LoadConfig(protocol="dot", flows=1, mix=mix, tls={"resumption": resumption})
    port = tls_unbound.extra_ports["dot"]
    d = run_load(cfg, ("127.0.0.1", port), 2.0, 400.0, base_dir=tmp_path).to_json_dict()
    assert d["sent"] == 800 and d["lost"] == 0
    conns = d["connections"]
    # 800 queries, 20 per connection: 40 connections, each replaced as soon as it is spent
    assert 40 <= conns["opened"] <= 41 and conns["errors"] == 0
    if resumption:
        assert conns["tls_resumed"] >= conns["opened"] - 2
    else:
        assert conns["tls_resumed"] == 0


def test_reconnect_every_s_closes_connections_by_age(tls_kresd: ServerProc, tmp_path: Path) -> None:
    mix = [{**LOCAL, "connection": {"reconnect_every_s": 0.5}}]
    cfg = LoadConfig(protocol="doh", flows=1, mix=mix)
    port = tls_kresd.extra_ports["doh"]
    d = run_load(cfg, ("127.0.0.1", port), 2.0, 200.0, base_dir=tmp_path).to_json_dict()
    assert d["completed"] == 400 and d["connections"]["errors"] == 0
    # one at the start, a new one every 0.5 s (3 if the loop was starved for a while)
    assert 3 <= d["connections"]["opened"] <= 5


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_server_fds_come_back_after_churn(tls_unbound: ServerProc, tmp_path: Path) -> None:
    before = open_fds(tls_unbound.pid)
    mix = [{**LOCAL, "connection": {"queries_per_connection": 5}}]
    cfg = LoadConfig(protocol="doh", flows=4, mix=mix)
    port = tls_unbound.extra_ports["doh"]
    # 40 new connections a second
    d = run_load(cfg, ("127.0.0.1", port), 2.0, 200.0, base_dir=tmp_path).to_json_dict()
    assert d["sent"] == 400 and d["lost"] == 0 and d["connections"]["opened"] >= 80
    deadline = time.monotonic() + 10
    while open_fds(tls_unbound.pid) > before and time.monotonic() < deadline:
        time.sleep(0.1)  # the server closes its side when it reads our close
    assert open_fds(tls_unbound.pid) <= before


def cli_load(port: int, tmp_path: Path, *extra: str) -> str:
    """`soak load` of www.example.test A at 100 q/s for 1 s; its standard output.

    A 10-s answer timeout: on a busy machine an answer may take longer than the
    default, and these tests are about the protocol, not the latency. 4 connections,
    not the default 128: with 128 of its 200 TCP slots taken, unbound cuts its idle
    timeout to 1% (300 ms) or less and closes connections as the load opens them (3,000
    opened for 100 queries beside two CPU hogs, and a query now and then lost on one
    it closed), which is the server's answer to that many clients, not the protocol's."""
    qfile = tmp_path / "q.txt"
    qfile.write_text("www.example.test A\n")
    argv = [sys.executable, "-m", "soak.cli", "load", "--server", f"127.0.0.1:{port}"]
    argv += ["--queries", str(qfile), "--rate", "100", "--duration", "1"]
    argv += ["--timeout", "10", "--flows", "4", *extra]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_cli_doh_get_json(tls_unbound: ServerProc, tmp_path: Path) -> None:
    extra = ("--protocol", "doh", "--doh-method", "GET", "--json")
    d = json.loads(cli_load(tls_unbound.extra_ports["doh"], tmp_path, *extra))
    assert d["completed"] == 100 and d["connections"]["opened"] >= 1, d["connections"]


def test_ca_file_verifies_the_server(
    tls_unbound: ServerProc, tls_cert: tuple[Path, Path], tmp_path: Path
) -> None:
    tls = {"ca_file": str(tls_cert[0]), "server_name": SERVER_NAME}
    d = load(tls_unbound, "dot", tmp_path, tls=tls)
    assert d["completed"] == 450
    wrong = {"ca_file": str(tls_cert[0]), "server_name": "other.example"}
    d = load(tls_unbound, "dot", tmp_path, tls=wrong)
    assert d["completed"] == 0 and d["connections"]["errors"] > 0


def test_cli_dot_text_summary_has_a_connections_line(
    tls_unbound: ServerProc, tmp_path: Path
) -> None:
    extra = ("--protocol", "dot", "--no-tls-resumption", "--flows", "3")
    out = cli_load(tls_unbound.extra_ports["dot"], tmp_path, *extra)
    assert "Connections:          opened 3 errors 0 TLS resumed 0" in out


def test_dnsperf_engine_speaks_dot(tls_unbound: ServerProc, tmp_path: Path) -> None:
    cfg = LoadConfig(engine="dnsperf", protocol="dot", flows=1, mix=[LOCAL])
    d = run_load(cfg, ("127.0.0.1", tls_unbound.extra_ports["dot"]), 1.0, 100.0, base_dir=tmp_path)
    assert d.completed >= 95 and d.engine == "dnsperf"
