"""The server's address for the compiled stream loops (stream_fast.py, doh_fast.py).

The C engines connect to an address; the Python loop (conn.StreamFlow.connect) connects
to (host, port), so a name is resolved at every connect and a reconnect follows a name
that now points elsewhere (a container restarted with a new address). Target does that
resolving for the compiled loops, the same way: in the family StreamFlow's socket has
(worker.family_of: IPv4 for a name), the first address getaddrinfo gives. The driver asks
again at most once a second (Target.follow, from udp_fast.drive's loop) and hands a
changed address to the engine (Engine.set_address): connects under way keep theirs, later
ones go to the new one. A name that does not resolve is no address: each connect then
fails and counts a connection error, as the Python loop's connect does.

The asking again runs in a thread of its own: getaddrinfo blocks for as long as the
machine's resolver takes (77 ms for a name that does not exist, measured here, against
0.1 ms for localhost from /etc/hosts), and the engine keeps sending meanwhile (its run
releases the GIL while it waits for its sockets). The answer is handed on at the
driver's next follow.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from typing import Any

from soak.clock import NS_PER_S
from soak.load.worker import family_of, monotonic_ns

RESOLVE_EVERY_NS = NS_PER_S  # udp_fast.drive's per-second cadence

Resolver = Callable[[str, int], str | None]


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def resolve(host: str, port: int) -> str | None:
    """host's address as StreamFlow.connect's socket reaches it; None when it does not
    resolve (or resolves to no address of that family)."""
    try:
        infos = socket.getaddrinfo(host, port, family_of(host), socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    return str(infos[0][4][0]) if infos else None


class Target:
    """Where a compiled engine connects: an address literal as given; a name resolved now
    and again, in a thread, when follow() finds a second gone by."""

    def __init__(self, host: str, port: int, resolver: Resolver = resolve) -> None:
        self.host, self.port = host, port
        self.is_name = not is_address(host)
        self.resolver = resolver
        self.address: str | None = resolver(host, port) if self.is_name else host
        self.latest = self.address  # the last answer of the asking thread
        self.asking: threading.Thread | None = None
        self.next_ns = monotonic_ns() + RESOLVE_EVERY_NS

    def follow(self, engine: Any, now_ns: int) -> None:
        """A new answer handed to the engine; the name asked again once a second (never
        twice at once). Nothing for an address literal."""
        if not self.is_name:
            return
        if self.latest != self.address:
            self.address = self.latest
            engine.set_address(self.address, self.port)
        if now_ns >= self.next_ns and (self.asking is None or not self.asking.is_alive()):
            self.next_ns = now_ns + RESOLVE_EVERY_NS
            self.asking = threading.Thread(target=self.ask, name="soak-resolve", daemon=True)
            self.asking.start()

    def ask(self) -> None:
        self.latest = self.resolver(self.host, self.port)
