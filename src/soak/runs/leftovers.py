"""What dead runs left behind, found and removed by the next soak command.

A run whose soak process was SIGKILLed can leave: processes (a daemonized target, a
service's run that no service will resume), containers and volumes, and the swarm
services of its load or sampler agents. Processes are found by their mark
(targets/tree.py), engine objects by their labels (`soak.run`, `soak.owner`); a thing
is left over when its owner (pid and start time) is gone and it is not a run about to be
resumed. A container or volume without an owner label, or whose owner lives, is left
and named, one line each (soak.targets.cleanup).

`soak start --foreground` and `soak serve` sweep when they start (RunManager.start), a
service before each submitted run; `soak upgrade` calls `sweep_leftovers()` and prints
its `lines()`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.labels import LABEL_OWNER, LABEL_ROLE, LABEL_RUN
from soak.targets.cleanup import is_stale, left_because, made_here, sweep_labelled
from soak.targets.tree import kill_all, leftovers

log = logging.getLogger(__name__)


@dataclass
class Swept:
    # (target, run) -> the pids killed
    processes: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    engine_objects: int = 0  # containers and volumes
    services: list[str] = field(default_factory=list)  # swarm services' run/role
    problems: list[str] = field(default_factory=list)  # what could not be removed
    left: list[str] = field(default_factory=list)  # labelled, but not a dead run's: named

    def lines(self) -> list[str]:
        """What was removed in one line, then one line for each thing left."""
        line = self.line()
        return ([line] if line is not None else []) + self.left

    def line(self) -> str | None:
        """One line for the user, or None when nothing was left."""
        parts = []
        if self.processes:
            count = sum(len(pids) for pids in self.processes.values())
            whose = ", ".join(
                f"{target} of run {run} (pid {', '.join(map(str, pids))})"
                for (target, run), pids in sorted(self.processes.items())
            )
            parts.append(f"{count} process(es): {whose}")
        if self.engine_objects:
            parts.append(f"{self.engine_objects} container(s)/volume(s)")
        if self.services:
            parts.append(f"the swarm services of {', '.join(self.services)}")
        text = "removed what dead runs left: " + "; ".join(parts) if parts else ""
        if self.problems:
            text += ("; " if text else "") + "not removed: " + "; ".join(self.problems)
        return text or None


def sweep_leftovers(data_dir: Path | None = None, keep_runs: Sequence[str] = ()) -> Swept:
    """Remove what dead runs left; `keep_runs`: runs of `data_dir` a service resumes.

    Never raises for what it cannot reach (no Docker engine, not a swarm manager): those
    parts are skipped; what it found but could not remove is in `problems`.
    """
    swept = Swept()
    _sweep_processes(swept, data_dir, keep_runs)
    try:
        engine = sweep_labelled(None, tuple(keep_runs))
        swept.engine_objects, swept.left = engine.removed, engine.left
    except Exception as exc:  # the command goes on; what was left is said
        swept.problems.append(f"containers: {exc}")
    _sweep_services(swept, keep_runs)
    return swept


def _sweep_processes(swept: Swept, data_dir: Path | None, keep_runs: Sequence[str]) -> None:
    found = leftovers(data_dir, keep_runs)
    if not found:
        return
    still = set(kill_all(found))
    for pid, mark in sorted(found.items()):
        if pid in still:
            swept.problems.append(f"{mark.target} pid {pid} (run {mark.run_id})")
        else:
            swept.processes.setdefault((mark.target, mark.run_id), []).append(pid)


def stale_agent_runs(
    labels: Iterable[dict[str, str]], keep_runs: Sequence[str]
) -> list[tuple[str, str]]:
    """(run, role) of the swarm services whose owner is gone, from their labels."""
    found = set()
    for each in labels:
        role = each.get(LABEL_ROLE)
        if role and is_stale(each, None, tuple(keep_runs)):
            found.add((each[LABEL_RUN], role))
    return sorted(found)


def left_agent_runs(labels: Iterable[dict[str, str]], keep_runs: Sequence[str]) -> list[str]:
    """One line per (run, role) of swarm services that are not a dead run's and not this
    process's own or a run about to be resumed: what the sweep leaves, and why."""
    found = {}
    for each in labels:
        run, role, owner = each.get(LABEL_RUN), each.get(LABEL_ROLE), each.get(LABEL_OWNER)
        if not role or run is None or run in keep_runs or made_here(owner):
            continue
        why = left_because(owner)
        if why is not None:
            found[(run, role)] = f"left the swarm services of {run} ({role}): {why}"
    return [found[key] for key in sorted(found)]


def _sweep_services(swept: Swept, keep_runs: Sequence[str]) -> None:
    import docker.errors

    from soak.agents.swarm import SwarmEngine
    from soak.docker_client import engine
    from soak.errors import TargetStartError

    try:
        client = engine()
        services: list[Any] = client.services.list(filters={"label": LABEL_RUN})
    except (TargetStartError, docker.errors.DockerException):
        return  # no engine, or not a swarm manager: no services to look at
    labels = [s.attrs.get("Spec", {}).get("Labels") or {} for s in services]
    swept.left += left_agent_runs(labels, keep_runs)
    for run_id, role in stale_agent_runs(labels, keep_runs):
        try:
            SwarmEngine(client).sweep(run_id, role)
        except Exception as exc:  # told, not raised: the command goes on
            swept.problems.append(f"swarm services of {run_id}: {exc}")
            continue
        swept.services.append(f"{run_id} ({role})")
