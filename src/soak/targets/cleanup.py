"""Containers and volumes that an interrupted run left behind, found by their labels."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from typing import Any

import docker.errors

from soak.docker_client import engine
from soak.errors import TargetStartError
from soak.labels import LABEL_OWNER, LABEL_RUN

log = logging.getLogger(__name__)


def owner_gone(owner: str | None) -> bool:
    """True when the soak process that made a resource is not alive on this host.

    A resource made on another host (a shared engine) is never judged gone here.
    """
    if not owner or ":" not in owner:
        return True
    host, _, pid_text = owner.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def is_stale(labels: dict[str, str], run_id: str | None, keep_runs: tuple[str, ...]) -> bool:
    run = labels.get(LABEL_RUN)
    if run is None or run in keep_runs:
        return False
    if run_id is not None:
        return run == run_id
    return owner_gone(labels.get(LABEL_OWNER))


def cleanup_labelled(run_id: str | None, keep_runs: tuple[str, ...] = ()) -> int:
    try:
        client = engine()
    except TargetStartError:
        return 0
    label_filter = f"{LABEL_RUN}={run_id}" if run_id is not None else LABEL_RUN
    removed = 0
    # A container removed between the engine's list and its inspect (by another run's
    # clean-up) is one fewer to remove, not an error.
    containers = client.containers.list(
        all=True, filters={"label": label_filter}, ignore_removed=True
    )
    for container in containers:
        if is_stale(container.labels, run_id, keep_runs):
            removed += _remove(container, "container")
    for volume in client.volumes.list(filters={"label": label_filter}):
        labels = volume.attrs.get("Labels") or {}
        if is_stale(labels, run_id, keep_runs):
            removed += _remove(volume, "volume")
    return removed


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
