"""CPU over a measured interval: the target's process tree, the generator, the machine.

A run takes a CpuSnapshot before and after its steady interval; `CpuSnapshot.until`
gives the busy cores of each in between. The numbers come from soak.procfs (the
target's tree, the builtin engine's processes, /proc/stat) and, for dnsperf,
from RUSAGE_CHILDREN once it has been reaped.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from soak import hostproc, procfs

GeneratorCpu = Callable[[], float | None]  # the generator's CPU seconds so far


def _no_generator() -> float | None:
    return None


def processes_cpu(pids: Callable[[], Sequence[int]]) -> GeneratorCpu:
    """The generator is this process and the given ones (the builtin engine's workers)."""
    return lambda: procfs.pids_cpu_s([os.getpid(), *pids()])


def children_cpu_s() -> float:
    """CPU seconds of every child this process has waited for (dnsperf once reaped)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cores(cpu0: float | None, cpu1: float | None, elapsed_s: float) -> float | None:
    if cpu0 is None or cpu1 is None:
        return None
    return procfs.cpu_cores(cpu0, cpu1, 0.0, elapsed_s)


@dataclass(frozen=True)
class CpuUse:
    """Busy cores over one interval (None where a side was not measured)."""

    elapsed_s: float
    target_cores: float | None
    generator_cores: float | None
    machine_busy_cores: float | None  # every process's, ours and others'


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds so far of the target's tree, the generator and the machine."""

    at_s: float  # monotonic
    target_s: float | None
    generator_s: float | None
    machine: hostproc.MachineCpu | None

    @classmethod
    def take(
        cls,
        target_pid: int | None,
        generator: GeneratorCpu = _no_generator,
        root: Path = procfs.PROC_ROOT,
    ) -> CpuSnapshot:
        return cls(
            at_s=time.monotonic(),
            target_s=procfs.tree_cpu_s(target_pid, root),
            generator_s=generator(),
            machine=hostproc.machine_cpu(root),
        )

    def until(self, later: CpuSnapshot) -> CpuUse:
        elapsed_s = later.at_s - self.at_s
        return CpuUse(
            elapsed_s=elapsed_s,
            target_cores=cores(self.target_s, later.target_s, elapsed_s),
            generator_cores=cores(self.generator_s, later.generator_s, elapsed_s),
            machine_busy_cores=busy_cores(self.machine, later.machine),
        )


def busy_cores(m0: hostproc.MachineCpu | None, m1: hostproc.MachineCpu | None) -> float | None:
    """Busy cores of the machine between two readings."""
    if m0 is None or m1 is None or m1.total_s <= m0.total_s:
        return None
    ncpu = os.cpu_count() or 1
    return (m1.busy_s - m0.busy_s) / (m1.total_s - m0.total_s) * ncpu


def target_capacity_cores(
    pid: int | None, configured: float | None, quota: float | None = None
) -> float | None:
    """How many cores the target could use: configured, else min(its threads, its CPUs,
    its CPU quota (docker `cpus`))."""
    if configured is not None:
        return configured
    threads = procfs.tree_threads(pid)
    if pid is None or threads is None:
        return quota
    try:
        cpus = len(os.sched_getaffinity(pid))
    except OSError:
        cpus = os.cpu_count() or 1
    return float(min(threads, cpus, quota if quota is not None else cpus))
