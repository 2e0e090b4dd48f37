"""The one /proc reader: pure parsers of /proc files, and readers under an injectable root.

Parsers take a file's text and give numbers; they are tested from the captured
files under tests/fixtures/proc/. Readers take a pid and `root` (a directory laid
out as /proc, /proc itself by default), so samplers, target liveness and bench
take their pid from whatever source they have (a target's Running, a PID
argument) and tests point `root` at a fixture tree.

Memory comes from `status` (RssAnon, RssFile, RssShmem apart: a memory-mapped
SQLite database makes RSS grow while the heap is flat, and only the
anonymous part says whether the process leaks) and `smaps_rollup` (PSS).

Sections: parsers by file (stat, status, smaps_rollup, io, limits), then readers of
one process, liveness, process trees, a server's UDP socket drops, CPU. The machine's
files (stat, loadavg, pressure, meminfo) are soak.hostproc's.
A parser raises ValueError on text it cannot read; a reader raises OSError for
a process that is gone, unless it says it gives None.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from soak.smaps import Mapping, parse_smaps

PROC_ROOT = Path("/proc")
KIB = 1024
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def parse_kv_kib(text: str) -> dict[str, int]:
    """`Key:   123 kB` lines (status, smaps_rollup, io) -> {key: bytes}; plain numbers as
    they are."""
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


# ---------------------------------------------------------------- parsers: one process


@dataclass(frozen=True)
class Stat:
    """The fields of /proc/<pid>/stat that soak uses."""

    state: str
    ppid: int
    utime_ticks: int
    stime_ticks: int
    starttime_ticks: int  # field 22: with the pid, the identity of a process

    @property
    def cpu_s(self) -> float:
        return (self.utime_ticks + self.stime_ticks) / CLOCK_TICKS_PER_S

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")  # a zombie or a dead task is not running


def parse_stat(text: str) -> Stat:
    """/proc/<pid>/stat. The command name may hold spaces and ')': split after the last ')'."""
    _, sep, after = text.rpartition(")")
    rest = after.split()
    if not sep or len(rest) < 20:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    # rest[0] is field 3 (state): field n is rest[n - 3]
    return Stat(
        state=rest[0],
        ppid=int(rest[1]),
        utime_ticks=int(rest[11]),
        stime_ticks=int(rest[12]),
        starttime_ticks=int(rest[19]),
    )


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


def parse_io(text: str) -> dict[str, int]:
    """/proc/<pid>/io: read_bytes, write_bytes (storage), rchar, wchar, ..."""
    return parse_kv_kib(text)


def parse_fd_limit(text: str) -> int | None:
    """The soft `Max open files` of /proc/<pid>/limits; None when unlimited, absent or
    not a number (an fd limit that cannot be read is not known, not an error)."""
    for line in text.splitlines():
        if line.startswith("Max open files"):
            soft = line[len("Max open files") :].split()[:1]
            return int(soft[0]) if soft and soft[0].isdigit() else None
    return None


# ---------------------------------------------------------------- readers: one process


def _read(pid: int, name: str, root: Path) -> str:
    return (root / str(pid) / name).read_text()


def read_stat(pid: int, root: Path = PROC_ROOT) -> Stat:
    return parse_stat(_read(pid, "stat", root))


def read_fd_limit(pid: int, root: Path = PROC_ROOT) -> int | None:
    """The soft fd limit; None when unlimited or unreadable."""
    try:
        return parse_fd_limit(_read(pid, "limits", root))
    except OSError:
        return None


def count_fds(pid: int, root: Path = PROC_ROOT) -> int:
    return len(os.listdir(root / str(pid) / "fd"))


def read_cgroup(pid: int, root: Path = PROC_ROOT) -> str:
    """/proc/<pid>/cgroup as it is (a container's id is in its lines)."""
    return _read(pid, "cgroup", root)


@dataclass
class ProcessSample:
    """One process's numbers at one time (what a tree sums)."""

    status: StatusMemory
    pss_bytes: int | None
    fds: int
    fd_limit: int | None
    cpu_user_s: float
    cpu_system_s: float
    read_bytes: int | None
    write_bytes: int | None


def read_smaps(pid: int, root: Path = PROC_ROOT) -> list[Mapping]:
    """The mappings of one process (soak.smaps parses them); OSError if it is gone."""
    return parse_smaps((root / str(pid) / "smaps").read_text())


def read_process(pid: int, root: Path = PROC_ROOT) -> ProcessSample:
    """Reads one process; raises OSError if it is gone (or never was)."""
    status = parse_status(_read(pid, "status", root))
    stat = read_stat(pid, root)
    fds = count_fds(pid, root)
    fd_limit = parse_fd_limit(_read(pid, "limits", root))
    try:  # smaps_rollup (Linux 4.14+) and io need ptrace access: root or the same user
        pss: int | None = parse_smaps_rollup(_read(pid, "smaps_rollup", root))["Pss"]
    except (OSError, KeyError):
        pss = None
    try:
        io = parse_io(_read(pid, "io", root))
        read_b, write_b = io.get("read_bytes"), io.get("write_bytes")
    except OSError:
        read_b = write_b = None
    return ProcessSample(
        status=status,
        pss_bytes=pss,
        fds=fds,
        fd_limit=fd_limit,
        cpu_user_s=stat.utime_ticks / CLOCK_TICKS_PER_S,
        cpu_system_s=stat.stime_ticks / CLOCK_TICKS_PER_S,
        read_bytes=read_b,
        write_bytes=write_b,
    )


# ---------------------------------------------------------------- liveness


def start_ticks(pid: int, root: Path = PROC_ROOT) -> int | None:
    """The process's start time (its identity with the pid); None when it is gone."""
    try:
        return read_stat(pid, root).starttime_ticks
    except (OSError, ValueError):
        return None


def pid_alive(pid: int, expected_start_ticks: int | None = None, root: Path = PROC_ROOT) -> bool:
    """The process exists, is not a zombie, and (if given) is the same one as before."""
    try:
        stat = read_stat(pid, root)
    except OSError:
        return False
    except ValueError:
        return expected_start_ticks is None  # there, but its identity cannot be checked
    return stat.alive and expected_start_ticks in (None, stat.starttime_ticks)


# ---------------------------------------------------------------- process trees


def all_pids(root: Path = PROC_ROOT) -> Iterator[int]:
    """Every process's pid under `root`, as /proc lists them (the one walk of /proc: a
    caller reads what it needs of each and leaves out one that exited meanwhile)."""
    for entry in os.scandir(root):
        if entry.name.isdigit():
            yield int(entry.name)


def parent_pids(root: Path = PROC_ROOT) -> dict[int, int]:
    """pid -> ppid of every process (one that exits while /proc is read is left out)."""
    ppids: dict[int, int] = {}
    for pid in all_pids(root):
        try:
            ppids[pid] = read_stat(pid, root).ppid
        except (OSError, ValueError):
            continue
    return ppids


def children_of(ppids: dict[int, int], root_pid: int) -> list[int]:
    """root_pid and every descendant, from a pid -> ppid map (root first, then
    breadth-first)."""
    by_parent: dict[int, list[int]] = {}
    for pid, ppid in ppids.items():
        by_parent.setdefault(ppid, []).append(pid)
    tree, queue = [root_pid], [root_pid]
    while queue:
        kids = sorted(by_parent.get(queue.pop(0), []))
        tree.extend(kids)
        queue.extend(kids)
    return tree


def children(pid: int, root: Path = PROC_ROOT) -> list[int]:
    """Direct children of `pid` (from the task's children file, else by scanning)."""
    try:
        return [int(p) for p in _read(pid, f"task/{pid}/children", root).split()]
    except (OSError, ValueError):
        pass
    return sorted(child for child, ppid in parent_pids(root).items() if ppid == pid)


def process_tree(pid: int, root: Path = PROC_ROOT) -> list[int]:
    """pid and its descendants."""
    return children_of(parent_pids(root), pid)


def parse_environ_value(data: bytes, name: str) -> str | None:
    """One variable of /proc/<pid>/environ (NUL-separated NAME=value), or None."""
    prefix = name.encode() + b"="
    for entry in data.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def environ_values(name: str, root: Path = PROC_ROOT) -> dict[int, str]:
    """pid -> the value of environment variable `name`, for every process that has it and
    whose environment may be read (its own user's, or every one for root). Zombies and
    processes that exit meanwhile are left out."""
    found: dict[int, str] = {}
    for pid in all_pids(root):
        try:
            data = (root / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        value = parse_environ_value(data, name) if data else None
        if value is not None:
            found[pid] = value
    return found


# ---------------------------------------------------------------- sockets


def parse_udp_drops(text: str, port: int) -> int:
    """Datagrams the kernel dropped at the UDP sockets bound to `port` (the `drops`
    column of /proc/net/udp or udp6: a full receive buffer, counted by the kernel, not
    by the server or the sender)."""
    lines = text.splitlines()
    if not lines or "drops" not in lines[0]:
        raise ValueError("not a /proc/net/udp table")
    total = 0
    for line in lines[1:]:
        fields = line.split()
        if len(fields) >= 13 and int(fields[1].rsplit(":", 1)[1], 16) == port:
            total += int(fields[12])
    return total


def udp_drops(pid: int, port: int, root: Path = PROC_ROOT) -> int:
    """What parse_udp_drops counts in the network namespace of process `pid` (a server
    in a container has its own), over IPv4 and IPv6."""
    return sum(parse_udp_drops(_read(pid, f"net/{name}", root), port) for name in ("udp", "udp6"))


# ---------------------------------------------------------------- CPU


def cpu_s(pid: int, root: Path = PROC_ROOT) -> float | None:
    """User + system CPU seconds of one process; None when it is gone."""
    try:
        return read_stat(pid, root).cpu_s
    except (OSError, ValueError):
        return None


def pids_cpu_s(pids: list[int], root: Path = PROC_ROOT) -> float:
    """CPU seconds of the processes that are still there."""
    return sum(v for v in (cpu_s(p, root) for p in pids) if v is not None)


def tree_cpu_s(pid: int | None, root: Path = PROC_ROOT) -> float | None:
    """CPU seconds of pid and its descendants (None when pid is unknown or gone)."""
    if pid is None or cpu_s(pid, root) is None:
        return None
    return pids_cpu_s(process_tree(pid, root), root)


def tree_threads(pid: int | None, root: Path = PROC_ROOT) -> int | None:
    """Threads of pid and its descendants (None when pid is unknown or gone)."""
    if pid is None:
        return None
    total = 0
    for p in process_tree(pid, root):
        try:
            total += parse_status(_read(p, "status", root)).threads
        except OSError:
            continue
    return total or None


def cpu_cores(
    prev_cpu_s: float, now_cpu_s: float, prev_wall_s: float, now_wall_s: float
) -> float | None:
    """Busy cores over an interval: CPU seconds used per wall second (None without time)."""
    elapsed_s = now_wall_s - prev_wall_s
    if elapsed_s <= 0:
        return None
    return max(0.0, now_cpu_s - prev_cpu_s) / elapsed_s


def pids_working_in(directory: Path, root: Path = PROC_ROOT) -> list[int]:
    """Processes whose working directory is `directory` or below it (what a run whose
    soak process was killed left running in its run directory)."""
    prefix = str(directory.resolve())
    pids = []
    for pid in all_pids(root):
        try:
            cwd = os.readlink(root / str(pid) / "cwd")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if cwd == prefix or cwd.startswith(prefix + "/"):
            pids.append(pid)
    return pids
