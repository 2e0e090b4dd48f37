"""The UDP hot loop of a worker.

Speed matters here more than elsewhere, so this one function is long on
purpose: everything the loop touches is a local, queries are pre-encoded
bytearrays of which only the 2-byte id is patched, replies are read once per
ready socket per epoll wake (no exception per empty socket), and only the id,
the echoed question, the rcode and (for classes with an address expectation)
the answers are looked at, all through wire.py. The bookkeeping is the same as
Book's in worker.py.
"""

from __future__ import annotations

import contextlib
import select
import socket
from multiprocessing.connection import Connection
from typing import Any

from soak.clock import NS_PER_S, NS_PER_US
from soak.load import wire
from soak.load.cadence import Cadence
from soak.load.worker import (
    MASK,
    SWEEP_NS,
    Book,
    Control,
    WorkerSpec,
    family_of,
    is_wrong,
    monotonic_ns,
)

SEND_BATCH = 64  # at most this many sends before the loop looks at replies again


def open_flows(spec: WorkerSpec) -> list[socket.socket]:
    socks = []
    for _ in range(spec.flows):
        s = socket.socket(family_of(spec.host), socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.setblocking(False)
        s.connect((spec.host, spec.port))
        socks.append(s)
    return socks


def run_udp(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    book = Book(spec)
    book.sockets_counted = True
    socks = open_flows(spec)
    ep = select.epoll()
    recv_of: list[Any] = [None] * (max(s.fileno() for s in socks) + 1)  # fd -> recv
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN)
        recv_of[s.fileno()] = s.recv
    sends = [s.send for s in socks]
    nflows = len(sends)
    flow = spec.index % nflows
    classes = spec.classes
    nc = len(classes)
    schedule = spec.schedule
    slen = len(schedule)
    si = book.sched_i
    # One bytearray per distinct question (only its id is patched, just before each send).
    shared: dict[bytes, bytearray] = {}
    wires = [
        [shared.get(q) or shared.setdefault(q, wire.query_buffer(q)) for q in cq.questions]
        for cq in classes
    ]
    questions = [cq.questions for cq in classes]
    qlen = [len(q) for q in questions]
    qpos = book.pos
    randoms = [cq.random for cq in classes]
    checks = [cq.expect_rcodes is not None or cq.expect_addresses is not None for cq in classes]
    ring_t, ring_c, ring_q = book.ring_t, book.ring_c, book.ring_q
    timeout_ns = book.timeout_ns
    recv_bytes = spec.recv_bytes
    mono = monotonic_ns
    poll = ep.poll
    set_id, reply_id, echoes, rcode = wire.set_id, wire.message_id, wire.echoes, wire.rcode
    query_buffer, header_len = wire.query_buffer, wire.HEADER_LEN

    cad = Cadence(spec, control, conn, book.skip)
    start = book.last_answer_ns = cad.start_ns
    pacer = cad.pacer
    next_sweep = start + SWEEP_NS
    sent_total = 0
    max_out = spec.max_outstanding
    outstanding = 0  # a local copy of book.outstanding, synced around Book calls
    seq = 0
    completed_total = 0
    # The open windows' counters (soak.load.ledger.OpenWindows), indexed by the window's
    # base + class; each query's due second sits in ring_w beside its send time.
    win = book.win
    wsent, wcompleted, wlost, wlate, wwrong = win.sent, win.completed, win.lost, win.late, win.wrong
    wrcodes, wlats, wseconds, wmask = win.rcodes, win.lats, win.seconds, win.mask
    ring_w = book.ring_w
    next_k = -1  # the first query due after the current second (-1: look it up)
    cur_s = wb = 0
    try:
        while True:
            now = mono()
            if cad.done(now, sent_total, outstanding):
                break
            # ---- send what is due
            timeout = 0.01
            if cad.sending:
                rate = pacer.rate_qps
                if rate > 0:
                    due = cad.due(now) - sent_total
                    if due > SEND_BATCH:
                        n = SEND_BATCH
                        timeout = 0
                    else:
                        n = due
                        if n > 0 or rate >= 1000:
                            timeout = 0.0005 if n <= 0 else 0
                        else:
                            timeout = (pacer.deadline_ns(sent_total) - now) / NS_PER_S
                            timeout = 0 if timeout < 0 else min(timeout, 0.01)
                else:
                    n = max_out - outstanding
                    if n > SEND_BATCH:
                        n = SEND_BATCH
                    timeout = 0 if n > 0 else 0.01
                for _ in range(n):
                    if sent_total >= next_k:  # the queries from here on are due a second later
                        cur_s = cad.second_of_query(sent_total, now)
                        book.at_second(cur_s)
                        wb = book.base
                        next_k = cad.boundary_k(cur_s) if rate > 0 else sent_total + SEND_BATCH
                    c = schedule[si]
                    si += 1
                    if si == slen:
                        si = 0
                    rnd = randoms[c]
                    if rnd is None:
                        p = qpos[c]
                        w = wires[c][p]
                        q = questions[c][p]
                        p += 1
                        qpos[c] = 0 if p == qlen[c] else p
                    else:
                        q = rnd.next_question()
                        w = query_buffer(q)
                    slot = seq & MASK
                    t = ring_t[slot]
                    if t > 0:  # a straggler still owns this id: let Book find a free one
                        book.seq, book.outstanding = seq, outstanding
                        slot = book.take_slot(now)
                        seq, outstanding = book.seq, book.outstanding
                        if slot < 0:
                            si = si - 1 if si else slen - 1  # this query leaves next time
                            break
                    else:
                        seq += 1
                    set_id(w, slot)
                    t = mono()
                    try:
                        sends[flow](w)
                        book.socket_sent += 1
                    except ConnectionRefusedError:  # ICMP from an earlier query: once more
                        book.socket_errors += 1
                        try:
                            sends[flow](w)
                            book.socket_sent += 1
                        except OSError:  # refused again: it is sent, and will be lost
                            book.socket_errors += 1
                            book.send_failed += 1
                    except BlockingIOError:
                        # The socket buffer is full: the query is due but cannot leave.
                        seq -= 1
                        si = si - 1 if si else slen - 1
                        break
                    flow += 1
                    if flow == nflows:
                        flow = 0
                    ring_t[slot] = t
                    ring_c[slot] = c
                    ring_q[slot] = q
                    ring_w[slot] = cur_s
                    wsent[wb + c] += 1
                    sent_total += 1
                    outstanding += 1
            # ---- read replies: one recv per ready socket per wake
            events = poll(timeout)
            if events:
                now = mono()
                answered = completed_total
                for fd, _ev in events:
                    try:
                        data = recv_of[fd](recv_bytes)
                    except (ConnectionRefusedError, BlockingIOError):
                        book.socket_errors += 1
                        continue
                    book.socket_received += 1
                    if len(data) < header_len:
                        book.unexpected += 1
                        continue
                    slot = reply_id(data)
                    t = ring_t[slot]
                    q = ring_q[slot]
                    if t == 0 or not echoes(data, q):
                        book.unexpected += 1
                        continue
                    c = ring_c[slot]
                    ws = ring_w[slot]
                    base = (ws & wmask) * nc if wseconds[ws & wmask] == ws else -1
                    ring_t[slot] = 0
                    if t < 0 or now - t > timeout_ns or base < 0:
                        if t > 0:
                            if base >= 0:
                                wlost[base + c] += 1
                            outstanding -= 1
                        wlate[(base if base >= 0 else wb) + c] += 1
                        continue
                    outstanding -= 1
                    completed_total += 1
                    i = base + c
                    wcompleted[i] += 1
                    lat = wlats[ws & wmask]
                    key = ((now - t) // NS_PER_US) * nc + c
                    lat[key] = lat.get(key, 0) + 1
                    wrcodes[i * 16 + rcode(data)] += 1
                    if checks[c] and is_wrong(classes[c], data, len(q)):
                        wwrong[i] += 1
                if completed_total != answered:
                    book.answered(now)
            # ---- housekeeping, a few times a second
            if now >= next_sweep:
                book.seq, book.outstanding = seq, outstanding
                book.sweep(now)
                outstanding = book.outstanding
                next_sweep = now + SWEEP_NS
            if now >= cad.wake_ns:
                book.sched_i = si  # a skip moves the schedule on
                cad.tick(now, sent_total, book.interval)
                si = book.sched_i
                next_k = -1  # the pacer may have moved: look the second up again
        book.seq, book.outstanding, book.sched_i = seq, outstanding, si
        cad.finish(book.interval, book.drain, sent_total)
    finally:
        ep.close()
        for s in socks:
            s.close()
