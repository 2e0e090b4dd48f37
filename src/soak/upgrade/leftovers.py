"""What earlier upgrade runs left because their soak process was killed outright
(SIGKILL, a lost runner): found and removed when the next run starts.

A run's containers and volumes carry `soak.run` and `soak.owner` (and
`soak.upgrade=RUN_ID`, docker_data.py), its process versions soak.targets' mark: the
sweep of soak.runs.leftovers finds them as it finds every dead run's. Its run
directory has an owner file (host:pid:start, and `keep` for `--keep`); a host command of a
step works in it (in the plan's data directory there) and is found by that. Only what
belongs to a soak process that is gone from this host goes, and nothing of a `--keep`
run's directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

import click

from soak.procfs import pids_working_in
from soak.runs.layout import upgrade_owner_files


def remove_leftovers(base: Path) -> None:
    """What dead runs left (soak.runs.leftovers: marked processes, labelled containers
    and volumes, agents' services), then run directories under `base` by their owner
    file, with the processes still working in them (a host command of a step)."""
    from soak.runs.leftovers import sweep_leftovers

    for line in sweep_leftovers().lines():
        click.echo(f"cleanup   {line}")
    removed = remove_stale_dirs(base)
    if removed:
        click.echo(f"cleanup   removed {removed} run director(ies) or process(es) of killed runs")


def remove_stale_dirs(base: Path) -> int:
    from soak.targets.cleanup import owner_gone

    removed = 0
    for owner_file in upgrade_owner_files(base):
        try:
            owner, _, kept = owner_file.read_text().strip().partition(" ")
        except OSError:
            continue
        if kept != "keep" and owner_gone(owner):
            removed += kill_working_in(owner_file.parent)
            shutil.rmtree(owner_file.parent, ignore_errors=True)
            removed += 1
    return removed


def kill_working_in(directory: Path) -> int:
    """SIGKILL to every process working in `directory` (a process version leads its own
    process group: the group goes, forked workers too); how many were found."""
    pids = pids_working_in(directory)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    return len(pids)
