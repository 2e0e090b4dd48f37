"""What earlier upgrade runs left because their soak process was killed outright
(SIGKILL, a lost runner): found and removed when the next run starts.

A run's containers and volumes carry `soak.upgrade=RUN_ID` and `soak.owner`
(docker_data.py); its run directory has an owner file (host:pid, and `keep` for
`--keep`); a process version, and a host command it ran, work in that directory (their
working directory is the plan's data directory in it). Only what belongs to a soak
process that is gone from this host goes, and nothing of a `--keep` run's directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path

import click

from soak.procfs import pids_working_in
from soak.upgrade.config import UpgradePlan

OWNER_FILE = "soak-upgrade.owner"  # host:pid of the run's soak process, in its run dir
RUN_DIR_PREFIX = "soak-upgrade-"  # run directories under --work-dir (default: the temp dir)


def remove_leftovers(plans: list[UpgradePlan], base: Path) -> None:
    """Containers and volumes by their labels, run directories under `base` by their
    owner file, with the processes still working in them."""
    removed = remove_stale_dirs(base)
    if any(plan.uses_docker for plan in plans):
        from soak.upgrade import docker_data

        removed += docker_data.remove_stale_runs()
    if removed:
        click.echo(f"cleanup   removed {removed} leftover(s) of earlier runs that were killed")


def remove_stale_dirs(base: Path) -> int:
    from soak.targets.cleanup import owner_gone

    removed = 0
    for owner_file in base.glob(f"{RUN_DIR_PREFIX}*/{OWNER_FILE}"):
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
