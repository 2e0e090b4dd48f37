"""Run a load config's agents on an engine, wait for them, merge what they report.

The engine's objects are removed at the end, on error and on interrupt (the
`finally` below); a run whose agents do not all finish by the deadline ends
them. Waiting is on the agents' states, polled every `poll_s`.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.errors import SoakError
from soak.load.agent import point_from_json
from soak.load.agents.engine import AgentEngine, AgentState
from soak.load.agents.spec import AgentSpec, build_spec
from soak.load.config import AgentsConfig, LoadConfig
from soak.load.merge import AgentTotals, MergedResult, merge_agents
from soak.load.runner import JOIN_GRACE_S
from soak.points import Point


class AgentsStopped(SoakError):
    """The coordinator was told to stop (SIGTERM): the agents were removed."""

    exit_code = 128 + signal.SIGTERM


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """SIGTERM raises AgentsStopped (once: a second one is ignored while cleaning up)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise AgentsStopped("stopped by SIGTERM; the agents were removed")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@dataclass
class AgentsRun:
    merged: MergedResult
    states: list[AgentState]
    points: list[Point] = field(default_factory=list)  # every agent's per-second points
    notes: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            **self.merged.to_json_dict(),
            "states": [
                {"agent": s.index, "state": s.state, "message": s.message} for s in self.states
            ],
            "notes": self.notes,
        }


def make_engine(agents: AgentsConfig) -> AgentEngine:
    if agents.engine == "swarm":
        from soak.load.agents.swarm import SwarmEngine

        return SwarmEngine()
    if agents.engine == "kubernetes":
        from soak.load.agents.kube import KubernetesEngine

        return KubernetesEngine(namespace=agents.namespace)
    from soak.load.agents.local import LocalEngine

    return LocalEngine()


def check_engine(agents: AgentsConfig) -> None:
    """The engine answers and has what the agents need; InputError (one line) if not."""
    if agents.engine == "swarm":
        from soak.load.agents.swarm import SwarmEngine

        SwarmEngine.check(agents.image)
    elif agents.engine == "kubernetes":
        from soak.load.agents.kube import default_apis

        default_apis()


def parse_logs(text: str) -> tuple[list[Point], AgentTotals | None, list[str]]:
    """An agent's JSON lines: its points, its totals (last line) and sink errors."""
    points: list[Point] = []
    totals: AgentTotals | None = None
    errors: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            errors.append(f"unreadable line: {line[:80]}")
            continue
        kind = data.get("kind")
        if kind == "point":
            points.append(point_from_json(data))
        elif kind == "totals":
            totals = AgentTotals.from_json_dict(data)
        elif kind == "sink_error":
            errors.append(str(data.get("message")))
    return points, totals, errors


def wait_done(
    engine: AgentEngine,
    deadline_s: float,
    poll_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[AgentState]:
    end = clock() + deadline_s
    while True:
        states = engine.poll()
        if states and all(s.done for s in states):
            return states
        if clock() > end:
            waiting = [str(s.index) for s in states if not s.done]
            raise SoakError(f"agents {', '.join(waiting)} did not finish within {deadline_s:g} s")
        sleep(poll_s)


def run_agents(
    cfg: LoadConfig,
    spec: AgentSpec,
    engine: AgentEngine,
    *,
    start_timeout_s: float = 120.0,
    poll_s: float = 0.5,
) -> AgentsRun:
    """Start spec's agents, wait for all of them, merge their totals; always remove."""
    with stop_on_sigterm():
        return _run(cfg, spec, engine, start_timeout_s, poll_s)


def _run(
    cfg: LoadConfig, spec: AgentSpec, engine: AgentEngine, start_timeout_s: float, poll_s: float
) -> AgentsRun:
    try:
        engine.start(spec)  # raises with nothing started (bad engine, no image)
        deadline_s = spec.duration_s + cfg.timeout_s + JOIN_GRACE_S + start_timeout_s
        states = wait_done(engine, deadline_s, poll_s)
        all_points: list[Point] = []
        totals: list[AgentTotals] = []
        notes: list[str] = []
        for state in states:
            points, agent_totals, errors = parse_logs(engine.logs(state.index))
            all_points += points
            notes += [f"agent {state.index}: {e}" for e in errors]
            if state.state == "failed":
                notes.append(f"agent {state.index} of {spec.count} failed: {state.message}")
            if agent_totals is None:
                notes.append(f"agent {state.index} of {spec.count} reported no totals")
            else:
                totals.append(agent_totals)
    finally:
        engine.remove()
    merged = merge_agents(totals)
    notes += merged.accounting_errors
    return AgentsRun(merged, states, all_points, notes)


def run_load_agents(
    cfg: LoadConfig,
    server: str,
    duration_s: float,
    *,
    base_dir: Path,
    allow_targets: tuple[str, ...] = (),
    run_id: str | None = None,
    engine: AgentEngine | None = None,
) -> AgentsRun:
    """`soak load` with `load.agents`: the spec, the engine, the run."""
    agents = cfg.agents or AgentsConfig()
    run_id = run_id or f"load-{secrets.token_hex(4)}"
    spec = build_spec(
        cfg, server, duration_s, run_id, base_dir=base_dir, allow_targets=allow_targets
    )
    return run_agents(cfg, spec, engine or make_engine(agents))
