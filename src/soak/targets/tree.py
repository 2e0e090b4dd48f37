"""A process target's whole process tree, daemonized children included (docs/targets.md).

Every process a `process` target starts carries one environment variable, MARK_ENV,
naming the run, the target and the soak process that owns it; children inherit it,
also those that fork into the background, leave the process group and take a session
of their own (dnsmasq without --no-daemon, unbound without -d): killing the group does
not reach them, a scan of /proc for the mark does. The same scan finds, at the next
soak command, what a SIGKILLed soak left running.

Why a mark and not a cgroup per target: a cgroup needs root and a writable hierarchy
(cgroup v1 here, a delegated v2 subtree elsewhere) and soak runs as an ordinary user;
a subreaper (PR_SET_CHILD_SUBREAPER) dies with its soak process, so the next command
could not find what it left. The mark is read the same way everywhere, by the user who
started the processes. A program that clears its whole environment escapes it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from soak.procfs import PROC_ROOT, environ_values, pid_alive, start_ticks

MARK_ENV = "SOAK_PROCESS"
KILL_WAIT_S = 5.0  # after SIGKILL the kernel needs only a moment
PR_SET_PDEATHSIG = 1

# The option that keeps a server in the foreground, by the binary's name.
FOREGROUND_OPTIONS = {
    "dnsmasq": "--no-daemon",
    "unbound": "-d, or do-daemonize: no",
    "named": "-g or -f",
    "pdns_server": "--daemon=no",
    "pdns_recursor": "--daemon=no",
    "nsd": "-d",
    "knotd": "without -d",
    "kresd": "without --daemon",
    "dnsdist": "--supervised",
}


@dataclass(frozen=True)
class Mark:
    """Whose a process is. `data_dir` is set for a service's run, which outlives its
    service (a restarted service resumes it); a foreground run's die with their owner."""

    run_id: str
    target: str
    owner_pid: int
    owner_start_ticks: int | None
    data_dir: str | None = None

    def text(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> Mark | None:
        try:
            data = json.loads(text)
            return cls(**data) if isinstance(data, dict) else None
        except (ValueError, TypeError):
            return None

    @property
    def owner_alive(self) -> bool:
        return pid_alive(self.owner_pid, self.owner_start_ticks)


def own_mark(run_id: str, target: str, data_dir: Path | None) -> Mark:
    pid = os.getpid()
    return Mark(run_id, target, pid, start_ticks(pid), str(data_dir) if data_dir else None)


def marked(root: Path = PROC_ROOT) -> dict[int, Mark]:
    """pid -> mark of every process a soak target started (that this user may see)."""
    out = {}
    for pid, text in environ_values(MARK_ENV, root).items():
        mark = Mark.parse(text)
        if mark is not None and pid != os.getpid():
            out[pid] = mark
    return out


def pids_of(run_id: str, target: str, root: Path = PROC_ROOT) -> list[int]:
    """The live processes of one target of one run, wherever they went."""
    found = marked(root).items()
    return sorted(pid for pid, m in found if m.run_id == run_id and m.target == target)


def is_leftover(mark: Mark, data_dir: Path | None, keep_runs: Iterable[str]) -> bool:
    """A process nobody drives any more. Its owner is gone, and either it was a foreground
    run's (those die with their owner) or a service's run of `data_dir` that the service
    will not resume (not in `keep_runs`). A service run of another data directory is that
    service's to resume or stop."""
    if mark.owner_alive:
        return False
    if mark.data_dir is None:
        return True
    same = data_dir is not None and os.path.realpath(mark.data_dir) == os.path.realpath(data_dir)
    return same and mark.run_id not in set(keep_runs)


def leftovers(
    data_dir: Path | None, keep_runs: Iterable[str] = (), root: Path = PROC_ROOT
) -> dict[int, Mark]:
    keep = tuple(keep_runs)
    return {pid: m for pid, m in marked(root).items() if is_leftover(m, data_dir, keep)}


def kill_all(pids: Iterable[int], wait_s: float = KILL_WAIT_S) -> list[int]:
    """SIGKILL each process and wait until it is gone; returns those still there."""
    pending = {pid: start_ticks(pid) for pid in pids}
    for pid in pending:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    deadline_s = time.monotonic() + wait_s
    alive = list(pending)
    while alive and time.monotonic() < deadline_s:
        alive = [pid for pid in alive if pid_alive(pid, pending[pid])]
        if alive:
            time.sleep(0.02)
    return alive


def foreground_hint(binary: str) -> str:
    return FOREGROUND_OPTIONS.get(Path(binary).name, "its option to stay in the foreground")


def forked_message(binary: str, pids: list[int]) -> str:
    """What a target that daemonized did, and what to change."""
    name = Path(binary).name
    return (
        f"{name} forked into the background (pid {', '.join(map(str, pids))}): "
        f"run it in the foreground ({foreground_hint(binary)})"
    )


# ---------------------------------------------------------------- dying with the owner

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_prctl = _LIBC.prctl  # looked up here: the child after fork only calls it


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when the thread that started it ends (the
    soak process, SIGKILLed or not). If the parent died before prctl took effect, the
    child ends at once instead of running unowned."""

    def preexec() -> None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec
