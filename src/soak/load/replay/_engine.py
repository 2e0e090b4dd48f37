"""Which loop plays a replay, and the compiled one's driver.

A replay whose queries all go over UDP is played by the compiled loop
(soak.load.replay._fastreplay, built by `pip install -e .`): the plan stays Python
(Plan.columns: each query's time in its loop, client, class, flags; Plan.questions:
its question in that loop, renamed or not) and is handed over loop by loop, in batches
of CHUNK questions; the sockets, the sends, the replies, the id ring and the windows'
counts and latencies are the C loop's, and each window it closes is handed to the
replay's ledger (ReplayWindows.closed_window) as the Python loop's would be. A replay
over TCP or DoT (or of a capture whose queries are all TCP) is played the same way by
the compiled stream loop, and one over DoH by the compiled DoH loop
(_stream.StreamEngine: the same face, a connection per client's captured connection).
A capture that mixes UDP and TCP is played by both, the UDP loop and the stream loop
each in a process of its own (_workers; Plan.columns marks the other transport's
queries as not the loop's own). A replay forced to Python (SOAK_REPLAY_ENGINE=python)
and a build without the compiled loop take Replay's Python loop, and say so on stderr.

The compiled loops' latencies are histogram buckets (the UDP loop's soak.histogram's,
the stream loop's the load engine's: each answer counted at its bucket's lowest µs),
so their windows merge with any other's; the Python loop's are whole µs. Their send
offsets are counted in C too, per window, in OffsetTotals' buckets (the values the
Python loop's three_digits keeps), and come back with their window (take()): between
two calls of play() no Python runs per query or per batch, only the hand-over of the
windows that closed.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from soak.clock import s_to_ns, second_of
from soak.load.ledger import CLOSE_ALL, ClassWindow, Window
from soak.load.replay._result import OffsetTotals, ReplayResult
from soak.load.replay._stream import PROTOCOLS, Counts, StreamEngine, compiled_stream
from soak.load.replay._stream import Replay as StreamReplay
from soak.load.replay._windows import ReplayWindows
from soak.load.target import is_address, resolve
from soak.load.worker import monotonic_ns
from soak.traffic.capture_file import TCP, UDP

if TYPE_CHECKING:
    from soak.load.replay._fastreplay import Engine


class Replay(StreamReplay, Protocol):
    """What of soak.load.replay._loop.Replay the compiled loop reads and sets (named
    here, not imported: Replay.run hands itself over): what a stream loop reads, and
    more."""

    start_ns: int
    offsets: OffsetTotals
    ledger: ReplayWindows
    last_counted: tuple[int, int] | None
    unexpected: int
    late: int

    def result(self, duration_s: float) -> ReplayResult: ...


ENV = "SOAK_REPLAY_ENGINE"  # "python": the Python loop even where the compiled one runs
RETURN_NS = 20_000_000  # the compiled loop hands back this often (windows, stopping)
CHUNK = 4096  # questions handed over at once (a loop's renamed ones made this many at a time)
DRAIN_STEP_NS = 10_000_000  # windows are closed this often while the last replies come
BUILD_HINT = "not built (install gcc and python3-dev, then `pip install -e .`)"


def compiled() -> ModuleType | None:
    try:
        from soak.load.replay import _fastreplay
    except ImportError:
        return None
    return _fastreplay


def python_reason(replay: Replay) -> str | None:
    """Why this replay takes the Python loop; None: a compiled one plays it (UDP:
    _fastreplay; TCP and DoT: _fastreplay_stream; DoH: _fastreplay_doh; the stream ones
    through _stream.StreamEngine; a capture that mixes UDP and TCP: both, each in a
    process of its own, _workers)."""
    if os.environ.get(ENV, "").lower() == "python":
        return f"{ENV}=python"
    for transport in loops_of(replay):
        if transport == "doh" and compiled_stream("doh") is None:
            return f"the compiled DoH loop is {BUILD_HINT} (and libssl-dev, libnghttp2-dev)"
        if transport in PROTOCOLS and compiled_stream(transport) is None:
            return f"the compiled TCP/DoT loop is {BUILD_HINT} (and libssl-dev)"
        if transport == "udp" and compiled() is None:
            return f"the compiled loop is {BUILD_HINT}"
    return None


def loops_of(replay: Replay) -> list[str]:
    """The transports the replay's compiled loops play: the config's, or, for
    `transport: capture`, its queries' (both "udp" and "tcp" for a mixed capture)."""
    transport = replay.cfg.transport
    if transport != "capture":
        return [transport]
    kinds = replay.plan.transports
    return [t for k, t in ((UDP, "udp"), (TCP, "tcp")) if k in kinds] or ["udp"]


def mixed(replay: Replay) -> bool:
    """A capture that mixes UDP and TCP queries, played as captured."""
    return len(loops_of(replay)) > 1


def new_engine(replay: Replay, part: int | None = None) -> Engine:
    """The compiled loop for the replay's transport (python_reason said one is built);
    `part` (capture.UDP or TCP): the loop of that transport's share of a mixed capture."""
    conns = replay.conns
    address = sockaddr(server_address(conns.host, conns.port), conns.port)
    if stream_transport(replay) if part is None else part == TCP:
        return StreamEngine(replay, address)  # type: ignore[return-value]
    module = compiled()
    assert module is not None
    return module.Engine(
        address, len(replay.clients), replay.nc, replay.timeout_ns, conns.idle_ns,
        replay.cfg.rename_clients,
    )  # fmt: skip


def stream_transport(replay: Replay) -> bool:
    """TCP, DoT or DoH: given, or the capture's when all its queries are TCP."""
    return loops_of(replay) != ["udp"]


def say_python(reason: str) -> None:
    print(f"soak: replay in the Python loop: {reason}", file=sys.stderr, flush=True)


def server_address(host: str, port: int) -> str:
    """The address the compiled loop sends to: a name resolved once, at the start, as
    the Python loop's first socket resolves it (soak.load.target.resolve: its family)."""
    address = host if is_address(host) else resolve(host, port)
    if address is None:
        raise OSError(f"the server {host} does not resolve")
    return address


def sockaddr(host: str, port: int) -> bytes:
    """struct sockaddr_in or sockaddr_in6 of an address literal, as connect() takes it."""
    if ":" in host:
        packed = socket.inet_pton(socket.AF_INET6, host)
        return struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", port, 0) + packed + bytes(4)
    packed = socket.inet_pton(socket.AF_INET, host)
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + packed + bytes(8)


def run_compiled(
    replay: Replay,
    duration_s: float | None,
    origin_ns: int | None,
    stopping: Callable[[], bool] | None,
    start_ns: int,
    start_delay_ns: int,
    share: tuple[int, int] = (0, 1),
    part: int | None = None,
) -> ReplayResult:
    """Replay.run's contract, in the compiled loop; of the clients, the `share` (worker,
    workers) whose number is the worker's modulo workers (_workers); of their queries,
    those of transport `part` (capture.UDP or TCP) if given, else all."""
    conns = replay.conns
    engine = new_engine(replay, part)
    end_ns = None if duration_s is None else s_to_ns(duration_s)
    replay.start_ns = start_ns
    plan = replay.plan
    columns, n = plan.columns(part), len(plan.capture.queries)
    loop, first = plan.position(start_ns)
    loops = plan.loops_until(end_ns)
    origin = monotonic_ns() + start_delay_ns if origin_ns is None else origin_ns
    chunk: tuple[int, int, list[bytes]] = (loop, first, [])  # (loop, first, questions)

    def at(loop: int) -> int:
        return loop * plan.period_ns

    playing = False
    try:
        while (loops is None or loop < loops) and not (end_ns is not None and at(loop) >= end_ns):
            if chunk[0] != loop or not chunk[1] <= first < chunk[1] + len(chunk[2]):
                chunk = (loop, first, plan.questions(loop, first, min(n, first + CHUNK)))
            questions = chunk[2][first - chunk[1] :]
            playing = True  # until its queries are counted: then wind_up goes from them
            nxt, ended = engine.play(
                columns, questions, origin, at(loop), loop, first,
                -1 if end_ns is None else end_ns, monotonic_ns() + RETURN_NS, *share,
            )  # fmt: skip
            counted(replay, loop, nxt - 1 if nxt > first else None)
            playing = False
            loop, first = (loop + 1, 0) if nxt == n else (loop, nxt)
            if ended or (stopping is not None and stopping()):
                break  # nothing more is sent; what is in flight ends
            close(replay, engine, second_of(at(loop) + plan_due(columns, first), 0))
        while engine.drain(monotonic_ns() + DRAIN_STEP_NS) > 0:
            close(replay, engine, CLOSE_ALL)
        close(replay, engine, CLOSE_ALL)
        ended_ns = monotonic_ns()
    except BaseException:
        # wind_up counts from the last query the loop counted, and closes what is open.
        handled = engine.stats()[5]
        if playing and handled:
            counted(replay, loop, first + handled - 1)
        hand_over_open(replay, engine)
        raise
    finally:
        engine.shut()
        conns.shut()
        sent, lost, replay.unexpected, replay.late, _, _, conns.fds_peak, errors, *sockets = (
            engine.stats()
        )
        conns.socket_errors = errors
        book = conns.book
        book.socket_sent, book.send_failed, book.socket_received = sockets
        for client, s, n in zip(replay.clients, sent, lost, strict=True):
            client.sent, client.lost = s, n
    return replay.result((ended_ns - origin - start_ns) / 1e9)


def counted(replay: Replay, loop: int, last: int | None) -> None:
    """The capture's query `last` of `loop` was counted (sent or skipped): wind_up goes
    from it (the loops are the ledger's due over the capture's queries). Its place only:
    a Planned (its question made) cost 0.1 ms of every batch's interlude."""
    if last is not None:
        replay.last_counted = (loop, last)


def plan_due(columns: bytes, i: int) -> int:
    """The capture's query `i`'s due time in its loop (Plan.columns' first int64)."""
    return int.from_bytes(columns[32 * i : 32 * i + 8], sys.byteorder, signed=True)


def window_of(second: int, classes: list[Counts]) -> Window:
    return Window(
        second,
        [
            ClassWindow(
                due=due, sent=sent, skipped=skip, completed=done, lost=lost, rcodes=rc, lat_us=lat
            )
            for due, sent, skip, done, lost, rc, lat in classes
        ],
    )


def close(replay: Replay, engine: Engine, below: int) -> None:
    """The windows the compiled loop closed before `below`, into the replay's ledger,
    each after its queries' send offsets (a soak run's replay takes them with it)."""
    for second, classes, offsets in engine.take(below, False):
        replay.offsets.add_window(second, offsets)
        replay.ledger.closed_window(window_of(second, classes))


def hand_over_open(replay: Replay, engine: Engine) -> None:
    """After the loop raised: its open windows into the ledger's open ones, for wind_up
    (ReplayWindows.close_all: what was in flight ends abandoned)."""
    open_windows = replay.ledger.windows
    for second, classes, offsets in engine.take(CLOSE_ALL, True):
        replay.offsets.add_window(second, offsets)
        w = window_of(second, classes)
        if second in open_windows:
            open_windows[second].add(w)
        else:
            open_windows[second] = w
