"""The `host` sampler: how busy the machine is, beside every latency figure.

A slow answer is the server's fault or the machine's: a p99 window failed at 116 ms
while other work held the load average at 5-10. Every tick, one `host` point:

- `cpu_busy_ratio`, `cpu_iowait_ratio`, `cpu_steal_ratio`: shares of all CPUs' time
  since the previous tick (/proc/stat; busy is all but idle and iowait, steal included);
- `load1`: the 1-minute load average, and `cpus`, the CPUs it compares with;
- `cpu_pressure_pct`, `memory_pressure_pct`: PSI `some avg10`, the share of the last
  10 s in which some task waited for a CPU or for memory (/proc/pressure; absent where
  the kernel has none);
- `generator_cpu_cores`: the load generator's own CPU (this process and the load
  workers) per wall second since the previous tick.

The ratios and cores need two readings: the first tick has only the rest. A file
that cannot be read leaves its fields out (the point says what it saw) and is said
once in a `host_unreadable` event; the sampler does not fail the tick for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from soak import hostproc, procfs
from soak.points import FieldValue, Point, event_point


class HostSampler:
    name = "host"

    def __init__(
        self,
        *,
        generator_pids: Callable[[], Sequence[int]] = list,
        proc_root: Path = procfs.PROC_ROOT,
        clock: Callable[[], float] = time.monotonic,
        cpus: int | None = None,
    ) -> None:
        self.generator_pids, self.proc_root, self.clock = generator_pids, proc_root, clock
        self.cpus = cpus or os.cpu_count() or 1
        self._machine: hostproc.MachineCpu | None = None
        self._generator: tuple[float, float] | None = None  # (CPU s, monotonic s)
        self._told: set[str] = set()  # files already reported unreadable

    def sample(self, tick_time_ns: int) -> list[Point]:
        fields: dict[str, FieldValue] = {"cpus": self.cpus}
        fields.update(self._cpu_shares())
        missing: dict[str, str] = {}  # file -> why it could not be read
        try:
            fields["load1"] = hostproc.read_loadavg(self.proc_root)[0]
        except (OSError, ValueError) as e:
            missing["loadavg"] = str(e)
        for resource, field in (("cpu", "cpu_pressure_pct"), ("memory", "memory_pressure_pct")):
            try:
                fields[field] = hostproc.read_pressure(resource, self.proc_root)["some_avg10"]
            except (OSError, ValueError, KeyError) as e:
                missing[f"pressure/{resource}"] = repr(e)
        generator = self._generator_cores()
        if generator is not None:
            fields["generator_cpu_cores"] = generator
        points = [Point("host", fields, tick_time_ns)]
        # Said once per file, not every tick: a kernel without PSI stays without it.
        for file, why in missing.items():
            if file not in self._told:
                self._told.add(file)
                points.append(event_point("host_unreadable", f"{file}: {why}", tick_time_ns))
        return points

    def _cpu_shares(self) -> dict[str, FieldValue]:
        now = hostproc.machine_cpu(self.proc_root)
        before, self._machine = self._machine, now
        if now is None or before is None or now.total_s <= before.total_s:
            return {}
        total = now.total_s - before.total_s
        return {
            "cpu_busy_ratio": max(0.0, now.busy_s - before.busy_s) / total,
            "cpu_iowait_ratio": max(0.0, now.iowait_s - before.iowait_s) / total,
            "cpu_steal_ratio": max(0.0, now.steal_s - before.steal_s) / total,
        }

    def _generator_cores(self) -> float | None:
        pids = [os.getpid(), *self.generator_pids()]
        now = (procfs.pids_cpu_s(pids, self.proc_root), self.clock())
        before, self._generator = self._generator, now
        if before is None:
            return None
        return procfs.cpu_cores(before[0], now[0], before[1], now[1])
