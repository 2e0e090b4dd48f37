"""The Go profiles a run keeps: file names in the run's profiles directory (the data
directory names it: soak.runs.layout.profiles_dir), reading them back, thinning.

A capture is one time with one file per profile kind:
`<time_ns>-<reason>.<kind>.txt.gz` (Go's `debug=1` text, gzipped).
The caps are on captures and on bytes; over a cap, captures are thinned from
the old end (the one whose neighbours are closest together goes first, so the
survivors stay spread over the run), never the first or the latest.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^(\d+)-([a-z_]+)\.([a-z]+)\.txt\.gz$")


@dataclass(frozen=True, slots=True)
class StoredProfile:
    time_ns: int
    reason: str  # interval, warmup_end, end, growing, first
    kind: str  # heap, goroutine
    path: Path
    bytes: int


def profile_path(folder: Path, time_ns: int, reason: str, kind: str) -> Path:
    return folder / f"{time_ns}-{reason}.{kind}.txt.gz"


def write_profile(folder: Path, time_ns: int, reason: str, kind: str, text: bytes) -> Path:
    """Written whole or not at all (a temp name, then renamed): a reader never sees half."""
    path = profile_path(folder, time_ns, reason, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(text, compresslevel=6))
    tmp.replace(path)
    return path


def list_profiles(folder: Path) -> list[StoredProfile]:
    """Every stored profile, oldest first; names that are not ours are left out."""
    found = []
    if not folder.is_dir():
        return []
    for entry in folder.iterdir():
        m = _NAME.match(entry.name)
        if m is None:
            continue
        try:
            size = entry.stat().st_size
        except OSError:
            continue  # thinned meanwhile
        found.append(StoredProfile(int(m.group(1)), m.group(2), m.group(3), entry, size))
    return sorted(found, key=lambda p: (p.time_ns, p.kind))


def read_profile_text(profile: StoredProfile) -> str:
    return gzip.decompress(profile.path.read_bytes()).decode("utf-8", errors="replace")


def captures_to_drop(
    captures: list[tuple[int, int]], max_captures: int, max_bytes: int
) -> list[int]:
    """Times of the captures to delete: `captures` is (time_ns, bytes) oldest first.

    Pure. The first and the latest are kept; of the others, the one whose
    neighbours are closest in time goes first (the oldest of equals).
    """
    kept = list(captures)
    dropped: list[int] = []
    while len(kept) > 2 and (len(kept) > max_captures or sum(b for _, b in kept) > max_bytes):
        best = min(range(1, len(kept) - 1), key=lambda i: (kept[i + 1][0] - kept[i - 1][0], i))
        dropped.append(kept.pop(best)[0])
    return dropped


def thin(folder: Path, max_captures: int, max_bytes: int) -> int:
    """Applies the caps to the stored profiles; returns how many files were deleted."""
    by_time: dict[int, list[StoredProfile]] = {}
    for p in list_profiles(folder):
        by_time.setdefault(p.time_ns, []).append(p)
    captures = [(t, sum(p.bytes for p in ps)) for t, ps in sorted(by_time.items())]
    deleted = 0
    for t in captures_to_drop(captures, max_captures, max_bytes):
        for p in by_time[t]:
            p.path.unlink(missing_ok=True)
            deleted += 1
    return deleted


def first_and_latest(
    folder: Path, kind: str, since_ns: int = 0
) -> tuple[StoredProfile, StoredProfile] | None:
    """The first profile of `kind` at or after `since_ns` (the warm-up's end) and the latest;
    None with fewer than two."""
    found = [p for p in list_profiles(folder) if p.kind == kind and p.time_ns >= since_ns]
    if len(found) < 2:
        return None
    return found[0], found[-1]
