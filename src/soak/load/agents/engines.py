"""Which engine runs a config's agents, and whether it can (before anything starts)."""

from __future__ import annotations

from soak.load.agents.engine import AgentEngine
from soak.load.config import EngineAgentConfig


def make_engine(agents: EngineAgentConfig) -> AgentEngine:
    if agents.engine == "swarm":
        from soak.load.agents.swarm import SwarmEngine

        return SwarmEngine()
    if agents.engine == "kubernetes":
        from soak.load.agents.kube import KubernetesEngine

        return KubernetesEngine(namespace=agents.namespace)
    from soak.load.agents.local import LocalEngine

    return LocalEngine()


def check_engine(agents: EngineAgentConfig) -> None:
    """The engine answers and has what the agents need; InputError (one line) if not."""
    if agents.engine == "swarm":
        from soak.load.agents.swarm import SwarmEngine

        SwarmEngine.check(agents.image)
    elif agents.engine == "kubernetes":
        from soak.load.agents.kube import default_apis

        default_apis()
