"""The TCP loop of a worker: persistent pipelined connections that reconnect.

Each of the `flows` connections carries many outstanding queries (2-byte
length framing, RFC 7766). Writes are batched per loop turn; when the server
closes a connection (idle timeout, per-connection query limit, restart) it is
reopened, at most every RECONNECT_NS while the server refuses. Queries that
were in flight on a closed connection stay in the id ring and end as lost
after the timeout, like any unanswered query. A query that falls due while no
connection is up is counted as sent and ends as lost too: open loop means the
schedule does not wait for the server.
"""

from __future__ import annotations

import contextlib
import select
import socket
from multiprocessing.connection import Connection

from soak.load.queries import HEADER
from soak.load.worker import (
    CONTROL_NS,
    INTERVAL_NS,
    SWEEP_NS,
    Book,
    Control,
    Pacer,
    WorkerSpec,
    monotonic_ns,
)

RECONNECT_NS = 100_000_000
SEND_BATCH = 64


class TcpFlow:
    def __init__(self, host: str, port: int) -> None:
        self.addr = (host, port)
        self.sock: socket.socket | None = None
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        self.retry_ns = 0
        self.connects = 0

    def connect(self, now: int) -> bool:
        if now < self.retry_ns:
            return False
        self.retry_ns = now + RECONNECT_NS
        try:
            s = socket.create_connection(self.addr, timeout=0.5)
        except OSError:
            return False
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        self.sock = s
        self.rbuf.clear()
        self.wbuf.clear()
        self.connects += 1
        return True

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        self.sock = None
        self.wbuf.clear()
        self.rbuf.clear()

    def flush(self) -> bool:
        """Write what is buffered; False when the connection broke."""
        if self.sock is None or not self.wbuf:
            return self.sock is not None
        try:
            n = self.sock.send(self.wbuf)
        except BlockingIOError:
            return True
        except OSError:
            return False
        del self.wbuf[:n]
        return True

    def frames(self) -> list[bytes]:
        """Complete DNS messages in the read buffer (removed from it)."""
        out = []
        buf = self.rbuf
        pos = 0
        while len(buf) - pos >= 2:
            size = (buf[pos] << 8) | buf[pos + 1]
            if len(buf) - pos - 2 < size:
                break
            out.append(bytes(buf[pos + 2 : pos + 2 + size]))
            pos += 2 + size
        del buf[:pos]
        return out


def run_tcp(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    book = Book(spec)
    flows = [TcpFlow(spec.host, spec.port) for _ in range(spec.flows)]
    ep = select.epoll()
    by_fd: dict[int, TcpFlow] = {}
    start = monotonic_ns()
    book.last_answer_ns = start

    def reopen(f: TcpFlow, now: int) -> None:
        if f.sock is not None:
            by_fd.pop(f.sock.fileno(), None)
            with contextlib.suppress(OSError):
                ep.unregister(f.sock.fileno())
            f.close()
        if f.connect(now) and f.sock is not None:
            ep.register(f.sock.fileno(), select.EPOLLIN)
            by_fd[f.sock.fileno()] = f

    for f in flows:
        reopen(f, start)
    hard_end = start + int(spec.max_duration_s * 1e9)
    send_end = min(start + int(spec.duration_s * 1e9), hard_end)
    pacer = Pacer(control.rate_qps(), start)
    next_interval, next_sweep = start + INTERVAL_NS, start + SWEEP_NS
    next_control, last_interval = start + CONTROL_NS, start
    sent_total = skipped = 0
    flow_i = 0
    sending = True
    try:
        while True:
            now = monotonic_ns()
            if sending and now >= send_end and sent_total >= pacer.due(send_end - 1):
                sending = False  # every query due before the end has left
            if not sending and (book.outstanding <= 0 or now >= send_end + book.timeout_ns):
                break
            if now >= hard_end + book.timeout_ns:
                break
            timeout = 0.01
            if sending:
                if pacer.rate_qps > 0:
                    due = pacer.due(now if now < send_end else send_end - 1)
                    n = min(SEND_BATCH, due - sent_total)
                    timeout = 0 if n >= SEND_BATCH else 0.0005
                else:
                    n = min(SEND_BATCH, spec.max_outstanding - book.outstanding)
                    timeout = 0 if n > 0 else 0.01
                for _ in range(max(0, n)):
                    slot = book.take_slot(now)
                    if slot < 0:
                        break
                    c, q = book.next_query()
                    up: TcpFlow | None = None
                    for _ in range(len(flows)):  # the next connection that is up
                        cand = flows[flow_i]
                        flow_i = (flow_i + 1) % len(flows)
                        if cand.sock is not None:
                            up = cand
                            break
                    if up is not None:
                        size = len(HEADER) + len(q)
                        up.wbuf += bytes((size >> 8, size & 255, slot >> 8, slot & 255))
                        up.wbuf += HEADER[2:]
                        up.wbuf += q
                    book.sent_query(slot, c, q, monotonic_ns())
                    sent_total += 1
                for f in flows:
                    if f.wbuf and not f.flush():
                        reopen(f, now)
            for fd, _ev in ep.poll(timeout):
                got_flow = by_fd.get(fd)
                if got_flow is None or got_flow.sock is None:
                    continue
                f, sock = got_flow, got_flow.sock
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    reopen(f, monotonic_ns())
                    continue
                f.rbuf += data
                got = monotonic_ns()
                for msg in f.frames():
                    book.reply(msg, got)
            now = monotonic_ns()
            for f in flows:
                if f.sock is None:
                    reopen(f, now)
            if now >= next_sweep:
                book.sweep(now)
                next_sweep = now + SWEEP_NS
            if now >= next_control:
                next_control = now + CONTROL_NS
                control.poll()
                if control.stopped() and sending:
                    sending, send_end = False, now
                pacer.set_rate(control.rate_qps(), sent_total, now)
                skipped += pacer.skip_to(sent_total, now)
            if now >= next_interval:
                backlog = max(0, pacer.due(now) - sent_total) if sending else 0
                rate = pacer.rate_qps if sending else 0.0
                conn.send(book.interval((now - last_interval) / 1e9, rate, backlog, skipped))
                skipped, last_interval = 0, now
                next_interval = max(next_interval + INTERVAL_NS, now + 1)
        now = monotonic_ns()
        book.sweep(now, everything=True)
        book.silence_until(min(now, send_end))
        iv = book.interval((now - last_interval) / 1e9, 0.0, 0, skipped)
        iv.final = True
        conn.send(iv)
    finally:
        ep.close()
        for f in flows:
            f.close()
