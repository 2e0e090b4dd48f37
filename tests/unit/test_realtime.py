"""A sending process's scheduling class (soak.load.realtime): granted as root, refused
with one line where the process may not have it."""

from __future__ import annotations

import os

import pytest

from soak.load.realtime import scheduling_of, take_realtime

NOBODY = 65534


def in_a_child(as_nobody: bool) -> tuple[str | None, str]:
    """take_realtime in a forked child (this process's own class left alone), and the
    kernel's word for the child's class after it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only os calls and _exit
        try:
            if as_nobody:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            refused = take_realtime()
            os.write(write, f"{refused or ''}\n{scheduling_of(0)}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        refused, got = f.read().split("\n")
    os.waitpid(pid, 0)
    return refused or None, got


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root (CI runs as root)")
def test_root_takes_sched_fifo_at_the_lowest_priority() -> None:
    assert in_a_child(as_nobody=False) == (None, "SCHED_FIFO 1")


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to nobody needs root")
def test_a_process_without_the_right_is_refused_in_one_line_and_stays_normal() -> None:
    refused, got = in_a_child(as_nobody=True)
    assert refused is not None and "SCHED_FIFO refused: not root" in refused
    assert "\n" not in refused
    assert got == "SCHED_OTHER"
