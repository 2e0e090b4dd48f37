"""What an engine needs to run agents: the engine, the image, the placement, where the
run's coordinator listens, the lease (a scenario's `load.agents` and `samplers.agent`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from soak.units import StrictModel

PLACEMENT = re.compile(r"^\s*[A-Za-z0-9_.\-/]+\s*(==|!=)\s*\S+\s*$")


class EngineAgentConfig(StrictModel):
    """Agents on an engine that talk to the run's coordinator: load agents, and the
    sampler agent of a target on another node (docs/scale.md).

    `placement` holds swarm-style constraints (`node.hostname==h`,
    `node.labels.KEY==VALUE`, `!=` too); Kubernetes takes the `==` ones as a
    nodeSelector. `namespace` is Kubernetes' only.
    """

    engine: Literal["local", "swarm", "kubernetes"] = "local"
    image: str = "soak/agent:latest"
    placement: list[str] = Field(default_factory=list)
    namespace: str = "default"
    # In a soak run the agents register with the run's coordinator, which listens here;
    # `advertise` is the host the agents reach it at (default: listen_host).
    listen_host: str = "127.0.0.1"
    listen_port: int = Field(default=0, ge=0, le=65535)  # 0: any free port
    advertise: str | None = None
    lease_s: float = Field(default=5.0, ge=1.0, le=300.0)  # an agent alone stops this soon
    start_timeout_s: float = Field(default=120.0, gt=0)  # until every agent has registered

    @model_validator(mode="after")
    def _placement(self) -> EngineAgentConfig:
        for rule in self.placement:
            if not PLACEMENT.match(rule):
                raise ValueError(f"placement {rule!r}: expected NAME==VALUE or NAME!=VALUE")
        return self


class AgentsConfig(EngineAgentConfig):
    """Load agents: the rate split among `count` agents on an engine."""

    count: int = Field(default=1, ge=1, le=256)
