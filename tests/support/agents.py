"""Load-agent tests' parts: scenario files for a server already running on loopback, and a
one-node Docker Swarm left as it was found."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.servers import external_unbound

AGENT_IMAGE = "soak/agent:latest"  # what `make agent-image` builds


def hit_miss_mix() -> list[dict[str, Any]]:
    """Three cache hits to one miss (a random name under example.test)."""
    return [
        {"name": "hit", "weight": 3, "queries": ["www.example.test A"]},
        {"name": "miss", "random": {"zone": "example.test"}},
    ]


def agents_scenario(
    tmp_path: Path,
    name: str,
    port: int,
    load: dict[str, Any],
    *,
    duration_s: int | None = None,
    samplers: dict[str, Any] | None = None,
) -> Path:
    """s.yaml in tmp_path: an external unbound on port, one steady phase of `duration_s`
    (else as long as the load), the samplers' section if given."""
    scenario: dict[str, Any] = {
        "name": name,
        "target": external_unbound(port),
        "phases": [{"name": "steady", "duration_s": f"{duration_s or load['duration_s']}s"}],
        "load": load,
    }
    if samplers is not None:
        scenario["samplers"] = samplers
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@contextmanager
def one_node_swarm(client: Any) -> Iterator[None]:
    """This engine as a swarm manager for the block: a machine not in a swarm is made a
    one-node swarm and left again afterwards, with the docker_gwbridge network that
    `swarm leave` leaves behind; a machine already in one is left as it was."""
    state = (client.info().get("Swarm") or {}).get("LocalNodeState")
    made = state == "inactive"
    if made:
        subprocess.run(
            ["docker", "swarm", "init", "--advertise-addr", "127.0.0.1"],
            check=True,
            capture_output=True,
        )
    elif state != "active":
        pytest.skip(f"this engine's swarm state is {state!r}")
    try:
        yield
    finally:
        if made:
            subprocess.run(["docker", "swarm", "leave", "--force"], check=False)
            subprocess.run(
                ["docker", "network", "rm", "docker_gwbridge"], check=False, capture_output=True
            )


def swarm_client(image: str) -> Any:
    """A docker client with `image` on this node, or the test skipped saying what to run."""
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker engine answers ({exc}); `make docker-ready` starts one")
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        pytest.skip(f"image {image} missing; run `make agent-image`")
    return client
