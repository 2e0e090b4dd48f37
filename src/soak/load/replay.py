"""The replay load: a capture's clients, each with its own queries, timing and
connections, played loop after loop against a server (docs/replay.md).

One process, one epoll loop. Every client of the capture is a client here: a
UDP socket of its own, or a stream connection of its own (TCP, DoT, DoH through
conn.StreamFlow and doh.DohFlow, the stream loops' connections) that is reused
while the client keeps asking, closes after `idle_timeout_s` without a query
(nothing in flight), and opens again with the client's next query or where the
capture's client opened a new connection. With `rename_clients`, each loop
starts from new sockets, so the server meets new source ports and connections.

Each query is sent at its planned time (replay_plan.Plan) and counted in the
ledger's window of the second it was due (soak.load.ledger), per class: due,
sent, skipped (more than MAX_BACKLOG_S behind: the generator could not keep
up), completed, lost, abandoned (in flight on a connection the replay closed).
How far each send strayed from its planned time is recorded (fidelity).
"""

from __future__ import annotations

import collections
import contextlib
import select
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from soak.load import wire
from soak.load.conn import UP, Policy, StreamFlow, TlsSpec, tls_context
from soak.load.ledger import NS_PER_S, ClassWindow, Window, empty_window
from soak.load.replay_config import ReplayConfig
from soak.load.replay_plan import Plan, Planned
from soak.load.worker import MAX_BACKLOG_S, monotonic_ns
from soak.traffic.capture import UDP, Capture

RING = 65536
SWEEP_NS = 10_000_000  # timeouts and idle connections looked for this often
START_DELAY_NS = 50_000_000  # the first query leaves this long after the start
BACKLOG_NS = int(MAX_BACKLOG_S * NS_PER_S)
# Offsets of the send time from the planned one, in µs: p99 beyond this means the
# generator did not keep the capture's timing (said aloud, as generator-bound).
BOUND_P99_US = 10_000
MAX_PROBLEMS = 20


class ConnBook:
    """What StreamFlow reports into (the worker's Book has these): connection counts,
    handshake times, and queries abandoned when a connection is closed under them."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.conn_opened = self.conn_errors = self.conn_resumed = self.conn_hung_up = 0
        self.handshake_us: dict[int, int] = {}

    def abandon(self, slot: int, sent_ns: int) -> None:
        self.replay.end_query(slot, "abandoned", 0)


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
    inflight: set[int] = field(default_factory=set)  # ring slots


@dataclass
class ReplayResult:
    classes: list[str]
    per_class: list[ClassWindow]  # the closed windows summed
    windows: int  # how many seconds closed
    problems: list[str]  # ledger invariants broken (the first MAX_PROBLEMS)
    loops: int
    clients: int
    speed: float
    rate_qps: float
    duration_s: float
    sent_per_client: list[int]
    offset_us: dict[str, float]  # p50, p99, max of the send time after the planned one
    generator_bound: bool
    connections: dict[str, int]
    unexpected: int
    late: int  # replies after their timeout (their queries counted lost)
    fds_peak: int  # client sockets open at once, at most

    def as_dict(self) -> dict[str, Any]:
        per = self.per_class
        total = ClassWindow()
        for cw in per:
            total.add(cw)
        counts = ("due", "sent", "skipped", "completed", "lost", "abandoned")
        return {
            "engine": "replay",
            **{k: getattr(total, k) for k in counts},
            "classes": {
                name: {k: getattr(cw, k) for k in counts}
                for name, cw in zip(self.classes, per, strict=True)
            },
            "rcodes": total.rcodes,
            "loops": self.loops,
            "clients": self.clients,
            "speed": round(self.speed, 6),
            "rate_qps": round(self.rate_qps, 3),
            "duration_s": round(self.duration_s, 3),
            "send_offset_us": self.offset_us,
            "generator_bound": self.generator_bound,
            "connections": self.connections,
            "unexpected": self.unexpected,
            "late": self.late,
            "client_sockets_peak": self.fds_peak,
            "sent_per_client": self.sent_per_client,
            "windows": self.windows,
            "problems": self.problems,
        }


class Offsets:
    """Send-time offsets (µs after the planned time) as counts per value."""

    def __init__(self) -> None:
        self.counts: collections.Counter[int] = collections.Counter()

    def add(self, us: int) -> None:
        """Exact below 1 ms, three significant digits above: the counter stays small
        however far behind the generator falls."""
        if us >= 1000:
            scale = 10 ** (len(str(us)) - 3)
            us = us // scale * scale
        self.counts[us] += 1

    def quantiles(self) -> dict[str, float]:
        n = sum(self.counts.values())
        if not n:
            return {"p50": 0.0, "p99": 0.0, "max": 0.0}
        out: dict[str, float] = {}
        want = [("p50", 0.5), ("p99", 0.99)]
        seen = 0
        for us in sorted(self.counts):
            seen += self.counts[us]
            while want and seen >= want[0][1] * n:
                out[want.pop(0)[0]] = float(us)
        out["max"] = float(max(self.counts))
        return out


class Replay:
    def __init__(
        self,
        cfg: ReplayConfig,
        capture: Capture,
        host: str,
        port: int,
        timeout_s: float,
        seed: int = 0,
        tls: TlsSpec | None = None,
    ) -> None:
        self.cfg, self.host, self.port = cfg, host, port
        self.plan = Plan(cfg, capture, seed)
        self.nc = len(self.plan.classes.names)
        self.timeout_ns = int(timeout_s * NS_PER_S)
        self.idle_ns = int(cfg.idle_timeout_s * NS_PER_S)
        self.clients = [Client() for _ in capture.clients]
        self.family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.ctx: ssl.SSLContext | None = None
        if cfg.transport in ("dot", "doh"):
            spec = tls or TlsSpec()
            if cfg.transport == "doh":
                spec = TlsSpec(spec.resumption, spec.server_name, spec.ca_file, ("h2",))
            self.ctx = tls_context(spec)
        self.book = ConnBook(self)
        self.ep = select.epoll()
        self.by_fd: dict[int, tuple[Client, StreamFlow | None]] = {}
        # The id ring: send time (> 0 while in flight), class, question, due second, client.
        self.ring_t = [0] * RING
        self.ring_c = [0] * RING
        self.ring_q: list[bytes] = [b""] * RING
        self.ring_w = [0] * RING
        self.ring_k = [0] * RING
        self.next_slot = 0
        self.sent_order: collections.deque[tuple[int, int]] = collections.deque()
        self.windows: dict[int, Window] = {}
        self.inflight: collections.Counter[int] = collections.Counter()
        # Closed windows are summed as they close (a day's replay keeps no day of
        # windows); `on_window` hands each to whoever records the ledger.
        self.per_class = [ClassWindow() for _ in range(self.nc)]
        self.closed_below = 0
        self.closed_count = 0
        self.problems: list[str] = []
        self.on_window: Callable[[Window], None] | None = None
        self.offsets = Offsets()
        self.unexpected = self.late = 0
        self.retiring: list[tuple[Client, StreamFlow]] = []
        self.idled_out = 0
        self.open_sockets = self.fds_peak = 0
        self.loops_seen = 0

    # ------------------------------------------------------------ the ledger

    def count(self, second: int, c: int, what: str, n: int = 1) -> None:
        w = self.windows.get(second)
        if w is None:
            w = self.windows[second] = empty_window(second, self.nc)
        cw = w.classes[c]
        setattr(cw, what, getattr(cw, what) + n)

    def end_query(self, slot: int, how: str, now: int, reply: bytes = b"") -> None:
        """A query in flight ends: completed (with its reply), lost or abandoned."""
        t = self.ring_t[slot]
        if t <= 0:
            return
        self.ring_t[slot] = -t if how == "lost" else 0
        second, c = self.ring_w[slot], self.ring_c[slot]
        self.clients[self.ring_k[slot]].inflight.discard(slot)
        self.inflight[second] -= 1
        cw = self.windows[second].classes[c]
        if how == "completed":
            cw.completed += 1
            us = (now - t) // 1000
            cw.lat_us[us] = cw.lat_us.get(us, 0) + 1
            code = wire.rcode(reply)
            cw.rcodes[code] = cw.rcodes.get(code, 0) + 1
        elif how == "lost":
            cw.lost += 1
        else:
            cw.abandoned += 1

    def close_windows(self, below: int) -> None:
        """Every second before `below` with nothing in flight, in order."""
        for second in sorted(self.windows):
            if second >= below or self.inflight[second] > 0:
                break
            self.closed_window(self.windows.pop(second))
            del self.inflight[second]

    def closed_window(self, w: Window) -> None:
        for total, cw in zip(self.per_class, w.classes, strict=True):
            total.add(cw)
        if len(self.problems) < MAX_PROBLEMS:
            self.problems += w.problems()[: MAX_PROBLEMS - len(self.problems)]
        self.closed_count += 1
        self.closed_below = w.second + 1
        if self.on_window is not None:
            self.on_window(w)

    # ------------------------------------------------------------ clients

    def transport_of(self, q: Planned) -> str:
        if self.cfg.transport == "capture":
            return "udp" if q.transport == UDP else "tcp"
        return self.cfg.transport

    def udp_socket(self, client: Client) -> socket.socket:
        s = socket.socket(self.family, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.connect((self.host, self.port))
        self.ep.register(s.fileno(), select.EPOLLIN)
        self.by_fd[s.fileno()] = (client, None)
        self.opened_socket()
        return s

    def opened_socket(self) -> None:
        self.open_sockets += 1
        self.fds_peak = max(self.fds_peak, self.open_sockets)

    def new_flow(self, client: Client, now: int) -> StreamFlow | None:
        if self.cfg.transport == "doh":
            from soak.load.doh import DohFlow

            f: StreamFlow = DohFlow(self.host, self.port, Policy(), self.book, self.ctx)  # type: ignore[arg-type]
        else:
            f = StreamFlow(self.host, self.port, Policy(), self.book, self.ctx)  # type: ignore[arg-type]
        f.inflight = []  # (slot, sent) of its queries: abandoned if the replay closes it
        if not f.connect(now) or f.sock is None:
            return None
        self.ep.register(f.sock.fileno(), f.events())
        self.by_fd[f.sock.fileno()] = (client, f)
        self.opened_socket()
        return f

    def close_udp(self, client: Client) -> None:
        if client.udp is not None:
            self.by_fd.pop(client.udp.fileno(), None)
            client.udp.close()  # closing unregisters it from epoll
            client.udp = None
            self.open_sockets -= 1

    def close_flow(self, client: Client, f: StreamFlow) -> None:
        """Closed on purpose: what is still in flight on it is abandoned."""
        for slot, _sent in f.inflight or ():
            self.end_query(slot, "abandoned", 0)
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

    def stream_for(self, client: Client, q: Planned, now: int) -> StreamFlow | None:
        f = client.flows.get(q.conn)
        if f is None:
            f = self.new_flow(client, now)
            if f is not None:
                client.flows[q.conn] = f
        return f

    def retire(self, client: Client, f: StreamFlow) -> None:
        """The client moves to a new connection; the old one closes once answered."""
        forget(client, f)
        if not self.in_flight(f):
            self.close_flow(client, f)
        else:
            self.retiring.append((client, f))

    def in_flight(self, f: StreamFlow) -> bool:
        """Whether a query sent on `f` still waits for its answer."""
        return any(self.ring_t[slot] > 0 for slot, _ in f.inflight or ())

    # ------------------------------------------------------------ sending

    def take_slot(self) -> int:
        for _ in range(RING):
            slot = self.next_slot
            self.next_slot = (slot + 1) & (RING - 1)
            if self.ring_t[slot] <= 0:
                return slot
        return -1

    def send(self, q: Planned, second: int, planned_ns: int, now: int) -> None:
        client = self.clients[q.client]
        if client.loop != q.loop:
            if self.cfg.rename_clients and client.loop >= 0:
                self.close_udp(client)  # a new loop: a new source port
                for f in list(client.flows.values()):
                    self.retire(client, f)
            client.loop = q.loop
        slot = self.take_slot()
        self.count(second, q.cls, "due")
        if slot < 0:  # 65,536 in flight: this one cannot leave
            self.count(second, q.cls, "skipped")
            return
        message = bytearray(wire.HEADER + q.question)
        wire.set_id(message, slot)
        message[2], message[3] = q.flags >> 8, q.flags & 255
        transport = self.transport_of(q)
        t = monotonic_ns()
        if transport == "udp":
            if client.udp is None:
                client.udp = self.udp_socket(client)
            with contextlib.suppress(OSError):  # refused or full: it is sent and will be lost
                client.udp.send(message)
        else:
            flow = self.stream_for(client, q, now)
            if flow is not None:  # else no connection could even start: sent and lost
                self.queue(flow, slot, q, bytes(message), t)
        self.offsets.add((t - planned_ns) // 1000)
        self.ring_t[slot], self.ring_c[slot], self.ring_q[slot] = t, q.cls, q.question
        self.ring_w[slot], self.ring_k[slot] = second, q.client
        self.inflight[second] += 1
        self.count(second, q.cls, "sent")
        self.sent_order.append((t, slot))
        client.inflight.add(slot)
        client.sent += 1
        client.last_ns = t

    def queue(self, f: StreamFlow, slot: int, q: Planned, message: bytes, now: int) -> None:
        if self.cfg.transport == "doh":
            f.queue(slot, q.question, now)  # RFC 8484: id 0 on the wire, RD set
        else:  # the captured flags as they were (RD, CD ...), framed
            f.wbuf += wire.frame(message)
            f.carried += 1
            f.last_send_ns = now
        assert f.inflight is not None
        f.inflight.append((slot, now))
        if f.phase == UP and not f.flush():
            client = self.clients[q.client]
            self.book.conn_errors += 1
            self.dropped(client, f)

    # ------------------------------------------------------------ receiving

    def reply(self, data: bytes, now: int) -> None:
        if len(data) < wire.HEADER_LEN:
            self.unexpected += 1
            return
        slot = wire.message_id(data)
        t = self.ring_t[slot]
        if t == 0 or not wire.echoes(data, self.ring_q[slot]):
            self.unexpected += 1
            return
        if t < 0 or now - t > self.timeout_ns:  # after its timeout: late, already lost
            self.end_query(slot, "lost", now)
            self.late += 1  # its window may be closed already: counted apart
            self.ring_t[slot] = 0
            return
        self.end_query(slot, "completed", now, data)

    def readable(self, fd: int, now: int) -> None:
        got = self.by_fd.get(fd)
        if got is None:
            return
        client, f = got
        if f is None:
            assert client.udp is not None
            try:
                datagram = client.udp.recv(65535)
            except OSError:  # ICMP port unreachable: the query ends lost at its timeout
                return
            self.reply(datagram, now)
            return
        if f.sock is None:
            return
        if f.phase != UP:
            step = f.advance()
            if step is None:
                self.dropped(client, f)
            elif step:
                self.ep.modify(fd, f.events())
                if f.wbuf and not f.flush():
                    self.book.conn_errors += 1
                    self.dropped(client, f)
            else:
                self.ep.modify(fd, f.events())
            return
        data: bytes | None = f.read()
        if data:
            for msg in f.messages(data):
                self.reply(msg, now)
                if f.inflight:
                    f.inflight = [(s, t) for s, t in f.inflight if self.ring_t[s] > 0]
            if f.wbuf and not f.flush():
                data = None
        if data is None:
            self.dropped(client, f)

    # ------------------------------------------------------------ housekeeping

    def sweep(self, now: int) -> None:
        """Queries past their timeout end lost; idle connections close."""
        order, timeout = self.sent_order, self.timeout_ns
        while order and now - order[0][0] > timeout:
            t, slot = order.popleft()
            if self.ring_t[slot] == t:
                self.end_query(slot, "lost", now)
        for client in self.clients:
            for f in list(client.flows.values()):
                if f.opening_expired(now):
                    self.dropped(client, f)
                elif now - f.last_send_ns > self.idle_ns and not self.in_flight(f):
                    self.idled_out += 1
                    self.close_flow(client, f)
        for client, f in list(self.retiring):
            if not self.in_flight(f):
                self.retiring.remove((client, f))
                self.close_flow(client, f)

    # ------------------------------------------------------------ the loop

    def run(self, duration_s: float | None) -> ReplayResult:
        end_ns = None if duration_s is None else int(duration_s * NS_PER_S)
        plan: Iterator[Planned] = self.plan.queries(end_ns)
        origin = monotonic_ns() + START_DELAY_NS
        nxt = next(plan, None)
        next_sweep = origin
        try:
            while True:
                now = monotonic_ns()
                sent_here = 0
                while nxt is not None and origin + nxt.due_ns <= now and sent_here < 256:
                    planned = origin + nxt.due_ns
                    second = nxt.due_ns // NS_PER_S
                    if now - planned > BACKLOG_NS:  # too far behind: due, never sent
                        self.count(second, nxt.cls, "due")
                        self.count(second, nxt.cls, "skipped")
                    else:
                        self.send(nxt, second, planned, now)
                    self.loops_seen = max(self.loops_seen, nxt.loop + 1)
                    nxt = next(plan, None)
                    sent_here += 1
                    now = monotonic_ns()
                if nxt is None and not any(self.inflight.values()):
                    break
                if nxt is not None:
                    wait_ns = origin + nxt.due_ns - monotonic_ns()
                    timeout = 0 if wait_ns <= 0 else min(wait_ns / NS_PER_S, 0.01)
                else:
                    timeout = 0.01
                for fd, _ev in self.ep.poll(timeout):
                    self.readable(fd, monotonic_ns())
                now = monotonic_ns()
                if now >= next_sweep:
                    self.sweep(now)
                    due_second = (nxt.due_ns if nxt is not None else end_ns or 0) // NS_PER_S
                    self.close_windows(due_second if nxt is not None else 1 << 62)
                    next_sweep = now + SWEEP_NS
            self.close_windows(1 << 62)
            ended = monotonic_ns()
        finally:
            self.shut()
        return self.result((ended - origin) / NS_PER_S)

    def shut(self) -> None:
        for client in self.clients:
            self.close_udp(client)
            for f in list(client.flows.values()):
                self.close_flow(client, f)
        for client, f in self.retiring:
            self.close_flow(client, f)
        self.ep.close()

    def result(self, duration_s: float) -> ReplayResult:
        offsets = self.offsets.quantiles()
        skipped = sum(cw.skipped for cw in self.per_class)
        b = self.book
        return ReplayResult(
            classes=self.plan.classes.names,
            per_class=self.per_class,
            windows=self.closed_count,
            problems=self.problems,
            loops=self.loops_seen,
            clients=len(self.clients),
            speed=self.plan.speed,
            rate_qps=self.plan.rate_qps,
            duration_s=duration_s,
            sent_per_client=[c.sent for c in self.clients],
            offset_us=offsets,
            generator_bound=skipped > 0 or offsets["p99"] > BOUND_P99_US,
            connections={
                "opened": b.conn_opened,
                "errors": b.conn_errors,
                "tls_resumed": b.conn_resumed,
                "idled_out": self.idled_out,
            },
            unexpected=self.unexpected,
            late=self.late,
            fds_peak=self.fds_peak,
        )


def forget(client: Client, f: StreamFlow) -> None:
    """`f` no longer takes the client's queries (closed, or retiring)."""
    for conn, held in list(client.flows.items()):
        if held is f:
            del client.flows[conn]


def format_replay(r: ReplayResult, server: str) -> str:
    """The text summary of a replay (the counts are the ledger's, summed)."""
    d = r.as_dict()
    lines = [
        f"Replay against {server}: {r.clients} clients, {r.loops} loop(s) at {r.speed:.3g}x"
        f" ({r.rate_qps:.1f} q/s planned), {r.duration_s:.3f} s",
        "",
        f"  Queries due:          {d['due']}",
        f"  Queries sent:         {d['sent']} (skipped {d['skipped']})",
        f"  Queries completed:    {d['completed']}",
        f"  Queries lost:         {d['lost']} (late replies {d['late']})",
        f"  Queries abandoned:    {d['abandoned']}",
        f"  Send offset (µs):     p50 {r.offset_us['p50']:.0f} p99 {r.offset_us['p99']:.0f}"
        f" max {r.offset_us['max']:.0f} (after the capture's timing)",
        "  Connections:          "
        + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r.connections.items())
        + f" (client sockets at once, at most {r.fds_peak})",
        "",
        "Classes:",
    ]
    for name, c in d["classes"].items():
        lines.append(
            f"  {name:<12} due {c['due']} sent {c['sent']} completed {c['completed']}"
            f" lost {c['lost']} abandoned {c['abandoned']}"
        )
    if r.generator_bound:
        lines += [
            "",
            "Generator-bound: the replay could not keep the capture's timing"
            f" (send offset p99 {r.offset_us['p99']:.0f} µs, skipped {d['skipped']});"
            " the server's figures are partly the generator's.",
        ]
    return "\n".join(lines)


def load_replay(cfg: ReplayConfig) -> Capture:
    """The pre-flight: the capture read and checked before any socket exists."""
    from soak.traffic.sources import load_capture

    return load_capture(cfg.file, cfg.clients_by_port)


def run_replay(
    cfg: ReplayConfig,
    server: tuple[str, int],
    duration_s: float | None,
    timeout_s: float = 2.0,
    seed: int = 0,
    tls: TlsSpec | None = None,
) -> ReplayResult:
    """Reads the capture (bad input: InputError, nothing started), then replays it."""
    capture = load_replay(cfg)
    return Replay(cfg, capture, server[0], server[1], timeout_s, seed, tls).run(duration_s)
