"""A soak run's replay in a process of its own (soak.load.replay._child), so that its
timing does not share an interpreter with the samplers and the leak passes.

The run's process (soak.load.replay._run_load) talks to it over two pipes, as it
does to its load workers (soak.load.spawn): commands go one way (`play` from a
moment, `stop`, `wind_up` a replay that raised, `exit`), and the replay's closed
windows, each with its send offsets and connection counts, come back the other as
they close (`window`), then `ended`, `error` or `wound` (`ended` and `wound` with
the play's socket counts, which die with a process that dies). The child keeps the replay
that raised until it is told how far to wind it up, so a restart counts every
planned query once, as the thread it replaces did.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from subprocess import Popen, TimeoutExpired
from typing import Any

from soak.load.ledger import Window
from soak.load.load_config import LoadConfig
from soak.load.replay._result import Offsets
from soak.load.spawn import spawn_worker
from soak.traffic.replay_config import ReplayConfig

CHILD_MODULE = "soak.load.replay._child"
READY_TIMEOUT_S = 60.0  # its interpreter's start and the capture's reading, on a busy machine
EXIT_TIMEOUT_S = 5.0

# The replay's connection counts (_conns.ClientConns.counts) grown while a window was
# open, on its `all` point: connections opened, queries sent on one already open,
# connections closed idle, connection errors, DoH streams the server reset or refused
# (RST_STREAM, GOAWAY: ClientConns.book.streams_reset). Counted when the window closes (its
# queries ended), so a window's figures lag its queries by up to load.timeout_s.
CONN_FIELDS = {
    "opened": "conn_opened",
    "reused": "conn_reused",
    "idled_out": "conn_idled_out",
    "errors": "conn_errors",
    "streams_reset": "conn_streams_reset",
}
SOCKETS_OPEN = "sockets_open"  # the client sockets and connections open as it closed


@dataclass
class Closed:
    """A closed window, its queries' send offsets, its connection counts."""

    window: Window
    offsets: Offsets
    conns: dict[str, int]


@dataclass(frozen=True)
class ChildSpec:
    """What the child needs to build the same replay as the run's process."""

    replay: ReplayConfig  # its file found already (ReplayConfig.at)
    host: str
    port: int
    timeout_s: float
    seed: int

    @classmethod
    def of(cls, cfg: LoadConfig, replay: ReplayConfig, server: tuple[str, int]) -> ChildSpec:
        return cls(replay, server[0], server[1], cfg.timeout_s, cfg.seed or 0)


class ReplayProcess:
    """The child process as the run's process sees it. `on_closed` is called in the
    reader thread for each window the child closed."""

    def __init__(
        self,
        spec: ChildSpec,
        on_closed: Callable[[Closed], None],
        on_counted: Callable[[dict[str, int]], None] = lambda _counts: None,
    ) -> None:
        """`on_counted`: a play's socket counts, told by the child once the play ended
        (or was wound up), in the reader thread."""
        self.spec = spec
        self.on_closed = on_closed
        self.on_counted = on_counted
        self.uncounted = 0  # plays whose socket counts have not come back (yet)
        self.error: str | None = None  # the play's, or the process's end
        self.dead = False  # the process ended: it winds nothing up
        self.realtime_refused: str | None = None  # why it plays at normal priority, if asked
        self.scheduling = ""  # its scheduling class once ready ("SCHED_FIFO 1")
        self._proc: Popen[bytes] | None = None
        self._ctrl: Connection | None = None
        self._ready = threading.Event()
        self._done = threading.Event()  # the play ended: sent all, stopped or raised
        self._wound = threading.Event()
        self._closing = False
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        """The child's interpreter started, its replay built: ready to play."""
        self._proc, self._ctrl, stats = spawn_worker(CHILD_MODULE)
        self._reader = threading.Thread(
            target=self._read, args=(stats,), name="replay-reader", daemon=True
        )
        self._reader.start()
        self._send(("spec", self.spec))
        if not self._ready.wait(READY_TIMEOUT_S) or self.dead:
            why = self.error or f"not ready within {READY_TIMEOUT_S:g} s"
            self.close()
            raise RuntimeError(f"the replay's process did not start: {why}")

    def play(self, origin_mono_ns: int, send_s: float, start_ns: int) -> None:
        """A fresh replay from `start_ns` after the origin (CLOCK_MONOTONIC, which the
        processes share) until `send_s` after it."""
        self.error = None
        self._done.clear()
        self.uncounted += 1
        self._send(("play", origin_mono_ns, send_s, start_ns))

    def stop_sending(self) -> None:
        self._send(("stop",))

    def wait_done(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)

    def wind_up(self, until_ns: int, timeout_s: float) -> bool:
        """The replay that raised, wound up in the child to `until_ns` after the origin
        (its windows come back as they close); False where the child cannot."""
        if self.dead:
            return False
        self._wound.clear()
        self._send(("wind_up", until_ns))
        return self._wound.wait(timeout_s) and not self.dead

    def close(self) -> None:
        """The child told to exit, killed where it does not."""
        self._closing = True
        proc = self._proc
        if proc is None:
            return
        self._send(("exit",))
        try:
            proc.wait(EXIT_TIMEOUT_S)
        except TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(EXIT_TIMEOUT_S)
        if self._ctrl is not None:
            self._ctrl.close()
        self._proc = self._ctrl = None

    def _send(self, message: tuple[Any, ...]) -> None:
        if self._ctrl is None or self.dead:
            return
        with contextlib.suppress(OSError):  # it ended: the reader says so
            self._ctrl.send(message)

    def _read(self, stats: Connection) -> None:
        try:
            while True:
                message = stats.recv()
                self._take(message)
        except (EOFError, OSError):
            self._ended()
        finally:
            stats.close()

    def _take(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "window":
            self.on_closed(message[1])
        elif kind == "ready":
            self.realtime_refused, self.scheduling = message[1], message[2]
            self._ready.set()
        elif kind == "ended":
            self._counted(message[1])
            self._done.set()
        elif kind == "error":
            self.error = message[1]
            self._done.set()
        elif kind == "wound":
            self._counted(message[1])
            self._wound.set()

    def _counted(self, counts: dict[str, int]) -> None:
        self.uncounted -= 1
        self.on_counted(counts)

    def _ended(self) -> None:
        """The child's pipe closed: told to, or it died (killed, a crash)."""
        self.dead = True
        if not self._closing:
            code = None if self._proc is None else _exit_status(self._proc)
            self.error = self.error or f"the replay's process ended (exit status {code})"
        for event in (self._ready, self._done, self._wound):
            event.set()


def _exit_status(proc: Popen[bytes]) -> int | None:
    """Its exit status (a signal's as its negative number), once its pipe closed."""
    try:
        return proc.wait(EXIT_TIMEOUT_S)
    except TimeoutExpired:
        return None
