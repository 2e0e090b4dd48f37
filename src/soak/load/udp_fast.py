"""The UDP loop of a worker on the compiled fast path (soak.load._fastudp).

The C Engine sends (sendmmsg), reads (recvmmsg), matches replies and counts;
this loop keeps what happens a few times a second, through cadence.py as
udp.py and tcp.py do: the pacing state (the C side gets the schedule's base on
every call, so a rate change or a dropped backlog takes effect at the next
call), the control pipe and the per-second Interval. Same accounting and the
same Interval shape as udp.py, which stays the fallback when the extension is
not built (or SOAK_LOAD_PURE=1).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from soak.clock import s_to_ns
from soak.load import wire
from soak.load.cadence import Cadence
from soak.load.ledger import ClassWindow, Window
from soak.load.stats import Connections, Interval
from soak.load.target import Target
from soak.load.udp import open_flows
from soak.load.worker import Control, WorkerSpec, monotonic_ns, window_slots

_fast: Any
try:
    from soak.load import _fastudp as _fast
except ImportError:  # not built: the caller falls back to udp.run_udp
    _fast = None


def available() -> bool:
    return _fast is not None


def make_engine(spec: WorkerSpec, fds: list[int], origin_ns: int) -> Any:
    return _fast.Engine(*engine_args(spec, fds, origin_ns))


def engine_args(spec: WorkerSpec, fds: list[int], origin_ns: int) -> tuple[Any, ...]:
    """The Engine's arguments (the compiled DoH engine takes the same, doh_fast.py)."""
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
    return (
        fds,
        questions,
        randoms,
        checks,
        list(spec.schedule),
        spec.start_offset % len(spec.schedule),
        pos,
        s_to_ns(spec.timeout_s),
        spec.max_outstanding,
        spec.recv_bytes,
        spec.index,
        window_slots(spec.timeout_s),
        origin_ns,
    )


def window_from(raw: tuple[Any, ...]) -> Window:
    """A window as Engine.take hands it back (see _fastudp.c, window_of)."""
    second, refused, classes = raw
    out = []
    for sent, completed, lost, late, wrong, skipped, abandoned, rcodes, lat_us in classes:
        out.append(
            ClassWindow(
                due=sent + skipped,
                sent=sent,
                skipped=skipped,
                completed=completed,
                lost=lost,
                abandoned=abandoned,
                late=late,
                wrong=wrong,
                rcodes=rcodes,
                lat_us=lat_us,
            )
        )
    out[0].refused = refused
    return Window(second, out)


def interval_of(
    counts: tuple[Any, ...],
    spec: WorkerSpec,
    interval_s: float,
    rate: float,
    backlog: int,
    skipped: int,
) -> Interval:
    windows, closed_below, unexpected, socket_errors, max_gap_ns, max_gap_end_ns = counts[:6]
    iv = Interval(spec.index, interval_s, rate, backlog, skipped)
    iv.windows = [window_from(w) for w in windows]
    iv.closed_below = closed_below
    iv.unexpected = unexpected
    iv.socket_errors = socket_errors
    iv.max_gap_ns, iv.max_gap_end_ns = max_gap_ns, max_gap_end_ns
    iv.sockets_counted = True
    iv.socket_sent, iv.socket_received, iv.send_failed = counts[6:9]
    if len(counts) > 9:  # a stream engine's connections (doh_fast.py)
        iv.connections = Connections(*counts[9])
    return iv


def run_udp_fast(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    socks = open_flows(spec)
    try:
        run_engine(spec, [s.fileno() for s in socks], control, conn)
    finally:
        for s in socks:
            s.close()


def run_engine(spec: WorkerSpec, fds: list[int], control: Control, conn: Connection) -> None:
    drive(spec, control, conn, lambda origin_ns: make_engine(spec, fds, origin_ns))


def drive_connecting(
    spec: WorkerSpec,
    control: Control,
    conn: Connection,
    make_engine: Callable[[WorkerSpec, int, str | None], Any],
) -> None:
    """drive() for an engine that connects (the TCP/DoT and DoH ones): made to the
    server's address, a name followed as the Python loop follows it (target.Target)."""
    target = Target(spec.host, spec.port)
    build = functools.partial(make_engine, spec)
    drive(spec, control, conn, lambda origin_ns: build(origin_ns, target.address), target.follow)


def drive(
    spec: WorkerSpec,
    control: Control,
    conn: Connection,
    build: Callable[[int], Any],
    follow: Callable[[Any, int], None] | None = None,
) -> None:
    """Engine.run until the next thing the cadence has to do, then the cadence; `build`
    makes the engine from the run's origin (a compiled engine with the UDP Engine's face);
    `follow(engine, now_ns)`, when given, runs on each return (target.Target.follow: the
    stream engines' server address kept current)."""
    engine: Any = None

    def skip(second: int, n: int) -> None:
        engine.skip(second, n)

    cad = Cadence(spec, control, conn, skip)
    engine = build(cad.origin_ns)
    run, take_counts = engine.run, engine.take
    pacer = cad.pacer
    engine.begin(cad.start_ns)

    def take(interval_s: float, rate: float, backlog: int, skipped: int, cursor: int) -> Interval:
        return interval_of(take_counts(cursor), spec, interval_s, rate, backlog, skipped)

    def drain(now: int, silence_end_ns: int) -> None:
        finish = getattr(engine, "finish", None)  # a stream engine closes its connections
        if finish is not None:
            finish()
        engine.sweep(True)
        engine.silence_until(silence_end_ns)

    sent_total = outstanding = 0
    while not cad.done(monotonic_ns(), sent_total, outstanding):
        sent_total, outstanding, cad.sending = run(
            cad.deadline_ns(),
            cad.send_end_ns,
            pacer.rate_qps,
            pacer.base_ns,
            pacer.base_k,
            pacer.phase,
            cad.sending,
        )
        if follow is not None:
            follow(engine, monotonic_ns())
        cad.tick(monotonic_ns(), sent_total, take)
    cad.finish(take, drain, sent_total)
