"""The `proc` sampler: the target's process (or process tree) from /proc, one `process` point."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from soak.points import FieldValue, Point
from soak.samplers import procfs
from soak.targets.base import Running

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass
class ProcessSample:
    """One process's numbers at one time (what a tree sums)."""

    status: procfs.StatusMemory
    pss_bytes: int | None
    fds: int
    fd_limit: int | None
    cpu_user_s: float
    cpu_system_s: float
    read_bytes: int | None
    write_bytes: int | None


def read_process(proc_root: Path, pid: int) -> ProcessSample:
    """Reads one process; raises OSError if it is gone (or never was)."""
    base = proc_root / str(pid)
    status = procfs.parse_status((base / "status").read_text())
    stat = procfs.parse_stat((base / "stat").read_text())
    fds = len(os.listdir(base / "fd"))
    fd_limit = procfs.parse_fd_limit((base / "limits").read_text())
    try:  # smaps_rollup (Linux 4.14+) and io need ptrace access: root or the same user
        pss: int | None = procfs.parse_smaps_rollup((base / "smaps_rollup").read_text())["Pss"]
    except (OSError, KeyError):
        pss = None
    try:
        io = procfs.parse_io((base / "io").read_text())
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


def process_tree(proc_root: Path, pid: int) -> list[int]:
    """pid and its descendants, from every /proc/<n>/stat's ppid."""
    ppids: dict[int, int] = {}
    for entry in os.scandir(proc_root):
        if entry.name.isdigit():
            try:
                ppids[int(entry.name)] = procfs.parse_stat(
                    Path(entry.path, "stat").read_text()
                ).ppid
            except (OSError, ValueError, IndexError):
                continue  # a process that exited while the tree was read is not in it
    return procfs.children_of(ppids, pid)


def _optional_sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def to_fields(samples: list[ProcessSample]) -> dict[str, FieldValue]:
    """The `process` fields; a tree sums its members (the fd limit is the main process's)."""
    main = samples[0]
    fields: dict[str, FieldValue] = {
        "rss_bytes": sum(s.status.rss_bytes for s in samples),
        "rss_anon_bytes": sum(s.status.rss_anon_bytes for s in samples),
        "rss_file_bytes": sum(s.status.rss_file_bytes for s in samples),
        "rss_shmem_bytes": sum(s.status.rss_shmem_bytes for s in samples),
        "swap_bytes": sum(s.status.swap_bytes for s in samples),
        "fds": sum(s.fds for s in samples),
        "threads": sum(s.status.threads for s in samples),
        "cpu_user_s": sum(s.cpu_user_s for s in samples),
        "cpu_system_s": sum(s.cpu_system_s for s in samples),
        "ctx_switches": sum(s.status.ctx_switches for s in samples),
    }
    optional = {
        "pss_bytes": _optional_sum([s.pss_bytes for s in samples]),
        "fd_limit": main.fd_limit,
        "read_bytes": _optional_sum([s.read_bytes for s in samples]),
        "write_bytes": _optional_sum([s.write_bytes for s in samples]),
    }
    fields.update({k: v for k, v in optional.items() if v is not None})
    if len(samples) > 1:
        fields["processes"] = len(samples)
    return fields


class ProcSampler:
    """`process` fields of the target's main process (the container's host PID for docker)."""

    name = "proc"

    def __init__(
        self,
        target: Callable[[], Running | None],
        *,
        tree: bool = False,
        proc_root: Path = Path("/proc"),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target, self.tree, self.proc_root, self.clock = target, tree, proc_root, clock
        self._prev: tuple[int, float, float] | None = None  # pid, cpu seconds, clock seconds

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        if running is None or running.pid is None:
            return []  # not running: the target sampler records it; no pid: nothing to read
        pid = running.pid
        pids = process_tree(self.proc_root, pid) if self.tree else [pid]
        samples = [read_process(self.proc_root, pid)]  # the main process must be there
        for child in pids[1:]:
            try:
                samples.append(read_process(self.proc_root, child))
            except OSError:
                continue  # a child that exited between listing and reading
        fields = to_fields(samples)
        now_s = self.clock()
        cpu_s = float(fields["cpu_user_s"]) + float(fields["cpu_system_s"])
        if self._prev is not None and self._prev[0] == pid:  # a restarted target starts over
            cores = procfs.cpu_cores(self._prev[1], cpu_s, self._prev[2], now_s)
            if cores is not None:
                fields["cpu_cores"] = cores
        self._prev = (pid, cpu_s, now_s)
        return [Point("process", fields, tick_time_ns)]
