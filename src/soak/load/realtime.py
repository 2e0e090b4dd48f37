"""A sending process's CPU scheduling: the real-time class where it may have it.

On a shared machine a process that must send at set instants waits for a CPU behind
everything else runnable (the server under test, the run's samplers, whatever else the
machine does), and its send offsets grow with the machine's load, not with its own work.
A process in SCHED_FIFO runs as soon as it wakes. Measured with bench/replay_in_soak.py
(10,000 q/s, 1-s ticks, load average 7): the windows whose send offset p99 was within
2 ms went from none to most (docs/benchmarks.md).

It is safe for a process that sleeps between its sends (the replay waits in
epoll_pwait2 until its next query is due): the lowest real-time priority puts it ahead of
every normal task and behind the kernel's own threads, and the kernel's real-time
throttling (sched_rt_runtime_us) leaves the rest of the machine its share even if it
never slept.
"""

from __future__ import annotations

import errno
import os

FIFO_PRIORITY = 1  # the lowest of SCHED_FIFO's priorities


def take_realtime() -> str | None:
    """This process (and the threads it starts after) in SCHED_FIFO: None when granted,
    else why not, in one line."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    except OSError as exc:
        if exc.errno == errno.EPERM:
            return "SCHED_FIFO refused: not root and no CAP_SYS_NICE (or RLIMIT_RTPRIO is 0)"
        return f"SCHED_FIFO refused: {exc.strerror}"
    return None


def scheduling_of(pid: int) -> str:
    """The scheduling class a process runs in, as the kernel says ("SCHED_FIFO 1")."""
    policy = os.sched_getscheduler(pid)
    names = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}
    name = names.get(policy, str(policy))
    return f"{name} {os.sched_getparam(pid).sched_priority}" if policy != os.SCHED_OTHER else name
