"""A replay's clients split across worker processes (`soak load --replay --workers N`),
so that a replay uses every core it is given; a capture that mixes UDP and TCP split by
transport too, so that each compiled loop plays one transport.

Client k plays in worker k mod N, in the compiled loop (_engine.run_compiled), from
the same origin (CLOCK_MONOTONIC is the machine's, shared by the processes): each
client keeps its order, its timing and its sockets, in one process. Of a mixed capture
(`transport: capture`, queries of both), each worker is two processes: one plays its
clients' UDP queries (the compiled UDP loop, a UDP socket per client), the other their
TCP queries (the compiled stream loop, the client's captured connections); a client
keeps its order within each transport, both from the same origin. Each process hands
its windows to the parent as it closes them; the parent merges them by second
(soak.load.ledger.Merger: a second is closed once every process has closed it) into
the replay's ledger, and, at the end, each process's per-client counts and offsets.
A second whose queries went over both transports is counted in both processes, its
two halves summed before it is closed: the ledger sees it once.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from multiprocessing.connection import Connection, wait
from typing import Any

from soak.load.ledger import Merger, Window
from soak.load.replay._engine import Replay, mixed, run_compiled
from soak.load.replay._result import ReplayResult
from soak.load.worker import monotonic_ns
from soak.traffic.capture_file import TCP, UDP

WAIT_S = 0.1  # the parent looks at its workers' pipes this often at least


def parts(replay: Replay, workers: int) -> list[tuple[tuple[int, int], int | None]]:
    """What each process plays: its share of the clients (worker, workers), and of
    their queries the transport (capture.UDP or TCP; None: all, one transport)."""
    kinds: list[int | None] = [UDP, TCP] if mixed(replay) else [None]
    return [((w, workers), kind) for w in range(workers) for kind in kinds]


def run_split(
    replay: Replay,
    workers: int,
    duration_s: float | None,
    start_delay_ns: int,
    origin_ns: int | None = None,
) -> ReplayResult:
    """The replay in `workers` processes (fork: each inherits the plan), two for each
    worker of a mixed capture, merged here; from `origin_ns` (monotonic) if given."""
    origin = monotonic_ns() + start_delay_ns if origin_ns is None else origin_ns
    ctx = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for share, part in parts(replay, workers):
        mine, theirs = ctx.Pipe(duplex=False)
        args = (replay, share, part, duration_s, origin, start_delay_ns, theirs)
        kind = "" if part is None else "-udp" if part == UDP else "-tcp"
        proc = ctx.Process(target=_worker, args=args, name=f"replay-{share[0]}{kind}", daemon=True)
        proc.start()
        theirs.close()
        pipes.append(mine)
        procs.append(proc)
    try:
        ends = _gather(replay, pipes)
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    return _result(replay, ends, monotonic_ns() - origin)


def _worker(
    replay: Replay,
    share: tuple[int, int],
    part: int | None,
    duration_s: float | None,
    origin: int,
    start_delay_ns: int,
    out: Connection,
) -> None:
    # Each window goes with its queries' send offsets: the parent's windows carry them
    # as one process's do (a soak run's replay hands them over window by window).
    replay.offsets.by_second = {}
    replay.ledger.on_window = lambda w: out.send(
        ("window", w, replay.offsets.take(w.second).counts)
    )
    try:
        r = run_compiled(replay, duration_s, origin, None, 0, start_delay_ns, share, part)
        end = (r.sent_per_client, r.lost_per_client, replay.conns.handshake)
        out.send(("end", *end, _rest(replay)))
    except BaseException as exc:
        out.send(("error", f"{type(exc).__name__}: {exc}"))
        raise


def _rest(replay: Replay) -> dict[str, int]:
    c = replay.conns
    return {
        "unexpected": replay.unexpected,
        "late": replay.late,
        "fds_peak": c.fds_peak,
        "socket_errors": c.socket_errors,
        **c.sockets(),
        # The connections' figures (TCP and DoT; zeros over UDP), summed by the parent.
        "opened": c.book.conn_opened,
        "conn_errors": c.book.conn_errors,
        "resumed": c.book.conn_resumed,
        "reused": c.reused,
        "idled_out": c.idled_out,
    }


def _gather(replay: Replay, pipes: list[Connection]) -> list[tuple[Any, ...]]:
    """Every worker's windows, merged by second into the replay's ledger as they close;
    what each worker said at its end. Each window's send offsets are added as it is
    (every window closes by the workers' end: they are the whole run's too)."""
    merger = Merger(replay.nc, range(len(pipes)))
    offsets: dict[int, Counter[int]] = {}  # by second, until its window is closed
    live = dict(enumerate(pipes))
    ends: list[tuple[Any, ...]] = []
    while live:
        ready = wait(list(live.values()), timeout=WAIT_S)
        for w in [k for k, p in live.items() if p in ready]:
            try:
                msg = live[w].recv()
            except EOFError:
                raise RuntimeError(f"replay worker {w} ended without a word") from None
            if msg[0] == "window":
                window: Window = msg[1]
                merger.add(w, [window], window.second + 1)
                offsets.setdefault(window.second, Counter()).update(msg[2])
                continue
            if msg[0] == "error":
                raise RuntimeError(f"replay worker {w}: {msg[1]}")
            ends.append(msg)
            merger.end(w)
            del live[w]
        for window in merger.take_closed():
            sent_us = offsets.pop(window.second, Counter())
            if any(cw.due for cw in window.classes):  # as one process: no query, no window
                replay.offsets.add_window(window.second, sent_us)
                replay.ledger.closed_window(window)
    return ends


def _result(replay: Replay, ends: list[tuple[Any, ...]], elapsed_ns: int) -> ReplayResult:
    conns = replay.conns
    conns.fds_peak = conns.socket_errors = 0
    for _, sent, lost, handshake, rest in ends:
        for client, s, n in zip(replay.clients, sent, lost, strict=True):
            client.sent += s
            client.lost += n
        conns.handshake.merge(handshake)
        replay.unexpected += rest["unexpected"]
        replay.late += rest["late"]
        conns.fds_peak += rest["fds_peak"]  # the workers' sockets open at once, at most
        conns.socket_errors += rest["socket_errors"]
        book = conns.book  # the sockets' counts, summed over the workers
        book.socket_sent += rest["socket_sent"]
        book.socket_received += rest["socket_received"]
        book.send_failed += rest["send_failed"]
        book.conn_opened += rest["opened"]
        book.conn_errors += rest["conn_errors"]
        book.conn_resumed += rest["resumed"]
        conns.reused += rest["reused"]
        conns.idled_out += rest["idled_out"]
    return replay.result(elapsed_ns / 1e9)
