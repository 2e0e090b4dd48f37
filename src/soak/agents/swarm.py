"""`swarm`: one Docker Swarm service per agent (a replicated job of one task).

One service per agent, its segment given explicitly (argv and SOAK_AGENT_SEGMENT):
`{{.Task.Slot}}` of one job's tasks is not a dependable index (FIELD-NOTES). Host
networking, restart condition none, the placement as constraints; the image is
used as it is on the node (no registry lookup). Services carry the labels
`soak.run`, `soak.role` and `soak.owner`; remove() takes away every service of
the run, also after a failed start.
"""

from __future__ import annotations

from typing import Any

import docker.errors
from docker.types import RestartPolicy, ServiceMode

from soak.agents.engine import AgentState, OneByOneEngine, State
from soak.agents.spec import (
    ROLE,
    SEGMENT_ENV,
    AgentSpec,
)
from soak.docker_client import engine
from soak.errors import InputError
from soak.labels import LABEL_OWNER, LABEL_ROLE, LABEL_RUN, owner_label

# Task states (docker/swarmkit api TaskState) -> an agent's state.
TASK_STATES: dict[str, State] = {
    "new": "pending",
    "allocated": "pending",
    "pending": "pending",
    "assigned": "pending",
    "accepted": "pending",
    "ready": "pending",
    "preparing": "pending",
    "starting": "pending",
    "running": "running",
    "complete": "complete",
    "failed": "failed",
    "rejected": "failed",
    "shutdown": "failed",
    "orphaned": "failed",
    "remove": "failed",
}


def service_kwargs(spec: AgentSpec, index: int) -> dict[str, Any]:
    """services.create's arguments for agent `index` (pure: tested without an engine)."""
    segment = f"{index}/{spec.count}"
    env = {**spec.env(), SEGMENT_ENV: segment}
    return {
        "image": spec.agents.image,
        "args": spec.argv(segment),  # the image's entrypoint is `soak`
        "name": spec.name(index),
        "labels": {**spec.labels, LABEL_OWNER: owner_label()},
        # The owner on the task's containers too: a sweep by another soak command judges
        # a container by its own labels, and one without an owner would look abandoned.
        "container_labels": {**spec.labels, LABEL_OWNER: owner_label()},
        "env": [f"{k}={v}" for k, v in env.items()],
        "networks": ["host"],
        "mode": ServiceMode("replicated-job", replicas=1, concurrency=1),
        "restart_policy": RestartPolicy(condition="none"),
        "constraints": list(spec.agents.placement),
        **({"mounts": list(spec.mounts)} if spec.mounts else {}),
        **({"user": spec.user} if spec.user else {}),
        **({"cap_add": list(spec.cap_add)} if spec.cap_add else {}),
    }


def task_state(tasks: list[dict[str, Any]]) -> tuple[State, str]:
    """The newest task's state and, when it failed, why."""
    if not tasks:
        return "pending", ""
    task = max(tasks, key=lambda t: (t.get("Version", {}).get("Index", 0), t.get("CreatedAt", "")))
    status = task.get("Status", {})
    state = TASK_STATES.get(str(status.get("State", "")), "pending")
    if state != "failed":
        return state, ""
    code = status.get("ContainerStatus", {}).get("ExitCode")
    why = status.get("Err") or status.get("Message") or status.get("State")
    return state, f"{why} (exit {code})" if code is not None else str(why)


class SwarmEngine(OneByOneEngine):
    name = "swarm"

    def __init__(self, client: Any = None) -> None:
        self._client = client
        self._services: list[Any] = []
        self._run_id: str | None = None
        self._role = ROLE  # a run's load agents and its sampler agent are removed apart

    def _prepare(self, spec: AgentSpec) -> None:
        client = self._client = self._client or engine()
        self.check(spec.agents.image, client)
        self._run_id, self._role = spec.run_id, spec.role

    def _start_agent(self, spec: AgentSpec, index: int) -> None:
        kwargs = service_kwargs(spec, index)
        image = kwargs.pop("image")
        self._services.append(self._client.services.create(image, **kwargs))

    def poll(self) -> list[AgentState]:
        out = []
        for i, service in enumerate(self._services):
            try:
                state, why = task_state(service.tasks())
            except docker.errors.NotFound:
                state, why = "failed", "service removed"
            out.append(AgentState(i, state, why))
        return out

    def logs(self, index: int) -> str:
        """The agent's stdout; empty when its service is gone (removed by someone else:
        the agent then reported nothing, which the merge says)."""
        try:
            chunks = self._services[index].logs(stdout=True, stderr=False, follow=False)
            return b"".join(chunks).decode("utf-8", errors="replace")
        except docker.errors.NotFound:
            return ""

    def remove(self) -> None:
        if self._client is None or self._run_id is None:
            return
        labels = [f"{LABEL_RUN}={self._run_id}", f"{LABEL_ROLE}={self._role}"]
        found = self._client.services.list(filters={"label": labels})
        for service in found:
            try:
                service.remove()
            except docker.errors.NotFound:
                continue
        self._services = []

    def sweep(self, run_id: str, role: str = ROLE) -> None:
        self._client = self._client or engine()
        self._run_id, self._role = run_id, role
        self.remove()

    @staticmethod
    def check(image: str, client: Any = None) -> None:
        """A swarm manager answers and the image is on this node; InputError if not."""
        client = client or engine()
        swarm = client.info().get("Swarm") or {}
        if swarm.get("LocalNodeState") != "active" or not swarm.get("ControlAvailable"):
            raise InputError(
                "swarm: this Docker engine is not a swarm manager (docker swarm init, or point "
                "DOCKER_HOST at a manager)"
            )
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            raise InputError(
                f"swarm: image {image} is not on this node (make agent-image)"
            ) from None
