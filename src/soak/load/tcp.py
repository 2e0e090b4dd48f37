"""The stream loop of a worker (TCP, DoT, DoH): pipelined connections that reconnect.

Each of the `flows` connections carries many outstanding queries (2-byte
length framing, RFC 7766, or HTTP/2 streams for DoH: conn.py and doh.py).
Writes are batched per loop turn; when the server closes a connection (idle
timeout, per-connection query limit, restart) it is reopened, at most every
RECONNECT_NS while the server refuses, and a class's connection policy closes
and reopens its connections on purpose (churn), some of them abruptly (hang-ups,
whose queries in flight end as abandoned). Openings (TCP connect, TLS
handshake) are steps of this loop, never a blocking call. Queries that were in flight
on a closed connection stay in the id ring and end as lost after the timeout,
like any unanswered query. A query that falls due while no connection is up
(or every one is done under its policy) is counted as sent and ends as lost
too: open loop means the schedule does not wait for the server.
"""

from __future__ import annotations

import contextlib
import math
import select
import ssl
from multiprocessing.connection import Connection

from soak.load.cadence import Cadence
from soak.load.conn import UP, Policy, StreamFlow, slot_plan, tls_context
from soak.load.worker import SWEEP_NS, Book, Control, WorkerSpec, monotonic_ns

SEND_BATCH = 64


class Flows:
    """The worker's connection slots, which classes they carry, and retiring connections.

    A connection that is done under its policy (its quota carried, or its age
    reached) retires: a new one takes its slot at once, so the class never
    waits, and the old one stays open until its answers are in and its idle
    time is over.
    """

    def __init__(self, spec: WorkerSpec, book: Book) -> None:
        self.spec, self.book = spec, book
        policies = spec.policies or [Policy()] * len(spec.classes)
        weights = [c.weight for c in spec.classes]
        self.pools, self.class_of = slot_plan(spec.flows, weights, policies)
        # A slot takes the policy of the (first) class it carries.
        self.policy_of = [policies[c] for c in self.class_of]
        self.tls = spec.tls if spec.protocol in ("dot", "doh") else None
        self.ctx = tls_context(self.tls) if self.tls is not None else None
        self.made = [0] * len(spec.classes)  # connections made per class (for hang-ups)
        self.slots = [self.new_flow(i) for i in range(len(self.class_of))]
        self.retiring: list[StreamFlow] = []

    def new_flow(self, i: int, session: ssl.SSLSession | None = None) -> StreamFlow:
        spec, policy = self.spec, self.policy_of[i]
        c = self.class_of[i]
        n, self.made[c] = self.made[c], self.made[c] + 1
        hangup = hangs_up(n, policy.hangup_fraction)
        if spec.protocol == "doh":
            from soak.load.doh import DohFlow

            f: StreamFlow = DohFlow(spec.host, spec.port, policy, self.book, self.ctx, hangup)
            f.doh_get = spec.doh_method == "GET"  # type: ignore[attr-defined]
            f.doh_path = spec.doh_path  # type: ignore[attr-defined]
        else:
            f = StreamFlow(spec.host, spec.port, policy, self.book, self.ctx, hangup)
        if self.tls is not None:
            f.server_name, f.resume, f.session = self.tls.server_name, self.tls.resumption, session
        return f

    def retire(self, i: int) -> StreamFlow:
        """Slot i's connection retires; returns the new (not yet connected) one."""
        old = self.slots[i]
        self.retiring.append(old)
        new = self.new_flow(i, old.current_session())
        self.slots[i] = new
        return new

    def all(self) -> list[StreamFlow]:
        return self.slots + self.retiring


def hangs_up(n: int, fraction: float) -> bool:
    """Whether a class's connection number n (from 0) hangs up: spread evenly, so that
    of any k consecutive connections about k x fraction do."""
    return math.floor((n + 1) * fraction) > math.floor(n * fraction)


def run_tcp(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    """TCP, DoT and DoH: the same loop over different StreamFlows."""
    book = Book(spec)
    book.sockets_counted = True  # at the connections: StreamFlow.flush and messages
    fl = Flows(spec, book)
    slots, pools = fl.slots, fl.pools
    cursor = [0] * len(pools)  # per class: where its round robin stands
    ep = select.epoll()
    by_fd: dict[int, StreamFlow] = {}
    cad = Cadence(spec, control, conn, book.skip)
    start = book.last_answer_ns = cad.start_ns

    def reopen(f: StreamFlow, now: int) -> None:
        if f.sock is not None:
            by_fd.pop(f.sock.fileno(), None)
            with contextlib.suppress(OSError):
                ep.unregister(f.sock.fileno())
            f.close()
        if f.connect(now) and f.sock is not None:
            ep.register(f.sock.fileno(), f.events())
            by_fd[f.sock.fileno()] = f

    def unregister(f: StreamFlow) -> None:
        if f.sock is not None:
            by_fd.pop(f.sock.fileno(), None)
            with contextlib.suppress(OSError):
                ep.unregister(f.sock.fileno())

    def drop(f: StreamFlow) -> None:
        unregister(f)
        f.close()

    def pick(c: int, now: int) -> StreamFlow | None:
        """The class's next connection that is up and taking queries; one still opening
        only if none is up (its queries leave once it is)."""
        pool = pools[c]
        for attempt in range(2):
            i = cursor[c]
            opening = None
            for _ in range(len(pool)):
                cand = slots[pool[i]]
                i = i + 1 if i + 1 < len(pool) else 0
                if cand.accepting(now):
                    if cand.phase == UP:
                        cursor[c] = i
                        return cand
                    opening = opening or cand
            if opening is not None:
                return opening
            if attempt == 0:  # every one is spent or down: replace them now, not next turn
                renew(pool, now)
        return None

    def renew(pool: list[int], now: int) -> None:
        for i in pool:
            f = slots[i]
            if f.sock is not None and f.spent(now):
                f = fl.retire(i)
            if f.sock is None:
                reopen(f, now)

    hangups = any(p.hangup_fraction > 0 for p in fl.policy_of)

    def hang_ups(now: int) -> None:
        """Hang-up clients whose last query has left close now, before any of their
        answers is read: mid-answer, as DNS Shotgun's impatient clients do."""
        if not hangups:
            return
        for i, f in enumerate(slots):
            if f.hangup and f.sock is not None and f.spent(now):
                reopen(fl.retire(i), now)
        for f in fl.retiring:
            if f.ready_to_hang_up():
                unregister(f)
                f.hang_up()

    def housekeeping(now: int) -> None:
        for f in slots:
            if f.opening_expired(now):
                drop(f)
        renew(list(range(len(slots))), now)
        hang_ups(now)
        for f in list(fl.retiring):
            if f.opening_expired(now):
                drop(f)
            if f.sock is None or f.due_to_close(now, book.timeout_ns):
                drop(f)
                fl.retiring.remove(f)

    for f in slots:
        reopen(f, start)
    pacer = cad.pacer
    next_sweep = start + SWEEP_NS
    sent_total = 0
    try:
        while True:
            now = monotonic_ns()
            if cad.done(now, sent_total, book.outstanding):
                break
            timeout = 0.01
            if cad.sending:
                if pacer.rate_qps > 0:
                    n = min(SEND_BATCH, cad.due(now) - sent_total)
                    timeout = 0 if n >= SEND_BATCH else 0.0005
                else:
                    n = min(SEND_BATCH, spec.max_outstanding - book.outstanding)
                    timeout = 0 if n > 0 else 0.01
                for _ in range(max(0, n)):
                    slot = book.take_slot(now)
                    if slot < 0:
                        break
                    book.at_second(cad.second_of_query(sent_total, now))
                    c, q = book.next_query()
                    up = pick(c, now)
                    if up is not None:
                        up.queue(slot, q, now)
                    else:  # due while no connection is up: it is lost, never written
                        book.send_failed += 1
                    t = monotonic_ns()
                    book.sent_query(slot, c, q, t)
                    if up is not None and up.inflight is not None:
                        up.inflight.append((slot, t))
                    sent_total += 1
                for f in fl.all():  # a connection retired mid-batch still has queries to send
                    if f.wbuf and not f.flush():
                        book.conn_errors += 1
                        drop(f)
                hang_ups(now)
            for fd, _ev in ep.poll(timeout):
                got_flow = by_fd.get(fd)
                if got_flow is None or got_flow.sock is None:
                    continue
                f = got_flow
                if f.phase != UP:
                    step = f.advance()
                    if step is None:
                        drop(f)  # a slot's connection is reopened by housekeeping
                        continue
                    ep.modify(fd, f.events())
                    if step and f.wbuf and not f.flush():  # what was queued while opening
                        book.conn_errors += 1
                        drop(f)
                    continue
                data = f.read()
                got = monotonic_ns()
                if data:
                    for msg in f.messages(data):
                        book.reply(msg, got)
                    if f.wbuf and not f.flush():  # DoH: window updates, settings acks
                        data = None
                if data is None:  # closed by the server: an error if answers were due
                    if f.answered < f.carried and got - f.last_send_ns < book.timeout_ns:
                        book.conn_errors += 1
                    drop(f)  # a slot's connection is reopened by housekeeping
            now = monotonic_ns()
            housekeeping(now)
            if now >= next_sweep:
                book.sweep(now)
                next_sweep = now + SWEEP_NS
            if now >= cad.wake_ns:
                cad.tick(now, sent_total, book.interval)
        for f in fl.all():  # what no socket took by the end never will: failed
            f.unwritten()
        cad.finish(book.interval, book.drain, sent_total)
    finally:
        ep.close()
        for f in fl.all():
            f.close()
