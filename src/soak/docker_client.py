"""A client for the local Docker engine (DOCKER_HOST honoured): targets, agents on a
swarm and the sweeps of leftovers all use this one."""

from __future__ import annotations

from typing import Any

import docker.errors
from docker.client import DockerClient

from soak.errors import TargetStartError

ENGINE_TIMEOUT_S = 60


def engine() -> Any:
    """A client for the local engine, or TargetStartError."""
    try:
        client = DockerClient.from_env(timeout=ENGINE_TIMEOUT_S)
        client.ping()
    except docker.errors.DockerException as exc:
        raise TargetStartError(f"no Docker engine answers: {exc}") from exc
    return client
