"""Which engine runs a config's agents, and whether it can (before anything starts)."""

from __future__ import annotations

from soak.agents.engine import AgentEngine, AgentOutput
from soak.agents.engine_config import EngineAgentConfig


def make_engine(agents: EngineAgentConfig, logs_dir: AgentOutput) -> AgentEngine:
    """`logs_dir`: where local agents write their output, named by the run (runs.layout)."""
    if agents.engine == "swarm":
        from soak.agents.swarm import SwarmEngine

        return SwarmEngine()
    if agents.engine == "kubernetes":
        from soak.agents.kube import KubernetesEngine

        return KubernetesEngine(namespace=agents.namespace)
    from soak.agents.local import LocalEngine

    return LocalEngine(logs_dir)


def check_engine(agents: EngineAgentConfig) -> None:
    """The engine answers and has what the agents need; InputError (one line) if not."""
    if agents.engine == "swarm":
        from soak.agents.swarm import SwarmEngine

        SwarmEngine.check(agents.image)
    elif agents.engine == "kubernetes":
        from soak.agents.kube import default_apis

        default_apis()
