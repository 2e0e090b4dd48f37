"""Containers and volumes that an interrupted run left behind, found by their labels.

Only what is known to be a dead run's goes: its `soak.owner` label names a soak process
of this host (pid and start time) that is gone. Anything else the sweep meets is left,
and named once: no owner label (made by hand, or by something that is not soak), an
owner label it cannot read, an owner on another host (a shared engine), or an owner
that lives (another run on this machine)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import Any

import docker.errors

from soak.docker_client import engine
from soak.errors import TargetStartError
from soak.labels import LABEL_OWNER, LABEL_RUN, parse_owner
from soak.procfs import pid_alive, start_ticks

log = logging.getLogger(__name__)


def owner_gone(owner: str | None) -> bool:
    """True only when the soak process that made a resource is known to be gone: a
    readable owner label of this host whose process (pid and start time) is not alive.
    No label, an unreadable one or another host's: never judged gone here."""
    return left_because(owner) is None


def left_because(owner: str | None) -> str | None:
    """Why a resource with this owner label is not a dead run's, or None when it is."""
    parsed = parse_owner(owner)
    if parsed is None:
        return f"its owner label {owner!r} cannot be read" if owner else "no owner label"
    host, pid, start = parsed
    if host != socket.gethostname():
        return f"its owner is on another host ({host})"
    if pid_alive(pid, start):
        return f"its owner lives (pid {pid})"
    return None


def made_here(owner: str | None) -> bool:
    """Made by this very process (a service's own runs): not worth naming."""
    parsed = parse_owner(owner)
    pid = os.getpid()
    return parsed is not None and parsed[1:] == (pid, start_ticks(pid))


def is_stale(labels: dict[str, str], run_id: str | None, keep_runs: tuple[str, ...]) -> bool:
    run = labels.get(LABEL_RUN)
    if run is None or run in keep_runs:
        return False
    if run_id is not None:
        return run == run_id
    return owner_gone(labels.get(LABEL_OWNER))


@dataclass
class Sweep:
    removed: int = 0  # containers and volumes
    left: list[str] = field(default_factory=list)  # one line each: what, and why left


def cleanup_labelled(run_id: str | None, keep_runs: tuple[str, ...] = ()) -> int:
    return sweep_labelled(run_id, keep_runs).removed


def sweep_labelled(run_id: str | None, keep_runs: tuple[str, ...] = ()) -> Sweep:
    """With `run_id`: remove everything of that run. Without: remove what dead runs left
    and name the rest (but the runs in `keep_runs` and this process's own)."""
    sweep = Sweep()
    try:
        client = engine()
    except TargetStartError:
        return sweep
    label_filter = f"{LABEL_RUN}={run_id}" if run_id is not None else LABEL_RUN
    # A container removed between the engine's list and its inspect (by another run's
    # clean-up) is one fewer to remove, not an error.
    containers = client.containers.list(
        all=True, filters={"label": label_filter}, ignore_removed=True
    )
    found = [(c, c.labels, "container") for c in containers]
    for volume in client.volumes.list(filters={"label": label_filter}):
        found.append((volume, volume.attrs.get("Labels") or {}, "volume"))
    for resource, labels, kind in found:
        if is_stale(labels, run_id, keep_runs):
            sweep.removed += _remove(resource, kind)
        elif run_id is None and labels.get(LABEL_RUN) not in keep_runs:
            owner = labels.get(LABEL_OWNER)
            if not made_here(owner):
                why = left_because(owner) or "its owner went meanwhile"
                run = labels.get(LABEL_RUN)
                sweep.left.append(f"left {kind} {resource.name} (run {run}): {why}")
    return sweep


def _remove(resource: Any, kind: str) -> int:
    with contextlib.suppress(docker.errors.NotFound):  # removed meanwhile: fine
        try:
            resource.remove(force=True)
        except docker.errors.APIError as exc:
            log.warning("cleanup: %s %s not removed: %s", kind, resource.name, exc)
            return 0
        log.info("cleanup: removed %s %s", kind, resource.name)
        return 1
    return 0
