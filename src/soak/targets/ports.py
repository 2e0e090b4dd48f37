"""Host ports for targets: free ones chosen, given ones checked before start."""

from __future__ import annotations

import contextlib
import socket

from soak.errors import TargetStartError
from soak.targets.specs import PortSpec


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def port_free(host: str, port: int, protocol: str = "both") -> bool:
    """True when `port` can be bound on `host` now for the protocol(s) named."""
    kinds = {
        "tcp": [socket.SOCK_STREAM],
        "udp": [socket.SOCK_DGRAM],
        "both": [socket.SOCK_STREAM, socket.SOCK_DGRAM],
    }[protocol]
    for kind in kinds:
        with socket.socket(_family(host), kind) as s:
            if kind == socket.SOCK_STREAM:
                # Lets a port in TIME_WAIT count as free, as a server's own bind would.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_port(host: str, avoid: set[int] | None = None) -> int:
    """A port free for both TCP and UDP on `host` right now (and not in `avoid`)."""
    avoid = avoid or set()
    for _ in range(100):
        with socket.socket(_family(host), socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port in avoid:
            continue
        with contextlib.suppress(OSError), socket.socket(_family(host), socket.SOCK_DGRAM) as u:
            u.bind((host, port))
            return port
    raise TargetStartError(f"no free port on {host}")


def allocate_ports(target: str, specs: dict[str, PortSpec], host: str) -> dict[str, int]:
    """Host port per named port: the given one if it is free, else a free one."""
    ports: dict[str, int] = {}
    for name, spec in specs.items():
        if spec.host is None:
            continue
        if spec.host in ports.values():
            raise TargetStartError(f"{target}: host port {spec.host} is given to two ports")
        if not port_free(host, spec.host, spec.protocol):
            raise TargetStartError(
                f"{target}: port {name} ({host}:{spec.host}/{spec.protocol}) is already in use"
            )
        ports[name] = spec.host
    for name, spec in specs.items():
        if spec.host is None:
            ports[name] = free_port(host, set(ports.values()))
    return ports
