"""A DoH server on loopback that says GOAWAY after every `per_connection` answers.

No server here can be made to end its HTTP/2 connections on purpose, so this one
does (h2 and ssl, a thread per connection): it answers each POST by echoing the
query with the QR bit set (an answer the load engine matches), and after the
n-th answer on a connection sends GOAWAY (NO_ERROR, that stream the last one it
took), answers nothing more on it and waits for the client to close. A fault
stand-in, not a DNS server.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import h2.config
import h2.connection
import h2.events


def _serve(conn: ssl.SSLSocket, per_connection: int) -> None:
    with contextlib.suppress(OSError):  # the client went first: nothing more to say
        _answer(conn, per_connection)


def _answer(conn: ssl.SSLSocket, per_connection: int) -> None:
    h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    h2c.initiate_connection()
    conn.sendall(h2c.data_to_send())
    bodies: dict[int, bytearray] = {}
    answered = 0
    with conn:
        while True:  # until the client closes: closing first would reset what it still sends
            data = conn.recv(65536)
            if not data:
                return
            if answered == per_connection:
                continue  # gone away: what still comes is read and dropped
            for ev in h2c.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    bodies.setdefault(ev.stream_id, bytearray()).extend(ev.data)
                    h2c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded) and answered < per_connection:
                    reply = bytearray(bodies.pop(ev.stream_id, b""))
                    if len(reply) >= 12:
                        reply[2] |= 0x80  # QR: an answer, NOERROR
                    headers = [(":status", "200"), ("content-type", "application/dns-message")]
                    h2c.send_headers(ev.stream_id, headers)
                    h2c.send_data(ev.stream_id, bytes(reply), end_stream=True)
                    answered += 1
                    if answered == per_connection:
                        h2c.close_connection(last_stream_id=ev.stream_id)
            conn.sendall(h2c.data_to_send())


@contextlib.contextmanager
def goaway_server(cert: tuple[Path, Path], per_connection: int) -> Iterator[int]:
    """The server's port while the block runs."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    ctx.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
                conn = ctx.wrap_socket(raw, server_side=True)
            except OSError:
                continue
            threading.Thread(target=_serve, args=(conn, per_connection), daemon=True).start()

    listener.settimeout(0.2)
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()
