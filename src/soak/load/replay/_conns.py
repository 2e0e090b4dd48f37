"""The replay's clients and their sockets (soak.load.replay._loop): each client's UDP
socket and stream connections, opened on its first query, reused while it keeps
asking, closed when idle, retired when the capture's client moved to a new
connection, and counted (connections opened, reused, errors, idled out, sockets at
once).

The queries themselves (the id ring, the ledger) stay with the Replay: this module
is told how to end a query abandoned under a closed connection (`abandon`) and
asks whether a query still waits for its answer (`waiting`).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from soak.clock import s_to_ns
from soak.load.conn import UP, Policy, StreamFlow, TlsSpec, tls_context
from soak.load.replay._result import Offsets, three_digits
from soak.traffic.replay_config import ReplayConfig

IDLE_SWEEP_NS = 100_000_000  # idle sockets looked for this often


class ConnBook:
    """What StreamFlow reports into (the worker's Book has these): connection counts,
    handshake times, and queries abandoned when a connection is closed under them."""

    def __init__(self, abandon: Callable[[int], None]) -> None:
        self.end_abandoned = abandon
        self.conn_opened = self.conn_errors = self.conn_resumed = self.conn_hung_up = 0
        self.handshake_us: dict[int, int] = {}
        # The sockets' own counts (soak.load.stats.SocketCounts): queries the sockets
        # took whole, queries counted sent they refused (or with no socket or
        # connection), replies read; StreamFlow and ClientConns.send_udp keep them.
        self.socket_sent = self.socket_received = self.send_failed = 0
        # What a DoH server's HTTP/2 layer said (the compiled DoH loop counts it, and
        # doh.DohFlow in the Python one): streams it ended with an error code (RST_STREAM,
        # or above a GOAWAY's last stream id), of them REFUSED_STREAM (not processed), of
        # those sent again once on their connection (the compiled loop only; the others'
        # queries are lost), and GOAWAY frames.
        self.streams_reset = self.streams_refused = self.streams_retried = self.goaways = 0

    def abandon(self, slot: int, sent_ns: int) -> None:
        self.end_abandoned(slot)


@dataclass
class Client:
    """One client of the capture: its UDP socket or its connection, and its figures."""

    udp: socket.socket | None = None
    # Its connections by the capture's connection number: one client may hold several
    # at once (a resolver's forwarder, dnsperf -c), each reused until it idles out.
    flows: dict[int, StreamFlow] = field(default_factory=dict)
    loop: int = -1  # the loop its sockets were opened in
    last_ns: int = 0  # its last query left
    sent: int = 0
    lost: int = 0  # of its queries sent, ended lost (no answer within the timeout)
    inflight: set[int] = field(default_factory=set)  # ring slots
    # Its UDP socket of the loop before (rename_clients), still read until its last
    # query's timeout: an answer in flight is not lost to a port the replay closed.
    udp_old: socket.socket | None = None
    udp_old_until_ns: int = 0

    def udp_for(self, fd: int) -> socket.socket | None:
        """Its UDP socket with descriptor fd (this loop's, or the last one's)."""
        if self.udp is not None and self.udp.fileno() == fd:
            return self.udp
        return self.udp_old


class ClientConns:
    """Every client's sockets and connections, registered in one epoll (`ep`) that the
    Replay's loop polls; `by_fd` maps a readable descriptor back to its client."""

    def __init__(
        self,
        cfg: ReplayConfig,
        clients: int,
        server: tuple[str, int],
        tls: TlsSpec | None,
        abandon: Callable[[int], None],
        waiting: Callable[[int], bool],
        timeout_ns: int = 0,
    ) -> None:
        self.host, self.port = server
        self.timeout_ns = timeout_ns  # a query's: how long a retired UDP socket is read
        self.transport = cfg.transport
        self.idle_ns = s_to_ns(cfg.idle_timeout_s)
        self.abandon, self.waiting = abandon, waiting
        self.clients = [Client() for _ in range(clients)]
        self.family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self.tls = tls  # as given (the compiled stream loop makes its own context of it)
        self.ctx: ssl.SSLContext | None = None
        if cfg.transport in ("dot", "doh"):
            spec = tls or TlsSpec()
            if cfg.transport == "doh":
                spec = TlsSpec(spec.resumption, spec.server_name, spec.ca_file, ("h2",))
            self.ctx = tls_context(spec)
        self.book = ConnBook(abandon)
        # Connection set-up times (µs, three digits: three_digits), folded in from the
        # book's whole-µs dict as the replay goes, so that a day of reconnecting
        # clients keeps a bounded histogram rather than a key for every µs of the tail.
        self.handshake = Offsets()
        self.ep = select.epoll()
        self.by_fd: dict[int, tuple[Client, StreamFlow | None]] = {}
        self.holding: set[int] = set()  # clients with a socket or connection open
        self.next_idle_ns = 0
        self.retiring: list[tuple[Client, StreamFlow]] = []
        self.conn_of: dict[StreamFlow, int] = {}  # each open flow's captured connection
        self.idled_out = self.socket_errors = 0
        self.reused = 0  # queries sent on a connection already open (not its first)
        self.open_sockets = self.fds_peak = 0

    def counts(self) -> dict[str, int]:
        """The connection figures so far, from the first query: the replay's result
        shows them whole, a soak run's windows their growth (soak.load.replay._run_load)."""
        b = self.book
        return {
            "opened": b.conn_opened,
            "reused": self.reused,
            "errors": b.conn_errors,
            "tls_resumed": b.conn_resumed,
            "idled_out": self.idled_out,
            "udp_socket_errors": self.socket_errors,
            "streams_reset": b.streams_reset,
            "streams_refused": b.streams_refused,
            "streams_retried": b.streams_retried,
            "goaways": b.goaways,
        }

    # ------------------------------------------------------------ opening

    def udp_socket(self, client: Client) -> socket.socket | None:
        try:
            s = socket.socket(self.family, socket.SOCK_DGRAM)
        except OSError:  # out of file descriptors: counted, the query ends lost
            self.socket_errors += 1
            return None
        s.setblocking(False)
        s.connect((self.host, self.port))
        self.ep.register(s.fileno(), select.EPOLLIN)
        self.by_fd[s.fileno()] = (client, None)
        self.opened_socket()
        return s

    def send_udp(self, client: Client, message: bytes | bytearray) -> None:
        """The query leaves on the client's socket, or is refused (full, an ICMP error
        pending, no socket): either way sent, and a refused one will be lost."""
        try:
            if client.udp is not None:
                client.udp.send(message)
                self.book.socket_sent += 1
                return
        except OSError:
            pass
        self.book.send_failed += 1

    def sockets(self) -> dict[str, int]:
        """result.json's engine_counters (soak.load.stats.SocketCounts.as_dict)."""
        b = self.book
        return {
            "socket_sent": b.socket_sent,
            "socket_received": b.socket_received,
            "send_failed": b.send_failed,
        }

    def opened_socket(self) -> None:
        self.open_sockets += 1
        self.fds_peak = max(self.fds_peak, self.open_sockets)

    def new_flow(self, client: Client, now: int) -> StreamFlow | None:
        if self.transport == "doh":
            from soak.load.doh import DohFlow

            doh = DohFlow(self.host, self.port, Policy(), self.book, self.ctx)  # type: ignore[arg-type]
            doh.moves_unprocessed = True  # after a GOAWAY: move_unprocessed
            # a request held on a full connection past its query's timeout is not sent
            doh.held_timeout_ns, doh.waiting = self.timeout_ns, self.waiting
            f: StreamFlow = doh
        else:
            f = StreamFlow(self.host, self.port, Policy(), self.book, self.ctx)  # type: ignore[arg-type]
        f.inflight = []  # (slot, sent) of its queries: abandoned if the replay closes it
        try:
            started = f.connect(now)
        except OSError:  # out of file descriptors: counted, the query ends lost
            self.book.conn_errors += 1
            return None
        if not started or f.sock is None:
            return None
        self.ep.register(f.sock.fileno(), f.events())
        self.by_fd[f.sock.fileno()] = (client, f)
        self.opened_socket()
        return f

    def stream_for(self, client: Client, conn: int, now: int) -> StreamFlow | None:
        """The client's connection for its captured connection `conn`: the one it has
        while that takes queries (a DoH connection at the server's streams in flight too:
        the query waits on it for a stream, DohFlow.queue), else a new one (the old one
        retired: told to go away)."""
        f = client.flows.get(conn)
        if f is not None and f.keeps_queries(now):
            self.reused += 1
            return f
        if f is not None:
            self.retire(client, f)
        f = self.new_flow(client, now)
        if f is not None:
            client.flows[conn] = f
            self.conn_of[f] = conn
        return f

    def move_unprocessed(
        self, client: Client, f: StreamFlow, now: int, question: Callable[[int], bytes]
    ) -> None:
        """A DoH server's GOAWAY: the requests it did not process (DohFlow.unprocessed)
        sent once on the client's next connection for the same captured connection (RFC
        9113 6.8), each still its query (its slot, its send time); counted retried."""
        from soak.load.doh import DohFlow

        if not isinstance(f, DohFlow) or not f.unprocessed:
            return
        moving, f.unprocessed = f.unprocessed, []
        conn = self.conn_of.get(f)
        sent_at = dict(f.inflight or ())
        f.inflight = [(slot, t) for slot, t in f.inflight or () if slot not in dict(moving)]
        reused = self.reused  # queries already counted, not more on an open connection
        g = self.stream_for(client, conn, now) if conn is not None else None
        self.reused = reused
        if not isinstance(g, DohFlow):  # no connection could even start: lost
            return
        assert g.inflight is not None
        for slot, counted in moving:
            if self.waiting(slot):  # still in flight (not timed out meanwhile)
                g.move_in(slot, question(slot), counted, now)
                g.inflight.append((slot, sent_at[slot]))
                self.book.streams_retried += 1
        if g.phase == UP and not g.flush():
            self.book.conn_errors += 1
            self.dropped(client, g)

    # ------------------------------------------------------------ closing

    def close_udp(self, client: Client) -> None:
        self.close_udp_old(client)
        if client.udp is not None:
            self.by_fd.pop(client.udp.fileno(), None)
            client.udp.close()  # closing unregisters it from epoll
            client.udp = None
            self.open_sockets -= 1

    def close_udp_old(self, client: Client) -> None:
        if client.udp_old is not None:
            self.by_fd.pop(client.udp_old.fileno(), None)
            client.udp_old.close()
            client.udp_old = None
            self.open_sockets -= 1

    def retire_udp(self, client: Client) -> None:
        """A client's new loop (rename_clients): its next query leaves from a new port,
        while this socket is read until its last query's timeout. An older one still
        open closes: what it carries ends lost."""
        self.close_udp_old(client)
        if client.udp is None:
            return
        if not client.inflight:
            self.close_udp(client)
            return
        client.udp_old, client.udp = client.udp, None
        client.udp_old_until_ns = client.last_ns + self.timeout_ns

    def close_flow(self, client: Client, f: StreamFlow) -> None:
        """Closed on purpose: what is still in flight on it is abandoned."""
        for slot, _sent in f.inflight or ():
            self.abandon(slot)
        self.dropped(client, f)

    def dropped(self, client: Client, f: StreamFlow) -> None:
        """Closed by the server or broken: its queries end lost at their timeout."""
        if f.sock is not None:
            self.by_fd.pop(f.sock.fileno(), None)
            with contextlib.suppress(OSError):
                self.ep.unregister(f.sock.fileno())
            self.open_sockets -= 1
        f.inflight = []
        f.close()
        forget(client, f)
        self.conn_of.pop(f, None)

    def retire(self, client: Client, f: StreamFlow) -> None:
        """The client moves to a new connection; the old one closes once answered."""
        forget(client, f)
        if not self.in_flight(f):
            self.close_flow(client, f)
        else:
            self.retiring.append((client, f))

    def in_flight(self, f: StreamFlow) -> bool:
        """Whether a query sent on `f` still waits for its answer."""
        return any(self.waiting(slot) for slot, _ in f.inflight or ())

    # ------------------------------------------------------------ housekeeping

    def sweep(self, now: int) -> None:
        """Idle sockets close (every IDLE_SWEEP_NS), retiring connections once answered."""
        if now >= self.next_idle_ns:
            self.next_idle_ns = now + IDLE_SWEEP_NS
            self.idle(now)
            self.fold_handshakes()
        for client, f in list(self.retiring):
            if not self.in_flight(f):
                self.retiring.remove((client, f))
                self.close_flow(client, f)

    def fold_handshakes(self) -> None:
        """The set-up times StreamFlow wrote by whole µs since the last fold, into
        `handshake`; the book's dict emptied (nothing else reads it here)."""
        book = self.book.handshake_us
        for us, n in book.items():
            self.handshake.counts[three_digits(us)] += n
        book.clear()

    def idle(self, now: int) -> None:
        """Sockets idle for idle_timeout_s with nothing in flight close (UDP ones too: a
        capture's clients outnumber the file descriptors a process may hold)."""
        for k in list(self.holding):
            client = self.clients[k]
            for f in list(client.flows.values()):
                if f.opening_expired(now):
                    self.dropped(client, f)
                elif now - f.last_send_ns > self.idle_ns and not self.in_flight(f):
                    self.idled_out += 1
                    self.close_flow(client, f)
            if client.udp_old is not None and now > client.udp_old_until_ns:
                self.close_udp_old(client)
            if (
                client.udp is not None
                and not client.inflight
                and now - client.last_ns > self.idle_ns
            ):
                self.close_udp(client)
            if client.udp is None and client.udp_old is None and not client.flows:
                self.holding.discard(k)

    def shut(self) -> None:
        """Every socket closed (in flight on a connection: abandoned), then the epoll."""
        for client in self.clients:
            self.close_udp(client)
            for f in list(client.flows.values()):
                self.close_flow(client, f)
        for client, f in self.retiring:
            self.close_flow(client, f)
        self.fold_handshakes()
        self.ep.close()


def forget(client: Client, f: StreamFlow) -> None:
    """`f` no longer takes the client's queries (closed, or retiring)."""
    for conn, held in list(client.flows.items()):
        if held is f:
            del client.flows[conn]
