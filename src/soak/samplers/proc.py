"""The `proc` sampler: the target's process (or process tree) from /proc, one `process` point."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from soak import procfs
from soak.points import FieldValue, Point
from soak.procfs import ProcessSample
from soak.targets.base import Running


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
        proc_root: Path = procfs.PROC_ROOT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target, self.tree, self.proc_root, self.clock = target, tree, proc_root, clock
        self._prev: tuple[int, float, float] | None = None  # pid, cpu seconds, clock seconds

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        if running is None or running.pid is None:
            return []  # not running: the target sampler records it; no pid: nothing to read
        pid = running.pid
        pids = procfs.process_tree(pid, self.proc_root) if self.tree else [pid]
        samples = [procfs.read_process(pid, self.proc_root)]  # the main process must be there
        for child in pids[1:]:
            try:
                samples.append(procfs.read_process(child, self.proc_root))
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
