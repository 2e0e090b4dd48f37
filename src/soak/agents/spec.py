"""What every engine starts: N agents of one image, each `soak ARGS`.

The spec is engine-neutral: the agent's `soak` arguments (its segment, where it
has one, given explicitly or as `$NAME/N` for an index the engine puts in the
environment, as Kubernetes' JOB_COMPLETION_INDEX), its environment, labels that
find the engine's objects again, and the placement constraints. What the
arguments and environment say is the payload's (soak.load.fleet.launch for load
agents, soak.samplers.remote_samplers for the sampler agent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from soak.agents.engine_config import AgentsConfig
from soak.agents.protocol import TOKEN_ENV
from soak.labels import LABEL_ROLE, LABEL_RUN

ROLE = "load-agent"
SEGMENT_ENV = "SOAK_AGENT_SEGMENT"  # the explicit `i/N` of an agent (swarm, local)
SEGMENT = "<segment>"  # in `command`: the agent's segment, `i/N` or `$NAME/N`
DRAIN_S = 7.0  # a load's default timeout and its workers' join grace


@dataclass(frozen=True)
class AgentSpec:
    run_id: str
    agents: AgentsConfig
    duration_s: float
    command: tuple[str, ...]  # the agent's `soak` arguments (SEGMENT: its segment)
    extra_env: dict[str, str] = field(default_factory=dict)  # besides the token
    drain_s: float = DRAIN_S  # an agent may run this long past its duration
    coordinator: str | None = None  # http://HOST:PORT of the run's coordinator, in a soak run
    token: str | None = None  # the run's token for it (travels in the environment)
    # The kind of agent (load agents, the sampler agent), and what it needs of the node.
    role: str = ROLE
    mounts: tuple[str, ...] = ()  # swarm: SOURCE:TARGET:MODE bind mounts
    user: str | None = None  # swarm: the container's user (default: the image's)
    cap_add: tuple[str, ...] = ()  # swarm: capabilities beyond the default set
    host_pid: bool = False  # kubernetes: the node's PID namespace

    @property
    def count(self) -> int:
        return self.agents.count

    @property
    def labels(self) -> dict[str, str]:
        return {LABEL_RUN: self.run_id, LABEL_ROLE: self.role}

    def name(self, index: int | None = None) -> str:
        return object_name(engine_id(self.run_id), index, self.role)

    def argv(self, segment: str) -> list[str]:
        """`soak` arguments of one agent; segment is `i/N` or `$NAME/N`."""
        out = [segment if arg == SEGMENT else arg for arg in self.command]
        if self.coordinator is not None:
            out += ["--coordinator", self.coordinator]
        return out

    def env(self) -> dict[str, str]:
        token = {TOKEN_ENV: self.token} if self.token is not None else {}
        return {**self.extra_env, **token}


def object_name(engine_run_id: str, index: int | None = None, role: str = ROLE) -> str:
    """The engine object's name: soak-agent-ID (-INDEX for one per agent) for load
    agents, soak-ROLE-ID for another role's; ID is the run's `engine_id`."""
    base = f"soak-agent-{engine_run_id}" if role == ROLE else f"soak-{role}-{engine_run_id}"
    return base if index is None else f"{base}-{index}"


# The longest id in an engine object's name: `soak-sampler-ID-NN` stays within the 63
# characters of a swarm service's or a Kubernetes Job's name (and its pods' label).
ENGINE_ID_MAX_CHARS = 40
# A run id ends in its start second and a random token (`20261205-224520-ab12`,
# soak.runs.runid): kept whole, it keeps the shortened id as unique as the run id.
_TAIL_CHARS = 20


def engine_id(run_id: str) -> str:
    """The id an engine's objects are named by: the run id itself when it fits (lower
    case, letters, digits and '-'), else its head cut short before its whole tail
    (`unbound-authoritati-20261205-224520-ab12`). The one place a run id is shortened;
    the objects' labels carry the whole run id, so each stays traceable to its run."""
    clean = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-") or "run"
    if len(clean) <= ENGINE_ID_MAX_CHARS:
        return clean
    head = clean[: ENGINE_ID_MAX_CHARS - _TAIL_CHARS - 1].rstrip("-")
    return f"{head}-{clean[-_TAIL_CHARS:].lstrip('-')}"
