"""Pure parsing of Go's symbolized profile text (`/debug/pprof/heap?debug=1`, `goroutine?debug=1`).

Go's runtime/pprof writes, for `debug=1`:

    heap profile: 60: 902120 [81: 2633368] @ heap/1048576
    55: 901120 [55: 901120] @ 0x90d853 0x90d428 ...
    #	0x90d852	main.(*server).leakName+0x72	refdns/server.go:393
    ...
    # runtime.MemStats            (then the MemStats, which are not records)

    goroutine profile: total 3010
    3000 @ 0x442276 0x40c63b ...
    #	0x90d9f7	main.(*server).leakName.func1+0x37	refdns/server.go:398

A heap record is `inuse_objects: inuse_bytes [alloc_objects: alloc_bytes]`, the
in-use part as of the last completed garbage collection and *not* scaled for
sampling: Go samples one allocation per `MemProfileRate` bytes (the header's
`heap/N` is twice the rate), and `go tool pprof` scales each record by
1 / (1 - exp(-avg_size / rate)); `parse_profile` does the same, so bytes are
estimates of the whole heap. Frames are listed leaf first. Text that is not one
of these two profiles is a ValueError (an HTML error page, a login form).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_HEAP_HEADER = re.compile(r"^heap profile: (\d+): (\d+) \[(\d+): (\d+)\] @ heap/(\d+)\s*$")
_GOROUTINE_HEADER = re.compile(r"^goroutine profile: total (\d+)\s*$")
_HEAP_RECORD = re.compile(r"^(\d+): (\d+) \[(\d+): (\d+)\] @(.*)$")
_GOROUTINE_RECORD = re.compile(r"^(\d+) @(.*)$")
_FRAME = re.compile(r"^#\s+0x[0-9a-f]+\s+(\S+?)(?:\+0x[0-9a-f]+)?\s+(\S+)\s*$")
# runtime frames above the code that allocated or parked (the goroutine text hides most)
_RUNTIME = re.compile(r"^runtime\.(?!main\b)|^runtime/internal/")


@dataclass(frozen=True, slots=True)
class Record:
    count: int  # in-use objects (heap, scaled) or goroutines
    bytes: int  # in-use bytes (heap, scaled); 0 for goroutines
    stack: tuple[str, ...]  # function names, leaf first
    site: str  # file:line of the leaf frame

    @property
    def function(self) -> str:
        """The first frame that is not the runtime's: where the program allocated or waits."""
        for name in self.stack:
            if not _RUNTIME.match(name):
                return name
        return self.stack[0] if self.stack else "(unknown)"


@dataclass(frozen=True, slots=True)
class Profile:
    kind: str  # "heap" or "goroutine"
    records: tuple[Record, ...]
    sample_rate_bytes: int = 0  # heap: Go's MemProfileRate

    @property
    def total_count(self) -> int:
        return sum(r.count for r in self.records)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.records)


def scale_heap_sample(count: int, size: int, rate: int) -> tuple[int, int]:
    """Go's scaleHeapSample: estimated (objects, bytes) behind `count` sampled objects."""
    if count == 0 or size == 0:
        return 0, 0
    if rate <= 1:
        return count, size  # every allocation was recorded
    scale = 1.0 / (1.0 - math.exp(-(size / count) / rate))
    return round(count * scale), round(size * scale)


def parse_profile(text: str) -> Profile:
    """A heap or goroutine profile in `debug=1` text; ValueError for anything else."""
    lines = text.splitlines()
    if not lines:
        raise ValueError("empty profile")
    heap = _HEAP_HEADER.match(lines[0])
    if heap is not None:
        return _parse_records(lines[1:], "heap", int(heap.group(5)) // 2)
    if _GOROUTINE_HEADER.match(lines[0]) is not None:
        return _parse_records(lines[1:], "goroutine", 0)
    raise ValueError(f"not a debug=1 heap or goroutine profile: {lines[0][:80]!r}")


def _parse_records(lines: list[str], kind: str, rate: int) -> Profile:
    records: list[Record] = []
    count = size = 0
    frames: list[tuple[str, str]] = []
    open_record = False

    def close() -> None:
        if open_record and count > 0:
            objects, nbytes = scale_heap_sample(count, size, rate) if kind == "heap" else (count, 0)
            stack = tuple(f for f, _ in frames)
            records.append(Record(objects, nbytes, stack, frames[0][1] if frames else ""))

    for line in lines:
        if line.startswith("# runtime.MemStats"):
            break
        frame = _FRAME.match(line)
        if frame is not None:
            frames.append((frame.group(1), frame.group(2)))
            continue
        record = (_HEAP_RECORD if kind == "heap" else _GOROUTINE_RECORD).match(line)
        if record is not None:
            close()
            count, size = int(record.group(1)), int(record.group(2)) if kind == "heap" else 0
            frames, open_record = [], True
        elif line.strip() and not line.startswith("#"):
            raise ValueError(f"not a {kind} profile line: {line[:80]!r}")
    close()
    return Profile(kind, tuple(records), rate)
