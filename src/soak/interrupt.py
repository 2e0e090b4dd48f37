"""SIGINT and SIGTERM: the one module that installs a handler for them.

A plan run (soak.plans.engine: `soak load`, `--replay`, `bench`, `upgrade`) traps them
with `trap_signals`: the first signal raises Interrupted in the main thread, wherever
it is (a container being created, a readiness wait, a check, a load's wait), the
plan's teardown runs, and the command exits 128 + the signal (130, 143). Interrupted
is a BaseException, so no `except Exception` on the way swallows it. Later signals
only say that the clean-up is under way: the clean-up after a cancel must run to its
end, or it leaves the containers behind that it exists to remove (a CI system sends
SIGKILL if it is not patient enough; a later run removes those leftovers by their
labels).

A foreground soak (`soak start --foreground`) uses `stop_on_signals` instead: there a
signal is a request to end the run early, not an abort. The run's own end does the
rest (the target stopped, the criteria judged on what ran, the report written), which
needs the service's threads running, so nothing may be raised into the main thread's
wait; the run ends `stopped` (exit 130 for either signal, docs/service.md).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The run was told to stop by a signal; the exit code is 128 + its number."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.phase: str | None = None  # the innermost step it went through, named there
        self.step = ""  # the step then under way, as announced (upgrade.outcome)
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class SignalTrap:
    """Which signal arrived first (None: none yet)."""

    def __init__(self) -> None:
        self.first: int | None = None

    def handler(self, signum: int, frame: Any) -> None:
        if self.first is None:
            self.first = signum
            raise Interrupted(signum)
        sys.stderr.write(f"soak: {signal.Signals(signum).name}: still cleaning up\n")


@contextlib.contextmanager
def trap_signals() -> Iterator[SignalTrap]:
    """SIGINT and SIGTERM raise Interrupted once while the block runs (main thread only:
    elsewhere Python delivers no signal, and the trap is a no-op)."""
    trap = SignalTrap()
    if threading.current_thread() is not threading.main_thread():
        yield trap
        return
    previous = {sig: signal.signal(sig, trap.handler) for sig in SIGNALS}
    try:
        yield trap
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def children_ignore_sigint() -> Iterator[None]:
    """Processes started in the block ignore SIGINT (the disposition is inherited, and
    Python keeps an ignored SIGINT): a terminal's Ctrl-C reaches the whole process
    group, and the load's workers would die with a traceback each, while the run stops
    them itself. A SIGINT in this short moment is ignored by soak too; SIGTERM is not."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop` while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
