"""The `files` sampler: sizes in the target's data directory and SQLite row counts, read-only."""

from __future__ import annotations

import glob
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from soak.points import Point, event_point
from soak.samplers.base import TargetFn, TargetSectionSampler
from soak.samplers.selection import FilesSamplerConfig

_GLOB_CHARS = set("*?[")


def tree_bytes(path: Path) -> int:
    """A file's size, or the total of every file under a directory (symlinks not followed)."""
    if not path.is_dir():
        return path.stat().st_size
    total = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue  # removed while walking (a WAL checkpoint, a rotated log)
    return total


def sizes(data_dir: Path, patterns: list[str]) -> Iterator[tuple[str, int]]:
    """(path relative to data_dir, bytes). A plain path that does not exist is 0 bytes
    (a -wal file between checkpoints); a glob that matches nothing gives nothing."""
    for pattern in patterns:
        if _GLOB_CHARS & set(pattern):
            for match in sorted(glob.glob(str(data_dir / pattern), recursive=True)):
                try:
                    yield os.path.relpath(match, data_dir), tree_bytes(Path(match))
                except FileNotFoundError:
                    continue  # matched, then removed before its size was read
        else:
            try:
                yield pattern, tree_bytes(data_dir / pattern)
            except FileNotFoundError:
                yield pattern, 0


def sqlite_row_count(path: Path, query: str, timeout_s: float = 2.0) -> float:
    """The first column of the query's first row, opened read-only (never creates the file)."""
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=timeout_s)
    try:
        row = db.execute(query).fetchone()
    finally:
        db.close()
    if row is None or row[0] is None:
        raise ValueError(f"{query!r} returned no value")
    return float(row[0])


class FilesSampler(TargetSectionSampler[FilesSamplerConfig]):
    name = "files"

    def __init__(
        self, cfg: FilesSamplerConfig, target: TargetFn, *, data_dir: Path | None = None
    ) -> None:
        super().__init__(cfg, target)
        self.data_dir = data_dir

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        data_dir = self.data_dir or (running.data_dir if running is not None else None)
        if data_dir is None:
            if running is None:
                return []
            raise RuntimeError("the target has no data directory to sample files in")
        points = [
            Point("files", {"bytes": float(size)}, tick_time_ns, {"path": rel})
            for rel, size in sizes(data_dir, self.cfg.paths)
        ]
        for rc in self.cfg.row_counts:
            try:
                rows = sqlite_row_count(data_dir / rc.path, rc.query)
            except (sqlite3.Error, ValueError) as exc:
                message = f"row count of {rc.path}: {type(exc).__name__}: {exc}"
                points.append(event_point("files_error", message, tick_time_ns))
                continue
            points.append(Point("files", {"rows": rows}, tick_time_ns, {"path": rc.path}))
        return points
