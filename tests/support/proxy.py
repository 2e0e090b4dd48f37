"""A TCP relay on loopback in front of a real server that leaves chosen connections hanging.

Connection n (counted from 0 in the order accepted) is either relayed to the
server byte for byte, or, if n is in `stall`, accepted and never answered: no
byte reaches the server, so a TLS handshake on it waits forever. The relay
notes when each stalled connection was accepted and when the client gave up on
it, and when each chunk of client bytes was relayed, so that a test can ask
what the client did on its other connections while one was hanging.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Stalled:
    accepted_s: float
    closed_s: float | None = None


@dataclass
class Relay:
    port: int
    stalled: list[Stalled] = field(default_factory=list)
    relayed_s: list[float] = field(default_factory=list)  # client -> server chunks
    lock: threading.Lock = field(default_factory=threading.Lock)

    def relayed_between(self, start_s: float, end_s: float) -> int:
        with self.lock:
            return sum(1 for t in self.relayed_s if start_s < t < end_s)


def _pump(src: socket.socket, dst: socket.socket, relay: Relay | None) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            if relay is not None:
                with relay.lock:
                    relay.relayed_s.append(time.monotonic())
            dst.sendall(data)
    for s in (src, dst):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


def _wait_for_close(client: socket.socket, entry: Stalled) -> None:
    with contextlib.suppress(OSError):
        while client.recv(65536):
            pass  # the client's ClientHello: never answered
    entry.closed_s = time.monotonic()


@contextlib.contextmanager
def stalling_relay(server_port: int, stall: set[int]) -> Iterator[Relay]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    relay = Relay(listener.getsockname()[1])
    sockets: list[socket.socket] = [listener]
    stop = threading.Event()

    def accept() -> None:
        n = 0
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            sockets.append(client)
            if n in stall:
                entry = Stalled(time.monotonic())
                relay.stalled.append(entry)
                threading.Thread(target=_wait_for_close, args=(client, entry), daemon=True).start()
            else:
                upstream = socket.create_connection(("127.0.0.1", server_port))
                sockets.append(upstream)
                for a, b, r in ((client, upstream, relay), (upstream, client, None)):
                    threading.Thread(target=_pump, args=(a, b, r), daemon=True).start()
            n += 1

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        stop.set()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        thread.join(timeout=5)
