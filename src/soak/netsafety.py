"""Where load and probes may go: loopback, unless `allow_targets` names the network."""

from __future__ import annotations

import ipaddress
import socket

from soak.errors import InputError, UnsafeTargetError


def parse_host_port(text: str, default_port: int = 53) -> tuple[str, int]:
    """Parse "127.0.0.1:5300", "[::1]:5300", "::1" or "localhost" into (host, port)."""
    text = text.strip()
    host, port_text = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    if not host:
        raise InputError(f"no host in server address {text!r}")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InputError(f"port out of range in server address {text!r} (1-65535)")
    return host, int(port_text)


def resolve_ip(host: str) -> str:
    """The address a host name stands for (one lookup; loopback names stay local)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return str(socket.getaddrinfo(host, None)[0][4][0])
    except OSError as exc:
        raise InputError(f"cannot resolve host {host!r}: {exc}") from exc


def check_allowed(host: str, allow_targets: list[str] | tuple[str, ...] = ()) -> str:
    """The target's IP if it is loopback or inside an allowed CIDR; else UnsafeTargetError."""
    ip = ipaddress.ip_address(resolve_ip(host))
    if ip.is_loopback:
        return str(ip)
    for cidr in allow_targets:
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise InputError(f"not a CIDR in allow_targets: {cidr!r}") from exc
        if ip in network:
            return str(ip)
    raise UnsafeTargetError(
        f"refusing to send to {host} ({ip}): only loopback unless allow_targets names its network"
    )
