"""The live processes of this machine, read from /proc: what a test left running."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path


def cmdlines() -> Iterator[tuple[int, bytes]]:
    """(pid, raw command line, NUL-separated) of every process still there when read."""
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            raw = path.read_bytes()
        except OSError:  # gone since the listing
            continue
        yield int(path.parent.name), raw


def cmdline(pid: int) -> str:
    """A process's command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """The PIDs whose parent is pid, read from each /proc/<pid>/stat."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(int(proc.name))
    return found


def stop_on_sigterm() -> threading.Event:
    """An event that SIGTERM sets: the loops of the test programs end on it."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    return stop
