"""Pure parsers of /proc/<pid> files (text in, numbers out), tested from captured fixtures.

Memory comes from `status` (RssAnon, RssFile, RssShmem apart: a memory-mapped
SQLite database makes RSS grow while the heap is flat, and only the
anonymous part says whether the process leaks) and `smaps_rollup` (PSS).
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024


def parse_kv_kib(text: str) -> dict[str, int]:
    """`Key:   123 kB` lines (status, smaps_rollup) -> {key: bytes}; plain numbers as they are."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts or not parts[0].isdigit():
            continue
        number = int(parts[0])
        values[key.strip()] = number * KIB if len(parts) > 1 and parts[1] == "kB" else number
    return values


@dataclass(frozen=True)
class StatusMemory:
    rss_bytes: int
    rss_anon_bytes: int
    rss_file_bytes: int
    rss_shmem_bytes: int
    swap_bytes: int
    threads: int
    ctx_switches: int


def parse_status(text: str) -> StatusMemory:
    v = parse_kv_kib(text)
    return StatusMemory(
        rss_bytes=v.get("VmRSS", 0),  # kernel threads and zombies have no VmRSS
        rss_anon_bytes=v.get("RssAnon", 0),
        rss_file_bytes=v.get("RssFile", 0),
        rss_shmem_bytes=v.get("RssShmem", 0),
        swap_bytes=v.get("VmSwap", 0),
        threads=v.get("Threads", 0),
        ctx_switches=v.get("voluntary_ctxt_switches", 0) + v.get("nonvoluntary_ctxt_switches", 0),
    )


def parse_smaps_rollup(text: str) -> dict[str, int]:
    """{Rss, Pss, Pss_Anon, Pss_File, Pss_Shmem, Swap, ...} in bytes."""
    return parse_kv_kib(text)


@dataclass(frozen=True)
class StatCpu:
    ppid: int
    utime_ticks: int
    stime_ticks: int
    starttime_ticks: int


def parse_stat(text: str) -> StatCpu:
    """/proc/<pid>/stat. The command name may hold spaces and ')': split after the last ')'."""
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): field n is rest[n - 3]
    return StatCpu(
        ppid=int(rest[1]),
        utime_ticks=int(rest[11]),
        stime_ticks=int(rest[12]),
        starttime_ticks=int(rest[19]),
    )


def parse_io(text: str) -> dict[str, int]:
    """/proc/<pid>/io: read_bytes, write_bytes (storage), rchar, wchar, ..."""
    return parse_kv_kib(text)


def parse_fd_limit(text: str) -> int | None:
    """The soft `Max open files` of /proc/<pid>/limits; None for unlimited."""
    for line in text.splitlines():
        if line.startswith("Max open files"):
            soft = line[len("Max open files") :].split()[0]
            return None if soft == "unlimited" else int(soft)
    return None


def children_of(ppids: dict[int, int], root: int) -> list[int]:
    """root and every descendant, from a pid -> ppid map (root first, then breadth-first)."""
    by_parent: dict[int, list[int]] = {}
    for pid, ppid in ppids.items():
        by_parent.setdefault(ppid, []).append(pid)
    tree, queue = [root], [root]
    while queue:
        kids = sorted(by_parent.get(queue.pop(0), []))
        tree.extend(kids)
        queue.extend(kids)
    return tree


def cpu_cores(prev_cpu_s: float, cpu_s: float, prev_wall_s: float, wall_s: float) -> float | None:
    """Busy cores over an interval: CPU seconds used per wall second (None without time)."""
    elapsed_s = wall_s - prev_wall_s
    if elapsed_s <= 0:
        return None
    return max(0.0, cpu_s - prev_cpu_s) / elapsed_s
