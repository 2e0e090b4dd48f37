"""Readiness probes: one check of one probe against a started target."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from soak.placeholders import reveal_map
from soak.probes import dns_query, http_request, tcp_connect
from soak.targets.base import Running
from soak.targets.specs import DnsProbe, HttpProbe, PortSpec, Probe, TcpProbe

# The server's own files beside the load's connections: listeners, logs, its data, its
# upstreams' sockets.
FD_HEADROOM = 256
FD_LIMIT_ADVICE = 65536  # what to raise a low limit to: a busy server's (the sdns seed)


@dataclass(frozen=True)
class ProbeOutcome:
    ok: bool
    detail: str  # what was seen, for the error when the target never gets ready


def describe(probe: Probe) -> str:
    if isinstance(probe, HttpProbe):
        return f"http {probe.method} {probe.path} on port {probe.port} -> {probe.status}"
    if isinstance(probe, DnsProbe):
        want = probe.rcode or "any rcode"
        if probe.answer:
            want += f" with {probe.answer}"
        return f"dns {probe.name}/{probe.type} on port {probe.port} -> {want}"
    return f"tcp port {probe.port}"


def check(
    probe: Probe, running: Running, timeout_s: float, base_dir: Path | None = None
) -> ProbeOutcome:
    """One attempt; never raises for network faults. Header secrets are revealed here
    (`base_dir`: where a relative `{file:PATH}` is)."""
    if probe.port not in running.ports:
        known = ", ".join(sorted(running.ports)) or "none"
        return ProbeOutcome(False, f"probe names port {probe.port!r}; named ports: {known}")
    host, port = running.address(probe.port)
    if isinstance(probe, HttpProbe):
        url = f"http://{_url_host(host)}:{port}{probe.path}"
        headers = reveal_map(probe.headers, base_dir, f"ready probe {url} headers")
        http = http_request(probe.method, url, headers=headers, timeout_s=timeout_s)
        if http.status == probe.status:
            return ProbeOutcome(True, f"HTTP {http.status}")
        return ProbeOutcome(False, f"{url}: {http.error or f'HTTP {http.status}'}")
    if isinstance(probe, DnsProbe):
        return _check_dns(probe, host, port, timeout_s)
    assert isinstance(probe, TcpProbe)
    if tcp_connect(host, port, timeout_s):
        return ProbeOutcome(True, "accepts")
    return ProbeOutcome(False, f"nothing accepts on {host}:{port}")


def _check_dns(probe: DnsProbe, host: str, port: int, timeout_s: float) -> ProbeOutcome:
    result = dns_query(
        host, port, probe.name, probe.type, protocol=probe.protocol, timeout_s=timeout_s
    )
    where = f"{probe.name}/{probe.type} @{host}:{port}"
    if not result.ok_transport:
        return ProbeOutcome(False, f"{where}: {result.error}")
    if probe.rcode is not None and result.rcode != probe.rcode.upper():
        return ProbeOutcome(False, f"{where}: {result.rcode}")
    if probe.answer is not None and probe.answer not in result.answers:
        got = ", ".join(result.answers) or "no answer"
        return ProbeOutcome(False, f"{where}: {got} (waiting for {probe.answer})")
    return ProbeOutcome(True, f"{result.rcode} {' '.join(result.answers)}".strip())


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def default_probes(ports: dict[str, PortSpec]) -> list[Probe]:
    """Without probes: every TCP port accepts, and a UDP-only DNS port answers at all."""
    probes: list[Probe] = []
    for name, spec in ports.items():
        if spec.protocol == "udp":
            probes.append(DnsProbe(kind="dns", port=name, name=".", type="SOA", rcode=None))
        else:
            probes.append(TcpProbe(kind="tcp", port=name))
    return probes


def fd_limit_warning(
    name: str, fd_limit: int | None, runtime: str = "process", connections: int | None = None
) -> str | None:
    """An open-files limit below what the load needs (its `connections` to the server and
    FD_HEADROOM for the server's own files), with how to raise it for this runtime. None
    without a load to weigh it against: most limits are fine for most runs, and a
    warning printed on every run is read by nobody."""
    if fd_limit is None or connections is None:
        return None
    need = connections + FD_HEADROOM
    if fd_limit >= need:
        return None
    advice = max(FD_LIMIT_ADVICE, need)
    if runtime == "docker":
        fix = f"set `nofile: {advice}` (or more) on the target"
    else:
        fix = (
            f"raise it where soak starts: `ulimit -n {advice}` in the shell, or "
            f"`LimitNOFILE={advice}` in the systemd unit of `soak serve`"
        )
    return (
        f"{name}: open-files limit is {fd_limit}, below the {need} this load needs"
        f" ({connections} connections to it and {FD_HEADROOM} for its own files): {fix}"
    )
