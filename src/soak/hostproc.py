"""The machine's /proc files: its CPU seconds (stat), load averages, pressure (PSI),
memory (meminfo) and UDP counters (net/snmp), under an injectable root like
soak.procfs (whose one-process readers and parsers these sit beside). A parser raises
ValueError on text it cannot read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from soak.procfs import CLOCK_TICKS_PER_S, PROC_ROOT, parse_kv_kib


@dataclass(frozen=True)
class MachineCpu:
    """CPU seconds of the whole machine since boot, summed over its CPUs.

    Busy is everything but idle and iowait; steal (time a hypervisor gave another
    guest) counts as busy, and is also given apart."""

    busy_s: float
    total_s: float
    iowait_s: float = 0.0
    steal_s: float = 0.0


def parse_machine_stat(text: str) -> MachineCpu:
    """The `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal."""
    first = text.splitlines()[0].split() if text else []
    if len(first) < 9 or first[0] != "cpu":
        raise ValueError(f"no `cpu` line in /proc/stat: {text[:80]!r}")
    ticks = [int(v) for v in first[1:9]]
    idle = ticks[3] + ticks[4]
    return MachineCpu(
        busy_s=(sum(ticks) - idle) / CLOCK_TICKS_PER_S,
        total_s=sum(ticks) / CLOCK_TICKS_PER_S,
        iowait_s=ticks[4] / CLOCK_TICKS_PER_S,
        steal_s=ticks[7] / CLOCK_TICKS_PER_S,
    )


def parse_loadavg(text: str) -> tuple[float, float, float]:
    """/proc/loadavg: the 1-, 5- and 15-minute load averages."""
    parts = text.split()
    if len(parts) < 3:
        raise ValueError(f"not a /proc/loadavg: {text[:80]!r}")
    return float(parts[0]), float(parts[1]), float(parts[2])


def parse_pressure(text: str) -> dict[str, float]:
    """/proc/pressure/{cpu,memory,io}: `some_avg10`, `full_avg10`, ... (percent of time)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        for pair in pairs:
            key, _, value = pair.partition("=")
            if key.startswith("avg"):
                out[f"{kind}_{key}"] = float(value)
    if not out:
        raise ValueError(f"not a pressure file: {text[:80]!r}")
    return out


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo: MemTotal, MemAvailable, ... in bytes."""
    return parse_kv_kib(text)


def parse_snmp_udp(text: str) -> dict[str, int]:
    """/proc/net/snmp's `Udp:` counters (InDatagrams, RcvbufErrors, ...): the network
    namespace's UDP as the kernel counts it, every socket's together."""
    rows = [line.split()[1:] for line in text.splitlines() if line.startswith("Udp:")]
    if len(rows) != 2 or len(rows[0]) != len(rows[1]):
        raise ValueError("no Udp: counters")
    return dict(zip(rows[0], (int(v) for v in rows[1]), strict=True))


def read_snmp_udp(root: Path = PROC_ROOT) -> dict[str, int]:
    return parse_snmp_udp((root / "net" / "snmp").read_text())


def read_meminfo(root: Path = PROC_ROOT) -> dict[str, int]:
    return parse_meminfo((root / "meminfo").read_text())


def read_loadavg(root: Path = PROC_ROOT) -> tuple[float, float, float]:
    return parse_loadavg((root / "loadavg").read_text())


def read_pressure(resource: str, root: Path = PROC_ROOT) -> dict[str, float]:
    """PSI of `cpu`, `memory` or `io`; OSError where the kernel has none (before 4.20, or
    psi=0)."""
    return parse_pressure((root / "pressure" / resource).read_text())


def machine_cpu(root: Path = PROC_ROOT) -> MachineCpu | None:
    """The machine's CPU seconds so far (None when /proc/stat cannot be read)."""
    try:
        return parse_machine_stat((root / "stat").read_text())
    except (OSError, ValueError):
        return None
