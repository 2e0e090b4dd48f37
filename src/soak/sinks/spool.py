"""An append-only spool file per sink: points a sink refused, replayed in order later.

Each line is one JSON point (soak.points.point_to_json; a line in the shape written
before it is read too). A sidecar file holds the byte offset replayed so far,
written after each accepted chunk, so a replay interrupted by another failure (or
by a restart of the service) resumes where it stopped and sends no point twice.
When the whole file is replayed it is truncated.

A spool an ended run still holds is replayed by whoever holds its lock
(`try_lock`: one process at a time, so no point goes twice) and removed, only
when empty (`remove`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Sequence
from pathlib import Path

from soak.points import Point, point_from_json, point_to_json


def point_line(p: Point) -> bytes:
    return (json.dumps(point_to_json(p), separators=(",", ":")) + "\n").encode()


class Spool:
    """The spool of one sink. Not thread-safe: its SpoolingSink serialises calls."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.offset_path = path.with_name(path.name + ".offset")
        self.max_bytes = max_bytes
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = None
        self.reload()

    def reload(self) -> None:
        """Size, offset and depth as the files say (another process may have replayed)."""
        self.size_bytes = self.path.stat().st_size if self.path.exists() else 0
        # An offset past the end: the file was truncated after a full replay and
        # the service stopped before the offset file was reset.
        self.offset = min(self._read_offset(), self.size_bytes)
        self.depth = self._count_pending()

    def _read_offset(self) -> int:
        try:
            return int(self.offset_path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def _count_pending(self) -> int:
        if self.size_bytes <= self.offset:
            return 0
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return sum(1 for _ in f)

    @property
    def empty(self) -> bool:
        return self.depth == 0

    def append(self, points: Sequence[Point]) -> int:
        """Appends what fits under max_bytes, in order; returns how many points fit."""
        data = [point_line(p) for p in points]
        fit = 0
        room = self.max_bytes - self.size_bytes
        for line in data:
            if len(line) > room:
                break
            room -= len(line)
            fit += 1
        if fit:
            with open(self.path, "ab") as f:
                f.write(b"".join(data[:fit]))
                f.flush()
                os.fsync(f.fileno())
            self.size_bytes += sum(len(line) for line in data[:fit])
            self.depth += fit
        return fit

    def read_chunk(self, max_points: int) -> tuple[list[Point], list[int]]:
        """The next points to replay and, for each, the offset after it (commit once accepted)."""
        points: list[Point] = []
        ends: list[int] = []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            end = self.offset
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # a torn last line (crash while appending) is never replayed
                points.append(point_from_json(json.loads(raw)))
                end += len(raw)
                ends.append(end)
                if len(points) >= max_points:
                    break
        return points, ends

    def commit(self, end_offset: int, count: int) -> None:
        self.depth = max(0, self.depth - count)
        if self.depth == 0:
            # Truncate first: a crash between the two leaves an empty file and a
            # stale offset, which _read_offset's caller treats as nothing pending.
            with open(self.path, "wb"):
                pass
            self.size_bytes = 0
            self.offset = 0
        else:
            self.offset = end_offset
        tmp = self.offset_path.with_name(self.offset_path.name + ".tmp")
        tmp.write_text(str(self.offset))
        os.replace(tmp, self.offset_path)

    def try_lock(self) -> bool:
        """The exclusive right to replay this file (flock on it), if no other holder has
        it; released by `unlock` (or the holder's death). The holder then `reload`s:
        the last holder may have replayed some of it."""
        if self._lock_fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # replayed and removed by its last holder
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases its flock
            self._lock_fd = None

    def remove(self) -> bool:
        """Removes the spool and its offset file if nothing is pending; True if it did
        (and its directory too, once empty)."""
        if not self.empty:
            return False
        for path in (self.path, self.offset_path):
            path.unlink(missing_ok=True)
        self.unlock()
        with contextlib.suppress(OSError):  # other sinks' spools are still in it
            self.path.parent.rmdir()
        return True
