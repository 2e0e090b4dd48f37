"""The UDP loop of a worker on the compiled fast path (soak.load._fastudp).

The C Engine sends (sendmmsg), reads (recvmmsg), matches replies and counts;
this loop keeps what happens a few times a second: the pacing state (the C
side gets the schedule's base on every call, so a rate change or a dropped
backlog takes effect at the next call), the control pipe and the per-second
Interval. Same accounting and the same Interval shape as udp.py, which stays
the fallback when the extension is not built (or SOAK_LOAD_PURE=1).
"""

from __future__ import annotations

import functools
from multiprocessing.connection import Connection
from typing import Any

from soak.load import wire
from soak.load.stats import ClassInterval, Interval
from soak.load.udp import open_flows
from soak.load.worker import (
    CONTROL_NS,
    INTERVAL_NS,
    Control,
    Pacer,
    WorkerSpec,
    monotonic_ns,
)

_fast: Any
try:
    from soak.load import _fastudp as _fast
except ImportError:  # not built: the caller falls back to udp.run_udp
    _fast = None


def available() -> bool:
    return _fast is not None


def make_engine(spec: WorkerSpec, fds: list[int]) -> Any:
    classes = spec.classes
    questions = [list(cq.questions) if cq.random is None else None for cq in classes]
    randoms = [cq.random.next_question if cq.random is not None else None for cq in classes]
    checks = [
        functools.partial(wire.wrong_answer, rcodes=cq.expect_rcodes, addresses=cq.expect_addresses)
        if cq.expect_rcodes is not None or cq.expect_addresses is not None
        else None
        for cq in classes
    ]
    pos = [spec.start_offset % max(1, len(cq.questions)) for cq in classes]
    return _fast.Engine(
        fds,
        questions,
        randoms,
        checks,
        list(spec.schedule),
        spec.start_offset % len(spec.schedule),
        pos,
        int(spec.timeout_s * 1e9),
        spec.max_outstanding,
        spec.recv_bytes,
        spec.index,
    )


def interval_of(
    counts: tuple[Any, ...], spec: WorkerSpec, interval_s: float, rate: float
) -> Interval:
    sent, completed, lost, late, wrong, rcodes, lat_us, unexpected, socket_errors = counts[:9]
    classes = [
        ClassInterval(sent[c], completed[c], lost[c], late[c], wrong[c], 0, rcodes[c], lat_us[c])
        for c in range(len(spec.classes))
    ]
    classes[0].unexpected = unexpected
    iv = Interval(spec.index, interval_s, rate, 0, 0, classes)
    iv.socket_errors = socket_errors
    iv.max_gap_ns, iv.max_gap_end_ns = counts[9], counts[10]
    return iv


def run_udp_fast(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    socks = open_flows(spec)
    try:
        engine = make_engine(spec, [s.fileno() for s in socks])
        run_engine(engine, spec, control, conn)
    finally:
        for s in socks:
            s.close()


def run_engine(engine: Any, spec: WorkerSpec, control: Control, conn: Connection) -> None:
    run, take = engine.run, engine.take
    start = monotonic_ns()
    engine.begin(start)
    timeout_ns = int(spec.timeout_s * 1e9)
    hard_end = start + int(spec.max_duration_s * 1e9)
    send_end = min(start + int(spec.duration_s * 1e9), hard_end)
    pacer = Pacer(control.rate_qps(), start)
    next_interval, next_control, last_interval = start + INTERVAL_NS, start + CONTROL_NS, start
    sent_total = outstanding = skipped = 0
    sending = True
    while True:
        now = monotonic_ns()
        if not sending and (outstanding <= 0 or now >= send_end + timeout_ns):
            break
        if now >= hard_end + timeout_ns:
            break
        until = min(next_control, next_interval, hard_end + timeout_ns)
        if not sending:
            until = min(until, send_end + timeout_ns)
        rate = pacer.rate_qps
        sent_total, outstanding, sending = run(
            until, send_end, rate, pacer.base_ns, pacer.base_k, sending
        )
        now = monotonic_ns()
        if now >= next_control:
            next_control = now + CONTROL_NS
            control.poll()
            if control.stopped() and sending:
                sending, send_end = False, now
            pacer.set_rate(control.rate_qps(), sent_total, now)
            skipped += pacer.skip_to(sent_total, now)
        if now >= next_interval:
            iv = interval_of(take(), spec, (now - last_interval) / 1e9, rate if sending else 0.0)
            iv.backlog = max(0, pacer.due(now) - sent_total) if sending else 0
            iv.skipped, skipped = skipped, 0
            conn.send(iv)
            last_interval = now
            next_interval += INTERVAL_NS
            if next_interval <= now:
                next_interval = now + INTERVAL_NS
    engine.sweep(True)
    now = monotonic_ns()
    engine.silence_until(min(now, send_end))
    iv = interval_of(take(), spec, (now - last_interval) / 1e9, 0.0)
    iv.skipped, iv.final = skipped, True
    conn.send(iv)
