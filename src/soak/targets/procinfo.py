"""What /proc says about a PID: alive, its identity, its fd limit, its children."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def parse_stat_start_ticks(stat_text: str) -> int | None:
    """Field 22 (starttime) of /proc/PID/stat; the comm field may hold spaces and ')'."""
    _, sep, rest = stat_text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 20:
        return None
    return int(fields[19])  # fields[0] is field 3 (state)


def parse_stat_ppid(stat_text: str) -> int | None:
    _, sep, rest = stat_text.rpartition(")")
    fields = rest.split()
    return int(fields[1]) if sep and len(fields) > 1 else None


def parse_fd_limit(limits_text: str) -> int | None:
    """The soft "Max open files" limit from /proc/PID/limits (None if unlimited or absent)."""
    for line in limits_text.splitlines():
        if line.startswith("Max open files"):
            soft = line[len("Max open files") :].split()[0]
            return int(soft) if soft.isdigit() else None
    return None


def start_ticks(pid: int, proc: Path = PROC) -> int | None:
    try:
        return parse_stat_start_ticks((proc / str(pid) / "stat").read_text())
    except (OSError, ValueError):
        return None


def read_fd_limit(pid: int, proc: Path = PROC) -> int | None:
    try:
        return parse_fd_limit((proc / str(pid) / "limits").read_text())
    except (OSError, ValueError):
        return None


def pid_alive(pid: int, expected_start_ticks: int | None = None, proc: Path = PROC) -> bool:
    """The process exists, is not a zombie, and (if given) is the same one as before."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[:1]
    if state == ["Z"] or state == ["X"]:
        return False
    return expected_start_ticks is None or parse_stat_start_ticks(stat) == expected_start_ticks


def children(pid: int, proc: Path = PROC) -> list[int]:
    """Direct children of `pid` (from the task's children file, else by scanning /proc)."""
    try:
        text = (proc / str(pid) / "task" / str(pid) / "children").read_text()
        return [int(p) for p in text.split()]
    except (OSError, ValueError):
        pass
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if parse_stat_ppid((entry / "stat").read_text()) == pid:
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue  # exited while scanning
    return sorted(found)


def group_alive(pgid: int) -> bool:
    """True while any process of the process group exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
