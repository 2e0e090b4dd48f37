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

The clients' sockets and connections are replay_conns.ClientConns'; what the
replay reports, and its text summary, are replay_result's.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator

from soak.clock import ns_to_s, ns_to_us, s_to_ns, second_of
from soak.load import wire
from soak.load.conn import UP, StreamFlow, TlsSpec
from soak.load.replay._conns import ClientConns
from soak.load.replay._engine import mixed, python_reason, run_compiled, say_python
from soak.load.replay._plan import Plan, Planned
from soak.load.replay._result import OffsetTotals, ReplayResult
from soak.load.replay._windows import ReplayWindows
from soak.load.replay._workers import run_split
from soak.load.worker import MAX_BACKLOG_S, monotonic_ns
from soak.traffic.capture_file import UDP, Capture
from soak.traffic.replay_config import BOUND_P99_US, ReplayConfig

RING = 65536
SWEEP_NS = 10_000_000  # timeouts and idle connections looked for this often
START_DELAY_NS = 50_000_000  # the first query leaves this long after the start
BACKLOG_NS = s_to_ns(MAX_BACKLOG_S)


class Replay:
    """Sends a capture's queries at their planned times from one epoll loop, matches
    the replies by id (the ring), and counts each query in the ledger's windows."""

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
        self.cfg = cfg
        self.plan = Plan(cfg, capture, seed)
        self.nc = len(self.plan.classes.names)
        self.timeout_ns = s_to_ns(timeout_s)
        # A query abandoned under a closed connection ends here, in the ledger; one that
        # waits for its answer keeps its connection open (the ring knows which).
        self.conns = ClientConns(
            cfg,
            len(capture.clients),
            (host, port),
            tls,
            abandon=lambda slot: self.end_query(slot, "abandoned", 0),
            waiting=lambda slot: self.ring_t[slot] > 0,
            timeout_ns=self.timeout_ns,
        )
        self.clients = self.conns.clients
        # The id ring: send time (> 0 while in flight), class, question, due second, client.
        self.ring_t = [0] * RING
        self.ring_c = [0] * RING
        self.ring_q: list[bytes] = [b""] * RING
        self.ring_w = [0] * RING
        self.ring_k = [0] * RING
        self.next_slot = 0
        self.sent_order: collections.deque[tuple[int, int]] = collections.deque()
        self.ledger = ReplayWindows(self.nc)
        # The last query counted in the ledger (sent or skipped), as (loop, index in the
        # capture): a replay that raised counts the rest from the next one (wind_up).
        self.last_counted: tuple[int, int] | None = None
        self.start_ns = 0
        self.offsets = OffsetTotals()
        self.unexpected = self.late = 0

    def end_query(self, slot: int, how: str, now: int, reply: bytes = b"") -> None:
        """A query in flight ends: completed (with its reply), lost or abandoned."""
        t = self.ring_t[slot]
        if t <= 0:
            return
        self.ring_t[slot] = -t if how == "lost" else 0
        client = self.clients[self.ring_k[slot]]
        client.inflight.discard(slot)
        client.lost += how == "lost"
        second, c = self.ring_w[slot], self.ring_c[slot]
        if how == "completed":
            self.ledger.ended(second, c, how, ns_to_us(now - t), wire.rcode(reply))
        else:
            self.ledger.ended(second, c, how)

    # ------------------------------------------------------------ clients

    def transport_of(self, q: Planned) -> str:
        if self.cfg.transport == "capture":
            return "udp" if q.transport == UDP else "tcp"
        return self.cfg.transport

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
                self.conns.retire_udp(client)  # a new loop: a new source port
                for f in list(client.flows.values()):
                    self.conns.retire(client, f)
            client.loop = q.loop
        slot = self.take_slot()
        if slot < 0:  # 65,536 in flight: this one cannot leave
            self.ledger.count(second, q.cls, "due")
            self.ledger.count(second, q.cls, "skipped")
            return
        message = bytearray(wire.HEADER + q.question)
        wire.set_id(message, slot)
        message[2], message[3] = q.flags >> 8, q.flags & 255
        transport = self.transport_of(q)
        t = monotonic_ns()
        if transport == "udp":
            if client.udp is None:
                client.udp = self.conns.udp_socket(client)
            self.conns.send_udp(client, message)
        else:
            flow = self.conns.stream_for(client, q.conn, now)
            if flow is not None:
                self.queue(flow, slot, q, bytes(message), t)
            else:  # no connection could even start: sent, will be lost, refused
                self.conns.book.send_failed += 1
        self.offsets.add(ns_to_us(t - planned_ns), second)
        self.ring_t[slot], self.ring_c[slot], self.ring_q[slot] = t, q.cls, q.question
        self.ring_w[slot], self.ring_k[slot] = second, q.client
        self.sent_order.append((t, slot))
        client.inflight.add(slot)
        self.conns.holding.add(q.client)
        client.sent += 1
        client.last_ns = t
        # Counted last: a send that raised left its query uncounted (wind_up counts it).
        self.ledger.inflight[second] += 1
        self.ledger.count(second, q.cls, "due")
        self.ledger.count(second, q.cls, "sent")

    def queue(self, f: StreamFlow, slot: int, q: Planned, message: bytes, now: int) -> None:
        if self.cfg.transport == "doh":
            f.queue(slot, q.question, now)  # RFC 8484: id 0 on the wire, RD set
        else:  # the captured flags as they were (RD, CD ...), framed
            f.wbuf += wire.frame(message)
            f.query_ends.append(f.written_bytes + len(f.wbuf))  # sent once taken this far
            f.carried += 1
            f.last_send_ns = now
        assert f.inflight is not None
        f.inflight.append((slot, now))
        if f.phase == UP and not f.flush():
            self.conns.book.conn_errors += 1
            self.conns.dropped(self.clients[q.client], f)

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
        conns = self.conns
        got = conns.by_fd.get(fd)
        if got is None:
            return
        client, f = got
        if f is None:
            sock = client.udp_for(fd)
            assert sock is not None
            try:
                datagram = sock.recv(65535)
            except OSError:  # ICMP port unreachable: the query ends lost at its timeout
                return
            conns.book.socket_received += 1  # every datagram read, stray ones included
            self.reply(datagram, now)
            return
        if f.sock is None:
            return
        if f.phase != UP:
            step = f.advance()
            if step is None:
                conns.dropped(client, f)
            elif step:
                conns.ep.modify(fd, f.events())
                if f.wbuf and not f.flush():
                    conns.book.conn_errors += 1
                    conns.dropped(client, f)
            else:
                conns.ep.modify(fd, f.events())
            return
        data: bytes | None = f.read()
        if data:
            for msg in f.messages(data):
                self.reply(msg, now)
                if f.inflight:
                    f.inflight = [(s, t) for s, t in f.inflight if self.ring_t[s] > 0]
            conns.move_unprocessed(client, f, now, lambda slot: self.ring_q[slot])
            if f.wbuf and not f.flush():
                data = None
        if data is None:
            conns.dropped(client, f)

    # ------------------------------------------------------------ housekeeping

    def sweep(self, now: int) -> None:
        """Queries past their timeout end lost; then the connections' own housekeeping
        (idle ones close, retiring ones once answered)."""
        order, timeout = self.sent_order, self.timeout_ns
        while order and now - order[0][0] > timeout:
            t, slot = order.popleft()
            if self.ring_t[slot] == t:
                self.end_query(slot, "lost", now)
        self.conns.sweep(now)

    # ------------------------------------------------------------ the loop

    def run(
        self,
        duration_s: float | None,
        origin_ns: int | None = None,
        stopping: Callable[[], bool] | None = None,
        start_ns: int = 0,
    ) -> ReplayResult:
        """Plays the plan from `origin_ns` (monotonic; its second 0) if given, else in a
        moment, until `duration_s` after it; from `start_ns` after it if given (a restart,
        a resumed run: Plan.queries); `stopping()` true ends the sending, and the queries
        in flight end as answered or lost (their windows close with them).

        The compiled loops play it where they are built (_engine); a capture that mixes
        UDP and TCP, in two processes (_workers)."""
        reason = python_reason(self)
        if reason is None and mixed(self):
            return run_split(self, 1, duration_s, START_DELAY_NS, origin_ns, stopping, start_ns)
        if reason is None:
            return run_compiled(self, duration_s, origin_ns, stopping, start_ns, START_DELAY_NS)
        say_python(reason)
        end_ns = None if duration_s is None else s_to_ns(duration_s)
        self.start_ns = start_ns
        plan: Iterator[Planned] = self.plan.queries(end_ns, start_ns)
        origin = monotonic_ns() + START_DELAY_NS if origin_ns is None else origin_ns
        next_sweep = origin
        try:
            nxt = next(plan, None)
            while True:
                now = monotonic_ns()
                sent_here = 0
                while nxt is not None and origin + nxt.due_ns <= now and sent_here < 256:
                    planned = origin + nxt.due_ns
                    second = second_of(nxt.due_ns, 0)  # due_ns counts from the origin
                    if now - planned > BACKLOG_NS:  # too far behind: due, never sent
                        self.ledger.count(second, nxt.cls, "due")
                        self.ledger.count(second, nxt.cls, "skipped")
                    else:
                        self.send(nxt, second, planned, now)
                    self.last_counted = (nxt.loop, nxt.index)
                    nxt = next(plan, None)
                    sent_here += 1
                    now = monotonic_ns()
                if nxt is None and not self.ledger.busy():
                    break
                if nxt is not None:
                    wait_ns = origin + nxt.due_ns - monotonic_ns()
                    timeout = 0 if wait_ns <= 0 else min(ns_to_s(wait_ns), 0.01)
                else:
                    timeout = 0.01
                for fd, _ev in self.conns.ep.poll(timeout):
                    self.readable(fd, monotonic_ns())
                now = monotonic_ns()
                if now >= next_sweep:
                    if nxt is not None and stopping is not None and stopping():
                        nxt = None  # nothing more is sent; what is in flight ends
                    self.sweep(now)
                    due_second = second_of(nxt.due_ns if nxt is not None else end_ns or 0, 0)
                    self.ledger.close_windows(due_second if nxt is not None else 1 << 62)
                    next_sweep = now + SWEEP_NS
            self.ledger.close_windows(1 << 62)
            ended = monotonic_ns()
        finally:
            self.conns.shut()
        return self.result(ns_to_s(ended - origin - start_ns))

    def wind_up(self, until_ns: int) -> None:
        """After run() raised (its sockets closed): the queries it had not come to that
        were due before `until_ns` (after the origin) count as due and skipped, then every
        window it left open closes (ReplayWindows.close_all: in flight, abandoned)."""
        last = self.last_counted
        if last is not None:
            loop, first = last[0], last[1] + 1
        else:
            loop, first = self.plan.position(self.start_ns)
        for due_ns, cls in self.plan.dues(loop, first, until_ns):
            second = second_of(due_ns, 0)
            self.ledger.count(second, cls, "due")
            self.ledger.count(second, cls, "skipped")
        self.ledger.close_all()

    def result(self, duration_s: float) -> ReplayResult:
        offsets = self.offsets.quantiles()
        ledger = self.ledger
        skipped = sum(cw.skipped for cw in ledger.per_class)
        conns = self.conns
        handshake_us = conns.handshake.quantiles()
        return ReplayResult(
            classes=self.plan.classes.names,
            per_class=ledger.per_class,
            windows=ledger.closed_count,
            problems=ledger.problems,
            loops=sum(cw.due for cw in ledger.per_class) / max(1, len(self.plan.capture.queries)),
            queries_per_loop=len(self.plan.capture.queries),
            clients=len(self.clients),
            speed=self.plan.speed,
            rate_qps=self.plan.rate_qps,
            duration_s=duration_s,
            sent_per_client=[c.sent for c in self.clients],
            lost_per_client=[c.lost for c in self.clients],
            offset_us=offsets,
            generator_bound=skipped > 0 or offsets["p99"] > BOUND_P99_US,
            connections={
                **conns.counts(),
                **{f"handshake_{q}_us": int(v) for q, v in handshake_us.items()},
            },
            unexpected=self.unexpected,
            late=self.late,
            fds_peak=conns.fds_peak,
            hists=ledger.hists,
            engine_counters=conns.sockets(),
        )


def load_replay(cfg: ReplayConfig) -> Capture:
    """The pre-flight: the capture read and checked before any socket exists."""
    from soak.traffic.sources import load_capture

    return load_capture(cfg.path, cfg.clients_by_port)


def run_replay(
    cfg: ReplayConfig,
    server: tuple[str, int],
    duration_s: float | None,
    timeout_s: float = 2.0,
    seed: int = 0,
    tls: TlsSpec | None = None,
    workers: int = 1,
    capture: Capture | None = None,
) -> ReplayResult:
    """Reads the capture unless given (bad input: InputError, nothing started), then
    replays it; its clients split across `workers` processes where the compiled loop
    plays it."""
    capture = capture if capture is not None else load_replay(cfg)
    replay = Replay(cfg, capture, server[0], server[1], timeout_s, seed, tls)
    if workers > 1 and python_reason(replay) is None:
        return run_split(replay, workers, duration_s, START_DELAY_NS)
    return replay.run(duration_s)
