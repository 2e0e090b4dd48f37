"""A standalone load (`soak load`), as a plan: in process, or on agents.

In process (run_load_in_process): the workers (or dnsperf) started at the config's rate,
waited for to the end of the duration, stopped, their totals returned; the same one load
run as a bench's (soak.load.oneshot).

On agents (`load.agents`, run_load_agents): the agents run as a soak run's do, and their
totals merge. Its run id is the engine's (soak.runs.runid). The same coordinator as a
soak run's (soak.load.fleet.run_load.AgentsLoad): the agents register, start together at
one `start_at` and hold a lease, so a `soak load` killed leaves no agent sending past the
lease. An agent lost (its lease run out, its task failed) is a note and the others
finish. The engine's objects are removed at the end, on error and on a signal (the
agents are on the plan's teardown, soak.plans.engine); agents that have not all ended
by the deadline are told to stop.

LoadPlan is the registered plan `load`: either of the two, its summary printed, exit 1
when nothing was answered (or an agent reported nothing).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from soak.agents.engine import AgentEngine, AgentState
from soak.agents.engine_config import AgentsConfig
from soak.clock import s_to_ns
from soak.errors import CheckFailed, InputError, SoakError
from soak.load.fleet.merge import MergedResult, merge_agents
from soak.load.fleet.run_load import AGENT_FIELDS, AgentsLoad
from soak.load.generator import JOIN_GRACE_S
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from soak.load.stats import LoadResult
from soak.load.summary import format_summary
from soak.plans.engine import Teardown
from soak.points import Fault
from soak.runs.layout import load_agents_dir
from soak.runs.runid import new_run_id


@dataclass
class AgentsRun:
    merged: MergedResult
    states: list[AgentState]  # the engine's, at the end
    notes: list[str] = field(default_factory=list)
    # Each agent's sent, completed and lost summed over the seconds it reported while it
    # ran (its windows), to hold against its own totals.
    windows: dict[int, dict[str, int]] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            **self.merged.to_json_dict(),
            "states": [
                {"agent": s.index, "state": s.state, "message": s.message} for s in self.states
            ],
            "notes": self.notes,
        }


# What the agents' stop is called on a teardown; a SIGTERM says it removed them.
AGENTS = "the load agents"
AGENTS_NOTE = "the agents were removed"


class LoadPlan:
    """`soak load` (not a replay): in process, or on `load.agents`."""

    stopped_note = ""  # on agents: AGENTS_NOTE (their removal is its teardown)

    def __init__(
        self,
        cfg: LoadConfig,
        server: tuple[str, int],
        *,
        base_dir: Path,
        allow_targets: tuple[str, ...],
        as_json: bool,
    ) -> None:
        self.cfg, self.server, self.base_dir = cfg, server, base_dir
        self.allow_targets, self.as_json = allow_targets, as_json
        self.where = f"{server[0]}:{server[1]}"
        self.error: SoakError | None = None
        # What a SIGTERM's one line says the teardown removed (soak.plans.engine).
        self.stopped_note = AGENTS_NOTE if cfg.agents is not None else ""

    def check(self) -> None:
        if self.cfg.duration_s is None or self.cfg.duration_s <= 0:
            raise InputError("--duration must be positive (e.g. 30 or 30s)")

    def run(self, started: Teardown) -> None:
        if self.cfg.agents is not None:
            self._agents(started)
            return
        result = run_load_in_process(
            self.cfg, self.server, base_dir=self.base_dir, allow_targets=self.allow_targets
        )
        if self.as_json:
            click.echo(json.dumps(result.to_json_dict(), indent=2))
        else:
            click.echo(format_summary(result, self.where), nl=False)
        if result.sent > 0 and result.completed == 0:
            cause = " (connection refused: nothing listens there)" if result.refused else ""
            self.error = CheckFailed(
                f"no answer from {self.where}: {result.lost} of {result.sent} lost{cause}"
            )

    def _agents(self, started: Teardown) -> None:
        """`load.agents`: the rate split among agents on an engine, their results merged."""
        cfg = self.cfg
        assert cfg.duration_s is not None  # check()
        run = run_load_agents(
            cfg, self.server, cfg.duration_s, base_dir=self.base_dir,
            allow_targets=self.allow_targets, started=started,
        )  # fmt: skip
        merged = run.merged
        if self.as_json:
            click.echo(json.dumps(run.to_json_dict(), indent=2))
        else:
            for line in agents_lines(run):
                click.echo(line)
        if merged.sent > 0 and merged.completed == 0:
            self.error = CheckFailed(
                f"no answer from {self.where}: {merged.lost} of {merged.sent} lost"
            )
        elif len(merged.agents) < (cfg.agents.count if cfg.agents else 1):
            self.error = CheckFailed("; ".join(run.notes) or "an agent reported nothing")

    def outcome(self) -> SoakError | None:
        return self.error


def agents_lines(run: AgentsRun) -> list[str]:
    """An agents load's summary: the merged totals, each agent's, the notes."""
    merged = run.merged
    lat = merged.latency_ms
    lines = [
        f"{len(merged.agents)} agents: sent {merged.sent}, completed {merged.completed}, "
        f"lost {merged.lost}, p50 {lat['p50']} ms, p99 {lat['p99']} ms (merged histograms)"
    ]
    for a in merged.to_json_dict()["per_agent"]:
        lines.append(
            f"  agent {a['agent']}: sent {a['sent']} completed {a['completed']} "
            f"lost {a['lost']} p99 {a['latency_ms']['p99']} ms"
        )
    return lines + [f"  note: {note}" for note in run.notes]


def run_load_in_process(
    cfg: LoadConfig, server: tuple[str, int], *, base_dir: Path, allow_targets: tuple[str, ...]
) -> LoadResult:
    """One load run in this process at the config's rate for its duration; its totals."""
    if cfg.duration_s is None:
        raise InputError("a standalone load needs a duration (--duration)")
    return run_load(
        cfg, server, cfg.duration_s, cfg.rate_qps, base_dir=base_dir, allow_targets=allow_targets
    )


def run_load_agents(
    cfg: LoadConfig,
    server: tuple[str, int],
    duration_s: float,
    *,
    base_dir: Path,
    allow_targets: tuple[str, ...] = (),
    run_id: str | None = None,
    engine: AgentEngine | None = None,
    poll_s: float = 0.5,
    started: Teardown | None = None,
) -> AgentsRun:
    """Start the agents, release them together, wait until each has ended or is lost,
    merge their totals; the engine's objects always removed (by `started`, the plan's
    teardown, on a signal or an error: here when there is no plan)."""
    agents = cfg.agents or AgentsConfig()
    origin_ns = [0]
    run_id = run_id or new_run_id("load")
    load = AgentsLoad(
        cfg,
        server,
        base_dir=base_dir,
        run_id=run_id,
        run_started_ns=lambda: origin_ns[0],
        run_duration_s=duration_s,
        allow_targets=allow_targets,
        logs_dir=load_agents_dir(run_id),
        engine=engine,  # else the config's, its local agents writing in logs_dir
    )
    load.keeps_length = True  # no run's timeline: a pushed start_at moves the end too
    teardown = started if started is not None else Teardown()
    teardown.push(AGENTS, load.stop)
    try:
        load.prepare(duration_s)  # raises with nothing left running
        origin_ns[0] = time.time_ns() + s_to_ns(load.start_lead_s)
        load.start(cfg.rate_qps, duration_s, origin_ns[0])
        limit_s = load.start_lead_s + duration_s + cfg.timeout_s + JOIN_GRACE_S
        lost = _watch(load, limit_s + 2 * agents.lease_s, poll_s)
        states = _ended_states(load.engine, agents.lease_s + JOIN_GRACE_S, poll_s)
    except BaseException:  # a signal too: nothing of the run's engine objects left
        if started is None:
            teardown.unwind()
        raise
    teardown.stop(AGENTS)  # their drain counts in the totals read below
    ended = load.agent_totals()
    notes = [event.message for event in lost]
    lost_agents = {int(event.value) for event in lost}  # an agent_lost event's value
    notes += [
        f"agent {i} of {agents.count} reported no totals"
        for i in range(agents.count)
        if i not in ended and i not in lost_agents
    ]
    merged = merge_agents([ended[i] for i in sorted(ended)])
    notes += merged.accounting_errors
    windows = {row["agent"]: {k: row[k] for k in AGENT_FIELDS} for row in load.totals()["agents"]}
    return AgentsRun(merged, states, notes, windows)


def _watch(load: AgentsLoad, limit_s: float, poll_s: float) -> list[Fault]:
    """Until every agent has ended or is lost, or the limit: the agents lost."""
    end_s = time.monotonic() + limit_s
    lost: list[Fault] = []
    while not load.finished() and time.monotonic() < end_s:
        time.sleep(poll_s)
        load.take_window()  # hands the complete seconds out: the per-agent sums
        lost += load.check(end_s - time.monotonic())
    return lost


def _ended_states(engine: AgentEngine, limit_s: float, poll_s: float) -> list[AgentState]:
    """The engine's states once every task has ended, or as they are at the limit: an
    agent's totals reach the coordinator a moment before its process exits."""
    end_s = time.monotonic() + limit_s
    states = engine.poll()
    while not all(s.done for s in states) and time.monotonic() < end_s:
        time.sleep(poll_s)
        states = engine.poll()
    return states
