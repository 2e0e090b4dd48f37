"""One load worker process: its spec, its control channel and its bookkeeping.

A worker owns its sockets and an id ring of 65,536 slots (the DNS id is the
slot). Each slot holds the send time (ns, > 0 while outstanding, negated once
timed out so that a late reply is recognised), the class and the question
bytes the reply must echo. The UDP hot loop in udp.py inlines this
bookkeeping for speed; the TCP loop calls the methods here.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from math import ceil, floor
from multiprocessing.connection import Connection
from typing import Any

from soak.clock import NS_PER_S, NS_PER_US, s_to_ns
from soak.load import wire
from soak.load.ledger import OpenWindows, schedule_counts
from soak.load.queries import ClassQueries
from soak.load.stats import Connections, Interval
from soak.load.wire import HEADER_LEN, echoes, message_id, rcode

RING = 65536
MASK = RING - 1
INTERVAL_NS = NS_PER_S  # a window a second: the ledger's grid
SWEEP_NS = 10_000_000  # how often timed-out queries are looked for
CONTROL_NS = 50_000_000  # how often the rate and the stop flag are read
MAX_BACKLOG_S = 1.0  # beyond this the generator drops due queries (and says so)


@dataclass
class WorkerSpec:
    """Everything a worker needs; picklable so that it crosses into a spawned process."""

    index: int
    host: str
    port: int
    protocol: str
    flows: int
    timeout_s: float
    classes: list[ClassQueries]
    schedule: list[int]
    start_offset: int
    max_outstanding: int
    duration_s: float  # how long to send; the loop also ends at max_duration_s
    max_duration_s: float
    rate_qps: float = 0.0  # this worker's share at the start
    begin_at_ns: int = 0  # CLOCK_MONOTONIC: the first query not before (0: at once)
    # Worker i of n has phase i / n (Pacer, worker_phase): its query k is due at
    # (i + n k) / R, so that n workers together are due exactly R per second.
    phase: float = 0.0
    # Replies to queries without EDNS fit in 512 bytes; a large recv buffer costs a
    # big allocation per datagram (measured: ~5% of the loop's CPU at 65,535).
    recv_bytes: int = 4096
    # A swap under load runs the Python UDP loop (both loops measure silences between
    # replies; the compiled one since it tracks them per wake too).
    track_gaps: bool = False
    # Stream transports: per class, its connection policy (None: connections last).
    policies: list[Any] | None = None  # conn.Policy
    tls: Any = None  # conn.TlsSpec for dot and doh
    doh_method: str = "POST"
    doh_path: str = "/dns-query"


class Control:
    """What the parent can change while a worker runs: its rate share and a stop flag.

    Messages arrive on a pipe: ("rate", q/s), ("rate", q/s, at_ns) (the new rate's
    schedule starts at `at_ns`, monotonic: a phase's start, so that each phase is due
    exactly its rate x seconds) or ("stop",). The loop calls poll() a few times a
    second; a closed pipe (the parent died) means stop.
    """

    def __init__(self, conn: Connection, rate_qps: float) -> None:
        self.conn = conn
        self._rate_qps = rate_qps
        self.rate_at_ns: int | None = None  # when the last rate took effect, if said
        self._stop = False

    def poll(self) -> None:
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if msg[0] == "rate":
                    self._rate_qps = float(msg[1])
                    self.rate_at_ns = int(msg[2]) if len(msg) > 2 else None
                elif msg[0] == "stop":
                    self._stop = True
        except (EOFError, OSError):
            self._stop = True

    def rate_qps(self) -> float:
        return self._rate_qps

    def stopped(self) -> bool:
        return self._stop


def family_of(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def is_wrong(cq: ClassQueries, data: bytes, question_len: int) -> bool:
    """A reply outside the class's expectation (wire.wrong_answer)."""
    return wire.wrong_answer(data, question_len, cq.expect_rcodes, cq.expect_addresses)


def window_slots(timeout_s: float) -> int:
    """How many seconds a worker keeps open (a power of two): a window lives until its
    last query has left (up to MAX_BACKLOG_S late) and has been answered or timed out."""
    need = int(timeout_s + MAX_BACKLOG_S) + 4
    return 1 << max(3, (need - 1).bit_length())


class Book:
    """The id ring and the open windows of a worker (used by the TCP loop; the UDP
    loops do the same inline). A query counts in the window of the second it was
    due (soak.load.ledger): the loop says which with `at_second` before sending."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.nc = len(spec.classes)
        self.timeout_ns = s_to_ns(spec.timeout_s)
        self.ring_t = [0] * RING
        self.ring_c = [0] * RING
        self.ring_q: list[bytes] = [b""] * RING
        self.ring_w = [0] * RING  # the grid second each query was due in
        self.seq = 0
        self.tail = 0
        self.outstanding = 0
        self.win = OpenWindows(self.nc, window_slots(spec.timeout_s))
        self.second = 0  # the due second of the queries being sent
        self.base = self.win.open(0)  # its counters' index
        self.sockets_counted = False  # set by a loop that counts at its sockets
        self.reset()
        self.pos = [spec.start_offset % max(1, len(c.questions)) for c in spec.classes]
        # Silences between replies (a service swap under load): the last answer and
        # the longest gap of the current interval. Updated once per wake, not per reply.
        self.last_answer_ns = monotonic_ns()
        self.max_gap_ns = 0
        self.max_gap_end_ns = 0
        self.sched_i = spec.start_offset % len(spec.schedule)

    def reset(self) -> None:
        self.unexpected = 0
        self.socket_errors = 0  # ICMP unreachable and similar (UDP)
        # the sockets' own counts (Interval.socket_sent), of the loops that keep them
        self.socket_sent = self.socket_received = self.send_failed = 0
        # stream transports: connections opened, failed, TLS sessions resumed, setup times
        self.conn_opened = self.conn_errors = self.conn_resumed = self.conn_hung_up = 0
        self.handshake_us: dict[int, int] = {}
        # DoH: what the server's HTTP/2 layer said (doh.DohFlow; stats.Connections)
        self.streams_reset = self.streams_refused = self.streams_retried = self.goaways = 0

    def at_second(self, second: int) -> None:
        """The queries sent from now on were due in `second`."""
        if second != self.second:
            self.second = second
            self.base = self.win.open(second)

    def skip(self, second: int, n: int) -> None:
        """`n` queries due in `second` never leave: the schedule moves past them."""
        spec = self.spec
        base = self.win.open(second)
        counts = schedule_counts(spec.schedule, self.sched_i, n, self.nc)
        for c, k in enumerate(counts):
            self.win.skipped[base + c] += k
        self.sched_i = (self.sched_i + n) % len(spec.schedule)

    def interval(
        self, interval_s: float, rate: float, backlog: int, skipped: int, cursor_second: int
    ) -> Interval:
        """The windows closed by now (every second before `cursor_second` with nothing in
        flight) and the interval's other counts; those start again from 0."""
        self.win.refused[self.base // self.nc] += self.socket_errors
        iv = Interval(self.spec.index, interval_s, rate, backlog, skipped)
        iv.windows = self.win.close(cursor_second)
        iv.closed_below = self.win.closed_below
        iv.unexpected = self.unexpected
        iv.socket_errors = self.socket_errors
        iv.sockets_counted = self.sockets_counted
        iv.socket_sent, iv.socket_received = self.socket_sent, self.socket_received
        iv.send_failed = self.send_failed
        iv.max_gap_ns, iv.max_gap_end_ns = self.max_gap_ns, self.max_gap_end_ns
        self.max_gap_ns = self.max_gap_end_ns = 0
        iv.connections = Connections(
            self.conn_opened,
            self.conn_errors,
            self.conn_resumed,
            self.handshake_us,
            self.conn_hung_up,
            self.streams_reset,
            self.streams_refused,
            self.streams_retried,
            self.goaways,
        )
        self.reset()
        return iv

    def answered(self, now: int) -> None:
        """A reply within the timeout arrived at `now`: the silence before it ends."""
        gap = now - self.last_answer_ns
        if gap > self.max_gap_ns:
            self.max_gap_ns, self.max_gap_end_ns = gap, now
        self.last_answer_ns = now

    def silence_until(self, end_ns: int) -> None:
        """At the end of the load: a silence still going on counts up to `end_ns`."""
        if end_ns > self.last_answer_ns:
            self.answered(end_ns)

    def drain(self, now: int, silence_end_ns: int) -> None:
        """At the end: what is still outstanding is lost, a silence still going on ends."""
        self.sweep(now, everything=True)
        self.silence_until(silence_end_ns)

    def next_query(self) -> tuple[int, bytes]:
        """The next class and question of the mix (files cycle like dnsperf's)."""
        spec = self.spec
        c = spec.schedule[self.sched_i]
        self.sched_i = (self.sched_i + 1) % len(spec.schedule)
        cq = spec.classes[c]
        if cq.random is not None:
            return c, cq.random.next_question()
        p = self.pos[c]
        self.pos[c] = (p + 1) % len(cq.questions)
        return c, cq.questions[p]

    def lose(self, slot: int) -> None:
        """The query in `slot` timed out: lost in its window (unless that window was
        closed by force, which counted it lost already)."""
        base = self.win.base_of(self.ring_w[slot])
        if base >= 0:
            self.win.lost[base + self.ring_c[slot]] += 1

    def take_slot(self, now: int) -> int:
        """A free id (skipping the rare straggler still outstanding); -1 if none is free."""
        for _ in range(16):
            slot = self.seq & MASK
            self.seq += 1
            t = self.ring_t[slot]
            if t <= 0:
                return slot
            if now - t > self.timeout_ns:
                self.lose(slot)
                self.ring_t[slot] = 0
                self.outstanding -= 1
                return slot
        return -1

    def sent_query(self, slot: int, c: int, question: bytes, now: int) -> None:
        self.ring_t[slot] = now
        self.ring_c[slot] = c
        self.ring_q[slot] = question
        self.ring_w[slot] = self.second
        self.win.sent[self.base + c] += 1
        self.outstanding += 1

    def abandon(self, slot: int, sent_ns: int) -> None:
        """The client hung up with this query in flight: neither answered nor lost. A slot
        answered (or reused) since is left alone."""
        if self.ring_t[slot] != sent_ns:
            return
        self.ring_t[slot] = 0
        self.outstanding -= 1
        base = self.win.base_of(self.ring_w[slot])
        if base >= 0:
            self.win.abandoned[base + self.ring_c[slot]] += 1

    def reply(self, data: bytes, now: int) -> None:
        if len(data) < HEADER_LEN:
            self.unexpected += 1
            return
        slot = message_id(data)
        t = self.ring_t[slot]
        q = self.ring_q[slot]
        if t == 0 or not echoes(data, q):
            self.unexpected += 1
            return
        c = self.ring_c[slot]
        win = self.win
        base = win.base_of(self.ring_w[slot])
        self.ring_t[slot] = 0
        if t < 0 or now - t > self.timeout_ns or base < 0:
            if t > 0:
                self.lose(slot)
                self.outstanding -= 1
            win.late[(base if base >= 0 else self.base) + c] += 1
            return
        self.outstanding -= 1
        i = base + c
        win.completed[i] += 1
        self.answered(now)
        lat = win.lats[base // self.nc]
        key = ((now - t) // NS_PER_US) * self.nc + c
        lat[key] = lat.get(key, 0) + 1
        win.rcodes[i * 16 + rcode(data)] += 1
        cq = self.spec.classes[c]
        if (cq.expect_rcodes is not None or cq.expect_addresses is not None) and is_wrong(
            cq, data, len(q)
        ):
            win.wrong[i] += 1

    def sweep(self, now: int, everything: bool = False) -> None:
        """Count queries past their timeout as lost, oldest first."""
        limit = now - self.timeout_ns
        ring_t = self.ring_t
        tail, seq = self.tail, self.seq  # locals: this walks every query once
        expired = 0
        while tail < seq:
            slot = tail & MASK
            t = ring_t[slot]
            if t > 0:
                if t > limit and not everything:
                    break
                self.lose(slot)
                expired += 1
                ring_t[slot] = -t
            tail += 1
        self.tail = tail
        self.outstanding -= expired


def worker_phase(index: int, workers: int, offset: float = 0.0) -> float:
    """Worker `index` of `workers`' phase (a fraction of its own period). `offset` (0 to
    1) is its runner's place among runners that share one schedule (load agent i of n:
    i / n): with equal shares, the n x workers loops are due at every 1 / rate of the
    whole, worker (agent a, index i) at (a + n (i + workers k)) / rate."""
    return (index + offset) / workers


class Pacer:
    """Absolute deadlines on the monotonic clock: query k is due at
    base + (k + phase) / rate, rounded up to the nanosecond.

    `phase` (a fraction of one query's period) interleaves the workers: worker i of
    n has phase i / n, so that together they are due at exactly every 1 / (n x rate).
    A rate change re-bases at the next deadline of the old schedule, so a phase
    change neither bursts nor pauses. Rate 0 means no schedule (flat out).
    """

    def __init__(self, rate_qps: float, start_ns: int, phase: float = 0.0) -> None:
        self.rate_qps = rate_qps
        self.base_ns = start_ns
        self.base_k = 0
        self.phase = phase
        self.worker_phase = phase

    def due(self, now_ns: int) -> int:
        """How many queries should have left by now (counted from the start)."""
        if self.rate_qps <= 0 or now_ns < self.base_ns:
            return self.base_k
        return (
            self.base_k + floor((now_ns - self.base_ns) * self.rate_qps / NS_PER_S - self.phase) + 1
        )

    def deadline_ns(self, k: int) -> int:
        return self.base_ns + ceil((k - self.base_k + self.phase) * NS_PER_S / self.rate_qps)

    def set_rate(self, rate_qps: float, sent: int, now_ns: int) -> None:
        if rate_qps == self.rate_qps:
            return
        if self.rate_qps > 0 and rate_qps > 0:
            self.base_ns = max(self.deadline_ns(sent), now_ns - INTERVAL_NS)
        else:
            self.base_ns = now_ns
        self.base_k = sent
        self.phase = 0.0  # the new base is a deadline already
        self.rate_qps = rate_qps

    def set_rate_at(self, rate_qps: float, at_ns: int) -> None:
        """The new rate's schedule from `at_ns` on (with this worker's phase): the old
        one's queries due before it stay due, the new one's are due from it."""
        if rate_qps == self.rate_qps:
            return
        self.base_k = self.due(at_ns - 1)
        self.base_ns = at_ns
        self.rate_qps = rate_qps
        self.phase = self.worker_phase if rate_qps > 0 else 0.0

    def behind(self, sent: int, now_ns: int) -> int:
        """How many due queries lie beyond MAX_BACKLOG_S of backlog (to be dropped)."""
        due = self.due(now_ns)
        limit = int(self.rate_qps * MAX_BACKLOG_S)
        if self.rate_qps <= 0 or due - sent <= limit:
            return 0
        return due - sent - limit

    def skip(self, dropped: int) -> None:
        """The next `dropped` queries never leave: the schedule moves past them."""
        self.base_k -= dropped


monotonic_ns = time.monotonic_ns  # bound once: no wrapper call per query
