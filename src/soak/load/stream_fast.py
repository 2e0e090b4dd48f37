"""The TCP and DoT loop of a worker on the compiled path (soak.load._faststream).

The C Engine opens the `flows` connections (TLS through OpenSSL for DoT), queues
pipelined queries on them, reads and matches the replies, reconnects what the
server closes and counts, in the same windows and buckets as _fastudp; this loop
keeps the pacing, the control pipe and the per-second Interval through cadence.py,
as udp_fast.py does. Connections last here: a spec whose connection policy churns
them (a quota, an age, hang-ups) runs tcp.run_tcp, which stays the fallback when the
extension is not built (or SOAK_LOAD_PURE=1). DoH is not this loop's.
"""

from __future__ import annotations

import ipaddress
from multiprocessing.connection import Connection
from typing import Any

from soak.clock import s_to_ns
from soak.load.cadence import Cadence
from soak.load.stats import Connections, Interval
from soak.load.udp_fast import engine_questions, interval_of
from soak.load.worker import Control, WorkerSpec, monotonic_ns, window_slots

_fast: Any
try:
    from soak.load import _faststream as _fast
except ImportError:  # not built: the caller falls back to tcp.run_tcp
    _fast = None

PROTOCOLS = ("tcp", "dot")


def available() -> bool:
    return _fast is not None


def supports(spec: WorkerSpec) -> bool:
    """TCP or DoT to an address literal (the Engine does not resolve names) whose
    connections last (no class churns them or hangs up)."""
    if spec.protocol not in PROTOCOLS:
        return False
    try:
        ipaddress.ip_address(spec.host)
    except ValueError:
        return False
    policies = [p for p in spec.policies or () if p is not None]
    return not any(p.churns or p.hangup_fraction > 0 for p in policies)


def alpn_wire(protocols: tuple[str, ...]) -> bytes:
    """ALPN names as OpenSSL takes them: each prefixed with its length."""
    return b"".join(bytes([len(p)]) + p.encode() for p in protocols)


def make_engine(spec: WorkerSpec, origin_ns: int) -> Any:
    tls = spec.tls if spec.protocol == "dot" else None
    tls_args = None
    if tls is not None:
        tls_args = (tls.server_name, tls.ca_file, tls.resumption, alpn_wire(tls.alpn))
    questions, randoms, checks, pos = engine_questions(spec)
    return _fast.Engine(
        spec.host,
        spec.port,
        spec.flows,
        tls_args,
        questions,
        randoms,
        checks,
        list(spec.schedule),
        spec.start_offset % len(spec.schedule),
        pos,
        s_to_ns(spec.timeout_s),
        spec.max_outstanding,
        window_slots(spec.timeout_s),
        origin_ns,
    )


def stream_interval_of(
    raw: tuple[Any, ...],
    spec: WorkerSpec,
    interval_s: float,
    rate: float,
    backlog: int,
    skipped: int,
) -> Interval:
    """An Interval from Engine.take: udp_fast's counts, and the connections'."""
    counts, (opened, errors, resumed, handshake_us, hung_up) = raw
    iv = interval_of(counts, spec, interval_s, rate, backlog, skipped)
    iv.connections = Connections(opened, errors, resumed, handshake_us, hung_up)
    return iv


def run_stream_fast(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    """Engine.run until the next thing the cadence has to do, then the cadence."""
    engine: Any = None

    def skip(second: int, n: int) -> None:
        engine.skip(second, n)

    cad = Cadence(spec, control, conn, skip)
    engine = make_engine(spec, cad.origin_ns)
    run, take_counts = engine.run, engine.take
    pacer = cad.pacer
    engine.begin(cad.start_ns)
    engine.open(cad.start_ns)

    def take(interval_s: float, rate: float, backlog: int, skipped: int, cursor: int) -> Interval:
        return stream_interval_of(take_counts(cursor), spec, interval_s, rate, backlog, skipped)

    def drain(now: int, silence_end_ns: int) -> None:
        engine.sweep(True)
        engine.silence_until(silence_end_ns)

    sent_total = outstanding = 0
    try:
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
            cad.tick(monotonic_ns(), sent_total, take)
        engine.finish()  # what no socket took by the end never will: failed
        cad.finish(take, drain, sent_total)
    finally:
        engine.finish()
