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
its windows to the parent as it closes them, with their send offsets and its
connection figures; the parent merges them by second (soak.load.ledger.Merger: a
second is closed once every process has closed it) into the replay's ledger, and, at
the end, each process's per-client counts. A second whose queries went over both
transports is counted in both processes, its two halves summed before it is closed:
the ledger sees it once.

Not the Python loop's to the letter: with rename_clients, the Python loop retires a
client's UDP socket and its connections at its first query of a new loop over either
transport; here each process retires its own at the client's first query of the new
loop over its transport (the other process does not see that query). The same
connections open; a retired one may close later, or idle out instead.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection, wait
from multiprocessing.synchronize import Event
from typing import Any

from soak.load.ledger import Merger, Window
from soak.load.replay._engine import Replay, mixed, run_compiled
from soak.load.replay._result import ReplayResult
from soak.load.worker import monotonic_ns
from soak.traffic.capture_file import TCP, UDP

WAIT_S = 0.02  # the parent looks at its workers' pipes (and at stopping()) this often


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
    stopping: Callable[[], bool] | None = None,
    start_ns: int = 0,
) -> ReplayResult:
    """The replay in `workers` processes (fork: each inherits the plan), two for each
    worker of a mixed capture, merged here; Replay.run's contract (from `origin_ns`
    if given, from `start_ns` after it, `stopping()` ends the sending)."""
    origin = monotonic_ns() + start_delay_ns if origin_ns is None else origin_ns
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()  # set: the workers send no more (stopping() said so, or one failed)
    replay.start_ns = start_ns
    pipes, procs = [], []
    for share, part in parts(replay, workers):
        mine, theirs = ctx.Pipe(duplex=False)
        args = (replay, share, part, (duration_s, origin, start_delay_ns, start_ns), stop, theirs)
        kind = "" if part is None else "-udp" if part == UDP else "-tcp"
        proc = ctx.Process(target=_worker, args=args, name=f"replay-{share[0]}{kind}", daemon=True)
        proc.start()
        theirs.close()
        pipes.append(mine)
        procs.append(proc)
    try:
        ends = _gather(replay, pipes, stopping or (lambda: False), stop)
    finally:
        stop.set()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    return _result(replay, ends, monotonic_ns() - origin - start_ns)


def _worker(
    replay: Replay,
    share: tuple[int, int],
    part: int | None,
    when: tuple[float | None, int, int, int],  # duration_s, origin, start delay, start_ns
    stop: Event,
    out: Connection,
) -> None:
    duration_s, origin, start_delay_ns, start_ns = when
    # Each window goes with its queries' send offsets: the parent's windows carry them
    # as one process's do (a soak run's replay hands them over window by window).
    replay.offsets.by_second = {}
    # The connections' figures too, as they stand: a soak run's windows carry their growth.
    replay.ledger.on_window = lambda w: out.send(
        ("window", w, replay.offsets.take(w.second).counts, _rest(replay))
    )
    try:
        r = run_compiled(
            replay, duration_s, origin, stop.is_set, start_ns, start_delay_ns, share, part
        )
        end = (r.sent_per_client, r.lost_per_client, replay.conns.handshake, replay.last_counted)
        out.send(("end", *end, _rest(replay)))
    except BaseException as exc:
        out.send(("error", f"{type(exc).__name__}: {exc}", replay.last_counted))
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
        "open_sockets": c.open_sockets,
    }


def _gather(
    replay: Replay, pipes: list[Connection], stopping: Callable[[], bool], stop: Event
) -> list[tuple[Any, ...]]:
    """Every worker's windows, merged by second into the replay's ledger as they close,
    each with its send offsets and the connections' figures summed as they stood; what
    each worker said at its end. Each window's send offsets are added as it is (every
    window closes by the workers' end: they are the whole run's too). A worker that
    failed stops the others; their windows are taken until they end, then it raises."""
    merger = Merger(replay.nc, range(len(pipes)))
    offsets: dict[int, Counter[int]] = {}  # by second, until its window is closed
    figures: dict[int, dict[str, int]] = {}  # each worker's connection figures, latest
    live = dict(enumerate(pipes))
    ends: list[tuple[Any, ...]] = []
    failed: list[str] = []
    while live:
        if not stop.is_set() and stopping():
            stop.set()
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
                figures[w] = msg[3]
                continue
            if msg[0] == "error":
                failed.append(f"replay worker {w}: {msg[1]}")
                stop.set()
                _counted_to(replay, msg[2])
            else:
                ends.append(msg)
                figures[w] = msg[-1]
            merger.end(w)
            del live[w]
        for window in merger.take_closed():
            sent_us = offsets.pop(window.second, Counter())
            if any(cw.due for cw in window.classes):  # as one process: no query, no window
                _tell(replay, figures.values())
                replay.offsets.add_window(window.second, sent_us)
                replay.ledger.closed_window(window)
    if failed:
        for end in ends:
            _counted_to(replay, end[4])
        raise RuntimeError(failed[0])
    return ends


def _counted_to(replay: Replay, last: tuple[int, int] | None) -> None:
    """A worker counted the capture's queries up to `last`: wind_up (after a worker
    failed) counts from the furthest any worker came. Not exact: a worker that was
    behind leaves its queries before that point uncounted (each process plays only its
    own, and the plan's dues are everyone's)."""
    if last is not None and (replay.last_counted is None or last > replay.last_counted):
        replay.last_counted = last


def _tell(replay: Replay, rest: Iterable[dict[str, int]]) -> None:
    """The workers' figures, summed, into the replay and its ClientConns (the sockets'
    and connections' counts; fds_peak: the workers' sockets open at once, at most)."""
    conns, book = replay.conns, replay.conns.book
    total: Counter[str] = Counter()
    for r in rest:
        total.update(r)
    replay.unexpected, replay.late = total["unexpected"], total["late"]
    conns.fds_peak, conns.socket_errors = total["fds_peak"], total["socket_errors"]
    conns.open_sockets, conns.reused, conns.idled_out = (
        total["open_sockets"], total["reused"], total["idled_out"]
    )  # fmt: skip
    book.socket_sent, book.socket_received = total["socket_sent"], total["socket_received"]
    book.send_failed, book.conn_opened = total["send_failed"], total["opened"]
    book.conn_errors, book.conn_resumed = total["conn_errors"], total["resumed"]


def _result(replay: Replay, ends: list[tuple[Any, ...]], elapsed_ns: int) -> ReplayResult:
    for _, sent, lost, handshake, _, _ in ends:
        for client, s, n in zip(replay.clients, sent, lost, strict=True):
            client.sent += s
            client.lost += n
        replay.conns.handshake.merge(handshake)
    _tell(replay, [rest for *_, rest in ends])
    return replay.result(elapsed_ns / 1e9)
