"""The live processes of this machine, read from /proc: what a test left running."""

from __future__ import annotations

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
