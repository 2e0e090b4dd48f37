"""Real DNS servers started on loopback for tests, with temp dirs (Alertmanager:
alertmanager.py, InfluxDB: tsdb.py, the reference Go server: refdns.py, PowerDNS:
pdns.py).

Each starter returns a ServerProc and is used as a context manager, so the
process is stopped (and waited for) whatever the test does. Add starters here
rather than in a test module: several test areas share them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rcode
import pytest


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free for both TCP and UDP on 127.0.0.1 right now."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.bind(("127.0.0.1", port))
            return port
    raise RuntimeError("no free port")


@dataclass
class ServerProc:
    name: str
    proc: subprocess.Popen[bytes]
    port: int  # DNS port (or the main port)
    workdir: Path
    log_path: Path
    extra_ports: dict[str, int] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def port_for(self, protocol: str) -> int:
        """The port serving protocol: UDP and TCP share the DNS port; DoT and DoH
        are extra listeners (a KeyError if this server was started without them)."""
        return self.port if protocol in ("udp", "tcp") else self.extra_ports[protocol]

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def spawn(name: str, argv: list[str], workdir: Path, port: int, **extra: int) -> ServerProc:
    log_path = workdir / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 (the child owns it)
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True
    )
    log.close()
    return ServerProc(name, proc, port, workdir, log_path, dict(extra))


@contextlib.contextmanager
def serving(server: ServerProc, qname: str, *tcp_ports: int) -> Iterator[ServerProc]:
    """server once it answers qname and accepts on tcp_ports; stopped afterwards."""
    try:
        wait_dns(server, qname)
        for port in tcp_ports:
            wait_tcp(port, proc=server)
        yield server
    finally:
        server.stop()


def wait_dns(server: ServerProc, qname: str = "ready.test.", timeout_s: float = 20.0) -> None:
    """Until the server answers any DNS reply on UDP (any rcode)."""
    deadline = time.monotonic() + timeout_s
    query = dns.message.make_query(qname, "A")
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited: {server.log_tail()}")
        try:
            dns.query.udp(query, "127.0.0.1", port=server.port, timeout=0.3)
            return
        except (dns.exception.Timeout, OSError):
            time.sleep(0.1)
    raise RuntimeError(f"{server.name} did not answer DNS in {timeout_s}s: {server.log_tail()}")


def wait_tcp(port: int, timeout_s: float = 20.0, proc: ServerProc | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.proc.poll() is not None:
            raise RuntimeError(f"{proc.name} exited: {proc.log_tail()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing accepts on 127.0.0.1:{port} after {timeout_s}s")


# ---------------------------------------------------------------- unbound


def module_unbound(threads: int = 1) -> Any:
    """A module's `server` fixture: one unbound (`threads` threads) for all its tests,
    as `server = module_unbound(2)` at the module's top."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
        with unbound(tmp_path_factory.mktemp("unbound"), threads=threads) as s:
            yield s

    return server


def external_unbound(port: int) -> dict[str, Any]:
    """A scenario's `target:` for the unbound a test started on 127.0.0.1:port."""
    return {
        "runtime": "external",
        "name": "unbound",
        "ports": {"dns": {"host": port, "protocol": "both"}},
    }


# unbound in the foreground as this user, in no chroot, logging nowhere but stderr: the
# head of every test's `server:` section.
UNBOUND_FOREGROUND = """    do-daemonize: no
    username: ""
    chroot: ""
    directory: ""
    pidfile: ""
    use-syslog: no
"""


def unbound_conf(port: int, local_data: list[str], threads: int = 1, tls: str = "") -> str:
    records = "\n".join(f'    local-data: "{rr}"' for rr in local_data)
    return f"""server:{tls}
{UNBOUND_FOREGROUND}    logfile: ""
    verbosity: 0
    interface: 127.0.0.1@{port}
    port: {port}
    num-threads: {threads}
    do-ip6: no
    access-control: 127.0.0.0/8 allow
    so-reuseport: yes
    msg-cache-size: 16m
    rrset-cache-size: 32m
    local-zone: "example.test." static
{records}
remote-control:
    control-enable: no
"""


LOCAL_QUERIES = [{"name": "local", "queries": ["www.example.test A"]}]


def bench_load(workers: int, mix: list[dict[str, object]] = LOCAL_QUERIES) -> dict[str, object]:
    """A bench scenario's `load`: 16 flows, 1 s timeout, by default www.example.test A only."""
    return {"workers": workers, "flows": 16, "timeout_s": "1s", "mix": mix}


def unbound_process_target(threads: int = 1, conf: str | None = None) -> dict[str, object]:
    """A scenario's `target`: unbound as a process on a port soak picks, answering
    www.example.test A with 192.0.2.10 (the bench scenarios' server); `conf`: a config
    of the test's own instead (its port `{port.dns}`)."""
    if conf is None:
        conf = unbound_conf("{port.dns}", ["www.example.test. 3600 IN A 192.0.2.10"], threads)  # type: ignore[arg-type]
    return {
        "runtime": "process",
        "name": "unbound",
        "version": "1.17",
        "argv": ["unbound", "-d", "-c", "{run_dir}/unbound.conf"],
        "ports": {"dns": {"protocol": "both"}},
        "files": [{"dest": "unbound.conf", "content": conf}],
        "ready": {"probes": [{"kind": "dns", "name": "www.example.test"}]},
    }


DEFAULT_LOCAL_DATA = [
    "www.example.test. 3600 IN A 192.0.2.10",
    "mail.example.test. 3600 IN A 192.0.2.11",
    "ns.example.test. 3600 IN A 192.0.2.12",
    "blocked.example.test. 3600 IN A 0.0.0.0",
    "www.example.test. 3600 IN AAAA 2001:db8::10",
    "example.test. 3600 IN MX 10 mail.example.test.",
    'example.test. 3600 IN TXT \\"soak test zone\\"',
]

# The benches' query file, read alike by dnsperf and `soak load` so that their
# numbers compare: one query for each record of DEFAULT_LOCAL_DATA but the TXT.
DEFAULT_QUERIES = [
    "www.example.test A",
    "mail.example.test A",
    "ns.example.test A",
    "blocked.example.test A",
    "www.example.test AAAA",
    "example.test MX",
]


def write_queries(folder: Path) -> Path:
    """DEFAULT_QUERIES as a query file (one `NAME TYPE` a line) in `folder`."""
    path = folder / "queries.txt"
    path.write_text("\n".join(DEFAULT_QUERIES) + "\n")
    return path


def unbound_tls_conf(cert: Path, key: Path, dot: int, doh: int) -> str:
    """DoT on `dot` and DoH (HTTP/2, /dns-query) on `doh` (Debian's unbound has nghttp2)."""
    return f"""
    interface: 127.0.0.1@{dot}
    interface: 127.0.0.1@{doh}
    tls-port: {dot}
    https-port: {doh}
    tls-service-key: "{key}"
    tls-service-pem: "{cert}"
    http-endpoint: "/dns-query"
    incoming-num-tcp: 200"""


@contextlib.contextmanager
def unbound(
    tmp: Path,
    local_data: list[str] | None = None,
    threads: int = 1,
    tls: tuple[Path, Path] | None = None,
    tls_options: str = "",
    tcp_slots: int | None = None,
) -> Iterator[ServerProc]:
    """unbound on loopback; with `tls` (certificate, key) also DoT and DoH (extra ports),
    with `tls_options` (server: lines, e.g. "http-max-streams: 1") added; `tcp_slots`:
    its incoming-num-tcp without TLS (unbound's default is 10 a thread)."""
    port = free_port()
    extra: dict[str, int] = {}
    tls_conf = ""
    if tls is not None:
        extra = {"dot": free_port(), "doh": free_port()}
        tls_conf = unbound_tls_conf(tls[0], tls[1], extra["dot"], extra["doh"])
        tls_conf += "".join(f"\n    {line}" for line in tls_options.splitlines())
    elif tcp_slots is not None:
        tls_conf = f"\n    incoming-num-tcp: {tcp_slots}"
    conf = tmp / "unbound.conf"
    conf.write_text(unbound_conf(port, local_data or DEFAULT_LOCAL_DATA, threads, tls_conf))
    with serving(
        spawn("unbound", ["unbound", "-d", "-c", str(conf)], tmp, port, **extra),
        "www.example.test.",
    ) as server:
        yield server


# ---------------------------------------------------------------- dnsmasq


@contextlib.contextmanager
def dnsmasq_upstream(tmp: Path, address: str = "192.0.2.1") -> Iterator[ServerProc]:
    """Answers every name with `address`, TTL 3600, no cache (FIELD-NOTES)."""
    port = free_port()
    argv = [
        shutil.which("dnsmasq") or "/usr/sbin/dnsmasq",
        "--no-daemon",
        f"--port={port}",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        "--no-resolv",
        "--no-hosts",
        "--cache-size=0",
        f"--address=/#/{address}",
        "--local-ttl=3600",
        f"--pid-file={tmp / 'dnsmasq.pid'}",
        "--user=root",
    ]
    with serving(spawn("dnsmasq", argv, tmp, port), "anything.test.") as server:
        yield server


# ---------------------------------------------------------------- knot-resolver


@contextlib.contextmanager
def kresd(
    tmp: Path,
    upstream_port: int,
    tls: tuple[Path, Path] | None = None,
) -> Iterator[ServerProc]:
    """kresd forwarding everything to 127.0.0.1@upstream_port (one process).

    With `tls` (certificate, key) it also listens for DoT (extra port `dot`) and
    DoH over HTTP/2 (extra port `doh`, path /dns-query).
    """
    port = free_port()
    extra: dict[str, int] = {}
    lines = [
        f"net.listen('127.0.0.1', {port}, {{ kind = 'dns' }})",
        "net.ipv6 = false",
        f"cache.open(16 * MB, 'lmdb://{tmp / 'cache'}')",
        f"policy.add(policy.all(policy.STUB('127.0.0.1@{upstream_port}')))",
    ]
    if tls is not None:
        extra = {"dot": free_port(), "doh": free_port()}
        lines += [
            f"net.tls('{tls[0]}', '{tls[1]}')",
            f"net.listen('127.0.0.1', {extra['dot']}, {{ kind = 'tls' }})",
            f"net.listen('127.0.0.1', {extra['doh']}, {{ kind = 'doh2' }})",
        ]
    (tmp / "kresd.conf").write_text("\n".join(lines) + "\n")
    argv = ["kresd", "-n", "-q", "-c", str(tmp / "kresd.conf"), str(tmp)]
    with serving(spawn("kresd", argv, tmp, port, **extra), "warm.example.") as server:
        yield server


# ---------------------------------------------------------------- dnsdist


@contextlib.contextmanager
def dnsdist(tmp: Path, backend_port: int, tls: tuple[Path, Path]) -> Iterator[ServerProc]:
    """dnsdist in front of 127.0.0.1@backend_port: plain DNS, DoT (extra port `dot`) and
    DoH (extra port `doh`, /dns-query)."""
    port, dot, doh = free_port(), free_port(), free_port()
    cert, key = tls
    (tmp / "dnsdist.conf").write_text(
        "\n".join(
            [
                f"setLocal('127.0.0.1:{port}')",
                f"addTLSLocal('127.0.0.1:{dot}', '{cert}', '{key}')",
                f"addDOHLocal('127.0.0.1:{doh}', '{cert}', '{key}', '/dns-query')",
                # up without health checks: a test backend does not answer the root
                f"newServer({{address='127.0.0.1:{backend_port}'}}):setUp()",
                "setSecurityPollSuffix('')",
            ]
        )
        + "\n"
    )
    argv = ["dnsdist", "--supervised", "--disable-syslog", "-C", str(tmp / "dnsdist.conf")]
    with serving(
        spawn("dnsdist", argv, tmp, port, dot=dot, doh=doh), "www.example.test."
    ) as server:
        yield server


# ---------------------------------------------------------------- BIND

NAMED_RECURSIVE = """options {
    directory "{run_dir}";
    pid-file none;
    session-keyfile "{run_dir}/session.key";
    listen-on port {port.dns} { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion yes;
    allow-recursion { 127.0.0.0/8; };
    forwarders { 127.0.0.1 port {service.upstream.port.dns}; };
    forward only;
    dnssec-validation no;
    max-cache-size {cache_size};
};
{stats}controls { };
logging { category default { null; }; };
"""


def named_recursive_conf(cache_size: str, stats_port: str | None = None) -> str:
    """A scenario's named.conf (its `{port.dns}`, `{run_dir}` and upstream templates
    left for the run): BIND recursive, forwarding only to the scenario's `upstream`
    service, its cache at most `cache_size` ("256m"); with its statistics channel on
    `stats_port` (a port or a template such as "{port.stats}") where the cache's own
    memory is to be read."""
    stats = (
        f"statistics-channels {{ inet 127.0.0.1 port {stats_port} allow {{ 127.0.0.1; }}; }};\n"
        if stats_port
        else ""
    )
    return NAMED_RECURSIVE.replace("{cache_size}", cache_size).replace("{stats}", stats)
