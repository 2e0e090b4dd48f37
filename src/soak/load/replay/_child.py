"""`python -m soak.load.replay._child CTRL_FD STATS_FD`: a soak run's replay in a
process of its own (soak.load.replay._process says why and what crosses the pipes).

A separate interpreter, as the load workers are (soak.load.child): fork is unsafe in
a service with threads, and multiprocessing's spawn re-imports the caller's main.
"""

from __future__ import annotations

import gc
import select
import sys
from multiprocessing.connection import Connection
from typing import Any

from soak.load.ledger import Window
from soak.load.realtime import scheduling_of, take_realtime
from soak.load.replay._loop import Replay, load_replay
from soak.load.replay._process import CONN_FIELDS, SOCKETS_OPEN, ChildSpec, Closed
from soak.traffic.capture_file import Capture


class Child:
    """The replay being played (or the one that raised, until it is wound up)."""

    def __init__(self, spec: ChildSpec, capture: Capture, out: Connection) -> None:
        self.spec = spec
        self.capture = capture
        self.out = out
        self.replay: Replay | None = None
        self._conns_seen: dict[str, int] = {}

    def fresh(self) -> Replay:
        spec = self.spec
        replay = Replay(spec.replay, self.capture, spec.host, spec.port, spec.timeout_s, spec.seed)
        replay.ledger.on_window = self._closed
        replay.ledger.sums = False  # the run's process sums the windows it is handed
        replay.offsets.by_second = {}  # each window's offsets go back with it
        self._conns_seen = replay.conns.counts()
        self.replay = replay
        return replay

    def sockets(self) -> dict[str, int]:
        """The play's socket counts (ClientConns.sockets), told once with its end: a
        play that raised tells them once wound up (it sends nothing after raising)."""
        assert self.replay is not None
        return self.replay.conns.sockets()

    def _closed(self, window: Window) -> None:
        """A window closed (every query due in it ended): back to the run's process with
        its queries' send offsets and the connection counts grown while it was open."""
        replay = self.replay
        assert replay is not None
        offsets = replay.offsets.take(window.second)
        counts = replay.conns.counts()
        grown = {name: counts[k] - self._conns_seen[k] for k, name in CONN_FIELDS.items()}
        grown[SOCKETS_OPEN] = replay.conns.open_sockets
        self._conns_seen = counts
        self.out.send(("window", Closed(window, offsets, grown)))

    def play(self, ctrl: Connection, origin_mono_ns: int, send_s: float, start_ns: int) -> str:
        """A fresh replay until its end or a `stop`; what the run's process is told."""
        replay = self.fresh()
        told: list[tuple[Any, ...]] = []
        # Asked after every batch of the sending loop: a poll object made once costs it
        # a few µs, Connection.poll() (a selector made each time) 25-100 µs (measured).
        waiting = select.poll()
        waiting.register(ctrl.fileno(), select.POLLIN)

        def stopping() -> bool:
            if not told and waiting.poll(0):
                told.append(ctrl.recv())  # `stop`, or `exit`: sending ends either way
            return bool(told)

        replay.run(send_s, origin_mono_ns, stopping, start_ns)
        return "exit" if told and told[0][0] == "exit" else "ended"


def serve(ctrl: Connection, out: Connection) -> None:
    kind, spec = ctrl.recv()
    assert kind == "spec" and isinstance(spec, ChildSpec)
    child = Child(spec, load_replay(spec.replay), out)
    # The capture is the most of this process's objects and lives as long: out of the
    # collector's way, so that no full collection walks it while queries are due.
    gc.freeze()
    refused = take_realtime() if spec.replay.scheduling == "realtime" else None
    out.send(("ready", refused, scheduling_of(0)))  # the kernel's word for what it got
    while True:
        message = ctrl.recv()
        if message[0] == "exit":
            return
        if message[0] == "play":
            try:
                said = child.play(ctrl, *message[1:])
            except Exception as exc:  # kept for its wind_up; the run restarts it
                out.send(("error", f"{type(exc).__name__}: {exc}"))
                continue
            out.send(("ended", child.sockets()))
            if said == "exit":
                return
        elif message[0] == "wind_up" and child.replay is not None:
            child.replay.wind_up(message[1])
            out.send(("wound", child.sockets()))


def main(argv: list[str]) -> int:
    ctrl = Connection(int(argv[0]), writable=False)
    out = Connection(int(argv[1]), readable=False)
    try:
        serve(ctrl, out)
    except (BrokenPipeError, EOFError):
        return 0  # the run's process closed its ends: no one is left to tell
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
