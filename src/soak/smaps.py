"""Pure parsing and grouping of /proc/<pid>/smaps: RSS, PSS and anonymous bytes by mapping.

Text in, `MapGroup`s out; no file is read here (the `smaps` sampler reads, and
this module is meant to join `soak.procfs`, the one /proc reader, as it is).

Kinds (the `kind` tag of `memory_map`), with their `path` tag:

| kind | path | what |
|---|---|---|
| `heap` | `[heap+anon]` | `[heap]`, anonymous mappings, `[anon:x]`: malloc arenas, the Go heap |
| `stack` | `[stacks]` | `[stack]` and thread stacks (anonymous, right above a small guard) |
| `file` | the file's path | each file-backed mapping that is not code: a SQLite database, a cache |
| `lib` | `[libraries]` | every file with an executable mapping: shared libraries and the binary |
| `other` | `[other]` | `[vdso]`, `[vvar]`, shared memory, memfd, and the files past the top N |
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024
# A glibc or musl thread stack sits right above a guard mapping of a page or a few;
# a runtime's PROT_NONE reservation (the Go heap's) is megabytes.
MAX_GUARD_BYTES = 64 * KIB

HEAP_PATH, STACKS_PATH, LIBS_PATH, OTHER_PATH = "[heap+anon]", "[stacks]", "[libraries]", "[other]"

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+)\s+([-rwxsp]{4})\s+[0-9a-f]+\s+\S+\s+\d+\s*(.*)$")
_FIELD = re.compile(r"^([A-Za-z_]+):\s+(\d+)\s+kB\s*$")


@dataclass(frozen=True, slots=True)
class Mapping:
    """One region of /proc/<pid>/smaps."""

    start: int
    end: int
    perms: str  # e.g. "rw-p"
    path: str  # "" for anonymous, "[heap]", "/usr/lib/...", "/x (deleted)"
    rss_bytes: int = 0
    pss_bytes: int = 0
    anon_bytes: int = 0
    swap_bytes: int = 0


@dataclass(frozen=True, slots=True)
class MapGroup:
    kind: str
    path: str
    rss_bytes: int
    pss_bytes: int
    anon_bytes: int


def parse_smaps(text: str) -> list[Mapping]:
    """Every region of an smaps text, in address order (as the kernel lists them)."""
    maps: list[Mapping] = []
    head: tuple[int, int, str, str] | None = None
    values: dict[str, int] = {}

    def close() -> None:
        if head is not None:
            maps.append(
                Mapping(
                    *head,
                    rss_bytes=values.get("Rss", 0),
                    pss_bytes=values.get("Pss", 0),
                    anon_bytes=values.get("Anonymous", 0),
                    swap_bytes=values.get("Swap", 0),
                )
            )

    for line in text.splitlines():
        field = _FIELD.match(line)
        if field:
            values[field.group(1)] = int(field.group(2)) * KIB
            continue
        header = _HEADER.match(line)
        if header:
            close()
            start, end, perms, path = header.groups()
            head, values = (int(start, 16), int(end, 16), perms, path.strip()), {}
    close()
    return _without_rereads(maps)


def _without_rereads(maps: list[Mapping]) -> list[Mapping]:
    """The kernel writes smaps a page at a time, taking the mm's lock anew for each; a
    mapping that grew or merged downwards meanwhile (the Go heap mapping arenas over its
    reservation) is listed again from its new start, and its RSS would count twice (a
    one-tick spike of the heap's RSS to double was seen on refdns -leak). The later copy
    is the newer: an earlier mapping it covers is dropped."""
    out: list[Mapping] = []
    for m in maps:
        while out and out[-1].end > m.start and out[-1].start >= m.start:
            out.pop()
        out.append(m)
    return out


def _is_anonymous(m: Mapping) -> bool:
    return m.path == "" or m.path.startswith("[anon:")


def _thread_stacks(maps: list[Mapping]) -> set[int]:
    """Indexes of anonymous writable mappings that sit right above a small guard mapping."""
    found: set[int] = set()
    for i in range(1, len(maps)):
        guard, m = maps[i - 1], maps[i]
        if (
            _is_anonymous(m)
            and m.perms.startswith("rw")
            and _is_anonymous(guard)
            and guard.perms.startswith("---")
            and guard.end == m.start
            and guard.end - guard.start <= MAX_GUARD_BYTES
        ):
            found.add(i)
    return found


def classify(maps: list[Mapping]) -> list[tuple[str, str]]:
    """(kind, path) of each mapping; a file's path before the top-N cut (see group())."""
    code_files = {m.path for m in maps if "x" in m.perms and m.path.startswith("/")}
    stacks = _thread_stacks(maps)
    kinds: list[tuple[str, str]] = []
    for i, m in enumerate(maps):
        if m.path == "[heap]" or (_is_anonymous(m) and i not in stacks):
            kinds.append(("heap", HEAP_PATH))
        elif i in stacks or m.path == "[stack]" or m.path.startswith("[stack:"):
            kinds.append(("stack", STACKS_PATH))
        elif m.path in code_files:
            kinds.append(("lib", LIBS_PATH))
        elif m.path.startswith("/") and not _special_file(m.path):
            kinds.append(("file", m.path))
        else:
            kinds.append(("other", OTHER_PATH))
    return kinds


def _special_file(path: str) -> bool:
    """Shared memory that is a path only in name: /dev/zero, SysV segments, memfd."""
    return path.startswith(("/dev/zero", "/SYSV", "/memfd:", "/anon_hugepage"))


def group(maps: list[Mapping], top_paths: int = 8) -> list[MapGroup]:
    """Sums by (kind, path); the `top_paths` files with most RSS keep their path, the rest
    are added to `other`. Heap, stacks, libraries and other are always there (0 if empty),
    so every series starts at the run's first tick. Largest RSS first."""
    sums: dict[tuple[str, str], list[int]] = {
        key: [0, 0, 0] for key in (("heap", HEAP_PATH), ("stack", STACKS_PATH), ("lib", LIBS_PATH))
    }
    sums[("other", OTHER_PATH)] = [0, 0, 0]
    for m, key in zip(maps, classify(maps), strict=True):
        acc = sums.setdefault(key, [0, 0, 0])
        acc[0] += m.rss_bytes
        acc[1] += m.pss_bytes
        acc[2] += m.anon_bytes
    files = sorted((k for k in sums if k[0] == "file"), key=lambda k: (-sums[k][0], k[1]))
    for key in files[max(0, top_paths) :]:
        acc = sums.pop(key)
        other = sums[("other", OTHER_PATH)]
        for j in range(3):
            other[j] += acc[j]
    groups = [MapGroup(k, p, *v) for (k, p), v in sums.items()]
    return sorted(groups, key=lambda g: (-g.rss_bytes, g.kind, g.path))


def parse_and_group(text: str, top_paths: int = 8) -> list[MapGroup]:
    return group(parse_smaps(text), top_paths)
