"""What every engine starts: N agents of one image, each `soak agent --segment i/N ...`.

The spec is engine-neutral: the agent's argv (the segment given explicitly, or
as `$NAME/N` for an index the engine puts in the environment, as Kubernetes'
JOB_COMPLETION_INDEX), its environment (the whole run's load config as JSON,
with the run's seed fixed so every agent derives its own from the same one),
labels that find the engine's objects again, and the placement constraints.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import dns.rdatatype

from soak.errors import InputError
from soak.load.agent import LOAD_ENV
from soak.load.config import AgentsConfig, LoadConfig
from soak.load.coordination import TOKEN_ENV
from soak.load.queries import read_query_file

MAX_INLINE_BYTES = 4 * 1024 * 1024  # query files travel inline in the agents' environment
LABEL_RUN = "soak.run"
LABEL_ROLE = "soak.role"
ROLE = "load-agent"
SEGMENT_ENV = "SOAK_AGENT_SEGMENT"  # the explicit `i/N` of an agent (swarm, local)


@dataclass(frozen=True)
class AgentSpec:
    run_id: str
    agents: AgentsConfig
    server: str  # host:port, as the agents reach it
    duration_s: float
    load_json: str  # the whole run's load config (seed fixed, no `agents`)
    timeout_s: float = 2.0  # the load config's: an agent drains this long after its duration
    sink: str = "-"
    tags: dict[str, str] = field(default_factory=dict)
    allow_targets: tuple[str, ...] = ()
    coordinator: str | None = None  # http://HOST:PORT of the run's coordinator, in a soak run
    token: str | None = None  # the run's token for it (travels in the environment)
    # Another kind of agent on the same engines (the sampler agent): its role and name,
    # its own `soak` arguments and environment, and what it needs of the node.
    role: str = ROLE
    command: tuple[str, ...] = ()  # `soak` arguments instead of `agent --segment ...`
    extra_env: dict[str, str] = field(default_factory=dict)
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
        return object_name(self.run_id, index, self.role)

    def argv(self, segment: str) -> list[str]:
        """`soak` arguments of one agent; segment is `i/N` or `$NAME/N`."""
        if self.command:
            coordinator = ["--coordinator", self.coordinator] if self.coordinator else []
            return [*self.command, *coordinator]
        out = ["agent", "--segment", segment, "--server", self.server]
        out += ["--duration", f"{self.duration_s:g}", "--sink", self.sink]
        out += [a for k, v in sorted(self.tags.items()) for a in ("--tag", f"{k}={v}")]
        out += [a for cidr in self.allow_targets for a in ("--allow-target", cidr)]
        if self.coordinator is not None:
            out += ["--coordinator", self.coordinator]
        return out

    def env(self) -> dict[str, str]:
        token = {TOKEN_ENV: self.token} if self.token is not None else {}
        if self.command:
            return {**self.extra_env, **token}
        return {LOAD_ENV: self.load_json, **token}


def object_name(run_id: str, index: int | None = None, role: str = ROLE) -> str:
    """The engine object's name: soak-agent-RUN (-INDEX for one per agent) for load
    agents, soak-ROLE-RUN for another role's."""
    base = f"soak-agent-{run_id}" if role == ROLE else f"soak-{role}-{run_id}"
    return base if index is None else f"{base}-{index}"


def run_id_ok(run_id: str) -> str:
    if not run_id or not all(c.isalnum() or c == "-" for c in run_id) or len(run_id) > 40:
        raise InputError(f"run id {run_id!r}: letters, digits and '-', at most 40")
    return run_id.lower()


def agent_load_json(cfg: LoadConfig, base_dir: Path, *, inline_files: bool) -> str:
    """The config every agent is given: seed fixed, files inlined (or made absolute)."""
    data = cfg.model_dump(mode="json", exclude={"agents"})
    if data.get("seed") is None:
        data["seed"] = random.SystemRandom().randrange(1, 2**31)
    inlined = 0
    for qc, out in zip(cfg.mix, data["mix"], strict=True):
        if qc.file is None:
            continue
        path = qc.file if qc.file.is_absolute() else base_dir / qc.file
        if not inline_files:
            out["file"] = str(path)
            continue
        questions = read_query_file(path)
        lines = [
            f"{q.name} {dns.rdatatype.to_text(dns.rdatatype.RdataType(q.rdtype))}"
            for q in questions
        ]
        inlined += sum(len(line) + 1 for line in lines)
        if inlined > MAX_INLINE_BYTES:
            raise InputError(
                f"class {qc.name!r}: query files over {MAX_INLINE_BYTES >> 20} MiB do not travel "
                "to agents inline; use a smaller file or random names"
            )
        out["file"] = None
        out["queries"] = lines
    tls = data.get("tls") or {}
    if tls.get("ca_file") and inline_files:
        raise InputError("tls.ca_file is not shipped to agents on an engine yet (docs/scale.md)")
    return LoadConfig.model_validate(data).model_dump_json(exclude={"agents"})


def build_spec(
    cfg: LoadConfig,
    server: str,
    duration_s: float,
    run_id: str,
    *,
    base_dir: Path,
    tags: dict[str, str] | None = None,
    allow_targets: tuple[str, ...] = (),
    sink: str = "-",
    coordinator: str | None = None,
    token: str | None = None,
) -> AgentSpec:
    agents = cfg.agents or AgentsConfig()
    if duration_s <= 0:
        raise InputError(f"duration must be positive: {duration_s:g}")
    inline = agents.engine != "local"
    return AgentSpec(
        run_id=run_id_ok(run_id),
        agents=agents,
        server=server,
        duration_s=duration_s,
        load_json=agent_load_json(cfg, base_dir, inline_files=inline),
        timeout_s=cfg.timeout_s,
        sink=sink,
        tags=dict(tags or {}),
        allow_targets=allow_targets,
        coordinator=coordinator,
        token=token,
    )
