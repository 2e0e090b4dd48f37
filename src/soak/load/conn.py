"""Connections of the stream transports (TCP, DoT, DoH) and how they live.

A StreamFlow is one client connection: it connects (and for DoT and DoH does
the TLS handshake, resuming the previous session when asked), carries
pipelined queries, and follows its class's ConnectionPolicy: after
`queries_per_connection` queries, or at `reconnect_every_s` of age, it stops
taking queries, waits for its answers (or the timeout), stays idle for
`idle_s`, closes and connects again; or, for a hang-up client, resets the
connection as soon as its last query has left. Handshake times and connection errors go
into the worker's Book. The loop in tcp.py drives these; DoH's HTTP/2
framing is in doh.py.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import ssl
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from soak.clock import ns_to_us, s_to_ns
from soak.load import wire
from soak.load.worker import Book, monotonic_ns

RECONNECT_NS = 100_000_000  # at most this often while the server refuses
CONNECT_TIMEOUT_NS = s_to_ns(1.0)  # TCP connect plus TLS handshake
LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a RST
DOWN, CONNECTING, HANDSHAKE, UP = range(4)


@dataclass(frozen=True)
class Policy:
    """A class's ConnectionPolicy in plain numbers (it crosses into worker processes)."""

    queries_per_connection: int | None = None
    idle_ns: int = 0
    reconnect_every_ns: int | None = None
    hangup_fraction: float = 0.0

    @property
    def churns(self) -> bool:
        return self.queries_per_connection is not None or self.reconnect_every_ns is not None


@dataclass(frozen=True)
class TlsSpec:
    resumption: bool = True
    server_name: str | None = None
    ca_file: str | None = None
    alpn: tuple[str, ...] = ()


def alpn_wire(protocols: tuple[str, ...]) -> bytes:
    """ALPN names as the compiled loops hand them to OpenSSL (TLS wire form): each
    prefixed with its length."""
    return b"".join(bytes([len(p)]) + p.encode() for p in protocols)


def tls_context(tls: TlsSpec) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if tls.ca_file is not None:
        ctx.load_verify_locations(tls.ca_file)
        ctx.check_hostname = tls.server_name is not None
    else:  # a load generator measures the server; it does not authenticate it
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if not tls.resumption:
        ctx.options |= ssl.OP_NO_TICKET
    if tls.alpn:
        ctx.set_alpn_protocols(list(tls.alpn))
    return ctx


def assign_flows(flows: int, weights: Sequence[float], own: bool) -> list[list[int]]:
    """Which connections carry which class: all share all, or (own) each class has its
    own, `flows` split by weight with at least one each."""
    n = len(weights)
    if not own:
        return [list(range(flows)) for _ in range(n)]
    total = sum(weights)
    counts = [max(1, round(flows * w / total)) for w in weights]
    out, first = [], 0
    for count in counts:
        out.append(list(range(first, first + count)))
        first += count
    return out


def slot_plan(
    flows: int, weights: Sequence[float], policies: Sequence[Policy]
) -> tuple[list[list[int]], list[int]]:
    """A worker's connection slots: per class the slots it sends on (assign_flows: each
    class its own when any policy churns), and per slot the class whose policy it
    follows (the first that sends on it)."""
    pools = assign_flows(flows, weights, any(p.churns for p in policies))
    nslots = max(i for pool in pools for i in pool) + 1
    owner = [next(c for c, pool in enumerate(pools) if i in pool) for i in range(nslots)]
    return pools, owner


class StreamFlow:
    """One TCP or DoT connection with 2-byte length framing (RFC 7766, wire.py).

    Opening never blocks the worker's loop: connect() starts a non-blocking TCP
    connect and advance() moves it on (TCP established, then the TLS handshake
    step by step) whenever epoll says the socket is ready. Queries can be queued
    from the start; they leave once the connection is up, so their latency
    includes the opening, as a real client's would.
    """

    def __init__(
        self,
        host: str,
        port: int,
        policy: Policy,
        book: Book,
        tls: ssl.SSLContext | None = None,
        hangup: bool = False,
    ) -> None:
        self.addr = (host, port)
        self.policy = policy
        self.book = book
        self.tls = tls
        self.server_name: str | None = None
        self.session: ssl.SSLSession | None = None
        self.resume = True
        self.sock: socket.socket | None = None
        self.phase = DOWN
        self.hs_events = select.EPOLLOUT  # what the TLS handshake waits for
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        # The socket counters (Book.socket_sent): where each queued query's last byte
        # lies, counted from the connection's first byte, and how many bytes the socket
        # has taken. A query is sent at the socket once its last byte is taken.
        self.query_ends: deque[int] = deque()
        self.written_bytes = 0
        self.retry_ns = 0
        self.start_ns = 0  # the connect began (handshake_ms counts from here)
        self.born_ns = 0  # up since (reconnect_every_s counts from here)
        self.carried = 0  # queries sent on this connection
        self.answered = 0
        self.last_send_ns = 0
        self.close_at_ns = 0  # > 0 once it is spent and its answers are in: closes then
        self.goaway = False
        # A client that hangs up once spent: its queries in flight, (slot, sent_ns).
        self.hangup = hangup
        self.inflight: list[tuple[int, int]] | None = [] if hangup else None

    # ------------------------------------------------------------ lifecycle

    def connect(self, now: int) -> bool:
        """Starts opening (non-blocking); False when it could not even start."""
        if now < self.retry_ns:
            return False
        self.retry_ns = now + RECONNECT_NS
        family = socket.AF_INET6 if ":" in self.addr[0] else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = s.connect_ex(self.addr)
        except OSError:
            err = -1
        if err not in (0, errno.EINPROGRESS):
            s.close()
            self.book.conn_errors += 1
            return False
        self.sock = s
        self.phase = CONNECTING
        self.start_ns = monotonic_ns()
        self.rbuf.clear()
        self.unwritten()
        self.carried = self.answered = 0
        self.close_at_ns = 0
        self.goaway = False
        self.started()
        return True

    def events(self) -> int:
        """What epoll should wait for on this connection now."""
        if self.phase == CONNECTING:
            return select.EPOLLOUT
        if self.phase == HANDSHAKE:
            return self.hs_events
        return select.EPOLLIN

    def advance(self) -> bool | None:
        """One step of opening: True once up, False while under way, None if it failed
        (counted in connection_errors; the caller drops it)."""
        s = self.sock
        assert s is not None
        try:
            if self.phase == CONNECTING:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                if self.tls is None:
                    return self.opened(s)
                s = self.sock = self.tls.wrap_socket(
                    s,
                    server_hostname=self.server_name,
                    session=self.session if self.resume else None,
                    do_handshake_on_connect=False,
                )
                self.phase = HANDSHAKE
            assert isinstance(s, ssl.SSLSocket)
            try:
                s.do_handshake()
            except ssl.SSLWantReadError:
                self.hs_events = select.EPOLLIN
                return False
            except ssl.SSLWantWriteError:
                self.hs_events = select.EPOLLOUT
                return False
            if not self.handshake_ok(s):
                raise ssl.SSLError("ALPN: the server did not agree on the protocol")
        except (OSError, ValueError):
            self.book.conn_errors += 1
            return None
        return self.opened(s)

    def opened(self, s: socket.socket) -> bool:
        book = self.book
        done = monotonic_ns()
        self.phase = UP
        self.born_ns = done
        book.conn_opened += 1
        if isinstance(s, ssl.SSLSocket) and s.session_reused:
            book.conn_resumed += 1
        us = ns_to_us(done - self.start_ns)
        book.handshake_us[us] = book.handshake_us.get(us, 0) + 1
        return True

    def opening_expired(self, now: int) -> bool:
        """Still not up after CONNECT_TIMEOUT_NS (counted as a connection error)."""
        if self.sock is None or self.phase == UP or now - self.start_ns < CONNECT_TIMEOUT_NS:
            return False
        self.book.conn_errors += 1
        return True

    def hang_up(self) -> None:
        """Close at once with a TCP RST, answers still due: they end as abandoned."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
        for slot, sent_ns in self.inflight or ():
            self.book.abandon(slot, sent_ns)
        self.book.conn_hung_up += 1
        self.close()

    def ready_to_hang_up(self) -> bool:
        """A hang-up client whose last query has left (it does not wait for answers)."""
        return self.hangup and self.phase == UP and not self.wbuf

    def handshake_ok(self, s: ssl.SSLSocket) -> bool:
        return True

    def started(self) -> None:
        """Hook: what a new connection sends first (DoH: the HTTP/2 preface)."""

    def current_session(self) -> ssl.SSLSession | None:
        """The TLS session to resume (TLS 1.3 tickets arrive after the handshake)."""
        if isinstance(self.sock, ssl.SSLSocket):
            with contextlib.suppress(AttributeError, ValueError):
                return self.sock.session or self.session
        return self.session

    def close(self) -> None:
        if self.sock is not None:
            self.session = self.current_session()
            with contextlib.suppress(OSError):
                self.sock.close()
        self.sock = None
        self.phase = DOWN
        self.unwritten()
        self.rbuf.clear()

    def unwritten(self) -> None:
        """The queries still queued, not taken whole by the socket, never will be: each
        was counted sent and fails at the socket (Book.send_failed); the buffer empties."""
        self.book.send_failed += len(self.query_ends)
        self.query_ends.clear()
        self.written_bytes = 0
        self.wbuf.clear()

    def spent(self, now: int) -> bool:
        """Done under its policy (quota carried, age reached) or told to go away (DoH)."""
        if self.goaway:
            return True
        p = self.policy
        if p.queries_per_connection is not None and self.carried >= p.queries_per_connection:
            return True
        return (
            p.reconnect_every_ns is not None
            and self.phase == UP  # its age counts from the end of the opening
            and now - self.born_ns >= p.reconnect_every_ns
        )

    def keeps_queries(self, now: int) -> bool:
        """Up or opening, and not spent: a client that stays on its connection (the
        replay's) sends its next query here, to wait its turn if need be."""
        return self.sock is not None and not self.spent(now)

    def accepting(self, now: int) -> bool:
        """Up or opening, and still taking queries (DoH: also below the server's
        streams in flight, so that the load's pool picks another)."""
        return self.keeps_queries(now)

    def due_to_close(self, now: int, timeout_ns: int) -> bool:
        """True once a spent connection's answers are in (or timed out) and its idle time
        is over."""
        if self.sock is None or not self.spent(now):
            return False
        if not self.close_at_ns:
            if self.answered < self.carried and now - self.last_send_ns < timeout_ns:
                return False
            self.close_at_ns = now + self.policy.idle_ns
        return now >= self.close_at_ns

    # ------------------------------------------------------------ traffic

    def queue(self, slot: int, question: bytes, now: int) -> None:
        self.wbuf += wire.framed_query(question, slot)
        self.query_ends.append(self.written_bytes + len(self.wbuf))
        self.carried += 1
        self.last_send_ns = now

    def flush(self) -> bool:
        """Write what is buffered (once up); False when the connection broke."""
        if self.sock is None or not self.wbuf or self.phase != UP:
            return self.sock is not None
        try:
            n = self.sock.send(self.wbuf)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return True
        except OSError:
            return False
        ends = self.query_ends
        if n == len(self.wbuf):  # the usual case: all of it, every queued query whole
            self.book.socket_sent += len(ends)
            ends.clear()
            self.written_bytes = 0
        else:
            self.written_bytes += n
            while ends and ends[0] <= self.written_bytes:
                ends.popleft()
                self.book.socket_sent += 1
        del self.wbuf[:n]
        return True

    def read(self) -> bytes | None:
        """Everything readable now (b"" if nothing); None when the connection ended."""
        assert self.sock is not None
        chunks: list[bytes] = []
        while True:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError:
                return None
            if not data:
                return None if not chunks else b"".join(chunks)
            chunks.append(data)
            if self.tls is None:
                break  # plain TCP: epoll brings us back; TLS may hold decrypted bytes
        return b"".join(chunks)

    def messages(self, data: bytes) -> list[bytes]:
        """Complete DNS messages received (removed from the read buffer)."""
        buf = self.rbuf
        buf += data
        out, used = wire.unframe(buf)
        del buf[:used]
        self.answered += len(out)
        self.book.socket_received += len(out)
        return out
