"""A soak run's load from agents on an engine, behind the face SupervisedLoad has.

prepare() opens the run's coordinator (soak.agents.coordinator), removes
what an earlier coordinator of the same run left (a SIGKILLed service), starts the
agents and waits until every one has registered: before the run's clock starts,
since that takes seconds. start() releases them at the run's origin.
Every tick take_points() gives the seconds all agents have reported, each merged
by grid second (counts summed, histograms added, the asked rate as the coordinator
asked it) and stored at the end of its own second, with each agent's part of it. check() turns a
lease run out or a failed task into an `agent_lost` event; the others go on, so
the run's achieved rate shows what was lost. stop() tells the agents to stop,
waits for their last windows and removes the engine's objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from soak.agents.coordinator import AgentsOnEngine, Coordinator
from soak.agents.engine import AgentEngine, AgentOutput
from soak.agents.engine_config import AgentsConfig
from soak.agents.engines import make_engine
from soak.agents.spec import ROLE, AgentSpec
from soak.clock import ns_to_s, s_to_ns
from soak.histogram import merged
from soak.load.fleet.launch import build_spec
from soak.load.fleet.lease import (
    START_MARGIN_S,
    Fleet,
    LateStart,
    Second,
    Slot,
    Taken,
    fleet_calls,
)
from soak.load.fleet.merge import AgentTotals, latency_ms
from soak.load.generator import JOIN_GRACE_S
from soak.load.load_config import LoadConfig
from soak.load.supervised import LOAD_MARGIN_S, TOTAL_FIELDS, engine_counters, load_points
from soak.points import Fault, Point

POLL_ENGINE_S = 5.0  # the engine's task states are asked this often (API calls per agent)
WAIT_S = 0.2
AGENT_FIELDS = ("sent", "completed", "lost")


def class_shares(cfg: LoadConfig) -> dict[str, float]:
    total = sum(c.weight for c in cfg.mix)
    return {c.name: c.weight / total for c in cfg.mix}


def elapsed_text(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"+{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class AgentsLoad:
    start_lead_s = START_MARGIN_S  # start() wants the run's origin at least this far ahead

    def __init__(
        self,
        cfg: LoadConfig,
        server: tuple[str, int],
        *,
        base_dir: Path,
        run_id: str,
        run_started_ns: Callable[[], int],
        run_duration_s: float | None = None,
        allow_targets: Sequence[str] = (),
        logs_dir: AgentOutput,
        engine: AgentEngine | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`logs_dir`: local agents' output, named by the run (runs.layout.agents_dir)."""
        self.cfg = cfg
        self.agents: AgentsConfig = cfg.agents or AgentsConfig()
        self.server = server
        self.base_dir, self.run_id, self.run_started_ns = base_dir, run_id, run_started_ns
        self.run_duration_s = run_duration_s  # from the origin: the agents stop there
        self.allow_targets = tuple(allow_targets)
        self.engine = engine or make_engine(self.agents, logs_dir)
        self._hosted = AgentsOnEngine(self.engine)
        self.clock = clock
        self.rate_qps = 0.0
        self.restarts = 0  # the face SupervisedLoad has; agents are not restarted
        self._fleet: Fleet | None = None
        self._coordinator: Coordinator | None = None
        self._per_agent: dict[int, dict[str, dict[str, float]]] = {}
        self._totals = dict.fromkeys(TOTAL_FIELDS, 0.0)
        self._agent_counts: dict[int, dict[str, float]] = {}  # the seconds handed out
        self._engine_polled_s = 0.0
        self._tail: list[Second] = []  # the seconds stop() took
        self._end_ns: int | None = None  # the run's end, once started (wall clock)
        # `soak load` (no run's timeline to keep): a start_at pushed past the origin moves
        # the end with it, so that the load sends its whole length.
        self.keeps_length = False

    # ------------------------------------------------------------ lifecycle

    @property
    def planned_rate_qps(self) -> float | None:
        return None  # paced by the phases' rate, divided among the agents

    def prepare(self, max_duration_s: float) -> None:
        """The coordinator open, the agents started and all registered (they wait for
        start()); raises with nothing left running."""
        fleet = Fleet(
            self.agents.count,
            class_shares(self.cfg),
            self.agents.lease_s,
            hold_s=self.cfg.timeout_s,
        )
        self._fleet = fleet

        def spec(url: str, token: str) -> AgentSpec:
            return build_spec(
                self.cfg,
                f"{self.server[0]}:{self.server[1]}",
                max_duration_s + LOAD_MARGIN_S,
                self.run_id,
                base_dir=self.base_dir,
                allow_targets=self.allow_targets,
                coordinator=url,
                token=token,
            )

        def missing() -> list[str]:
            return [str(s.index) for s in fleet.slots if not s.registered]

        self._coordinator = self._hosted.open(
            fleet_calls(fleet), self.agents, self.run_id, ROLE, spec, missing,
            what="load agent", clock=self.clock,
        )  # fmt: skip

    def start(
        self,
        rate_qps: float,
        remaining_s: float,
        begin_at_ns: int | None = None,
        end_ns: int | None = None,
    ) -> None:
        """The agents' load from the run's origin (`begin_at_ns`, or the run's own; on a
        resumed run, a moment from now); they stop by the run's duration (`end_ns` is
        the run's end as the local load takes it, not passed on yet)."""
        if self._fleet is None:
            self.prepare(remaining_s)
        fleet, coordinator = self._fleet, self._coordinator
        assert fleet is not None and coordinator is not None
        self.rate_qps = rate_qps
        with coordinator.lock:
            fleet.set_rate(rate_qps)
            origin_ns = begin_at_ns if begin_at_ns is not None else self.run_started_ns()
            end_ns = None
            if self.run_duration_s is not None:
                end_ns = origin_ns + s_to_ns(self.run_duration_s)
            # From the run's origin, the agents' seconds are counted (a resumed run's
            # seconds while the service was away are counted by the run: from start_at).
            # A load of its own keeps its length when start_at is pushed past the origin.
            fleet.release(
                origin_ns, end_ns, counted_from_ns=begin_at_ns, keep_length=self.keeps_length
            )
            self._end_ns = fleet.end_ns

    def set_rate(self, rate_qps: float, at_ns: int | None = None) -> None:
        """The new rate (agents take it at once: `at_ns` is not passed on yet)."""
        self.rate_qps = rate_qps
        if self._fleet is not None and self._coordinator is not None:
            with self._coordinator.lock:
                self._fleet.set_rate(rate_qps)

    def stop(self) -> None:
        """Tell the agents to stop; their last windows (the drain) count in the totals."""
        fleet, coordinator = self._fleet, self._coordinator
        if fleet is None or coordinator is None:
            return
        stop_ns = time.time_ns()
        with coordinator.lock:
            fleet.stopping = True
        end = self.clock() + self.cfg.timeout_s + JOIN_GRACE_S + 2 * self.agents.lease_s
        while self.clock() < end:
            with coordinator.lock:
                if not any(s.active for s in fleet.slots):
                    break
            time.sleep(WAIT_S)
        # The agents' last words land until the engine has removed them and the
        # coordinator is closed (on a busy machine, after the wait): only then is what
        # the fleet holds all there is, and what an agent never reported is filled in.
        self._close()
        limit_ns = stop_ns if fleet.end_ns is None else min(fleet.end_ns, stop_ns)
        self._tail = fleet.take_final(limit_ns)

    def _close(self) -> None:
        self._coordinator = None
        self._hosted.close()

    # ------------------------------------------------------------ windows and faults

    def take_window(self) -> dict[str, dict[str, float]]:
        """The seconds every agent has reported since the last call, merged into one
        window (with take_agent_windows(), each agent's part of them)."""
        if self._fleet is None or self._coordinator is None:
            return {}
        with self._coordinator.lock:
            taken = self._fleet.take()
        self._count(taken)
        self._per_agent = taken.per_agent
        return taken.merged

    def _take_merged(self, end_ns: int | None) -> list[Taken]:
        """The seconds every agent has reported since the last call, one merged window
        each (none after `end_ns`); after stop(), once, the last ones."""
        fleet = self._fleet
        if fleet is None:
            return []
        if self._coordinator is None:  # stopped: the seconds stop() took, once
            seconds, self._tail = self._tail, []
        else:
            with self._coordinator.lock:
                seconds = fleet.take_seconds()
        out = fleet.merged(seconds, end_ns)
        for taken in out:
            self._count(taken)
        return out

    def _count(self, taken: Taken) -> None:
        """Seconds handed out: into the run's totals and each agent's."""
        for agent, fields in taken.per_agent.items():
            counts = self._agent_counts.setdefault(agent, dict.fromkeys(AGENT_FIELDS, 0.0))
            for name in AGENT_FIELDS:
                counts[name] += fields.get("all", {}).get(name, 0.0)
        merged = taken.merged.get("all")
        if merged is not None:
            for name in TOTAL_FIELDS:
                self._totals[name] += merged.get(name, 0.0)

    def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]:
        """Each agent's part of the seconds the last take_window() handed out."""
        out, self._per_agent = self._per_agent, {}
        return out

    def take_points(self, time_ns: int, end_ns: int | None = None) -> list[Point]:
        """The run's ledger: each second every agent has reported since the last call,
        merged (counts and histograms added), as `load` points at the end of its own
        second of the run's grid (a last second cut by the run's end, at the end), with
        each agent's part of it tagged `agent`."""
        ends = [e for e in (self._end_ns, end_ns) if e is not None]
        points: list[Point] = []
        for taken in self._take_merged(min(ends) if ends else None):
            points += load_points(
                taken.merged, taken.per_agent, taken.stamp_ns, taken.hists, taken.agent_hists
            )
        return points

    def tail_points(self, time_ns: int) -> list[Point]:
        """After stop(): the seconds the agents reported after the last tick (they close
        as the queries in flight are answered or time out), none stamped after `time_ns`
        (the run's end: a run stopped early ends there)."""
        return self.take_points(time_ns, end_ns=time_ns)

    def check(self, remaining_s: float) -> list[Fault]:
        """Agents lost since the last check: a lease run out, or a task the engine ended;
        agents that started late or ended short (told once stopped, too)."""
        fleet, coordinator = self._fleet, self._coordinator
        if fleet is not None and coordinator is None:  # stopped: what take_final found
            late, fleet.late_starts = fleet.late_starts, []
            return [self._late_event(one) for one in late]
        if fleet is None or coordinator is None:
            return []
        lost: list[Slot] = []
        if self.clock() - self._engine_polled_s >= POLL_ENGINE_S:
            self._engine_polled_s = self.clock()
            states = self.engine.poll()
            with coordinator.lock:
                for s in states:
                    if s.state == "failed" and fleet.mark_lost(s.index, s.message or "failed"):
                        lost.append(fleet.slots[s.index])
        with coordinator.lock:
            lost += fleet.expire()
            late, fleet.late_starts = fleet.late_starts, []
        return [self._late_event(one) for one in late] + [self._lost_event(s) for s in lost]

    @property
    def counted_from_ns(self) -> int | None:
        """The first second the agents count (their start_at), once released."""
        return self._fleet.start_at_ns if self._fleet is not None else None

    def _late_event(self, late: LateStart) -> Fault:
        assert self._fleet is not None
        if late.short:
            message = (
                f"agent {late.agent} of {self._fleet.count} reported no window for the last"
                f" {late.seconds} s of the run: its {late.due:,.0f} queries due then counted"
                " as skipped"
            )
            return Fault("agent_short", message, late.due)
        message = (
            f"agent {late.agent} of {self._fleet.count} started {late.seconds} s late:"
            f" its {late.due:,.0f} queries due before then counted as skipped"
        )
        return Fault("agent_late", message, late.due)

    def _lost_event(self, slot: Slot) -> Fault:
        assert self._fleet is not None
        at_ns = slot.lost_at_ns or time.time_ns()
        since = elapsed_text(ns_to_s(at_ns - self.run_started_ns()))
        count = self._fleet.count
        message = f"agent {slot.index} of {count} lost at {since}: {slot.lost_why}"
        return Fault("agent_lost", message, float(slot.index))

    def finished(self) -> bool:
        """Every agent has ended (its totals in) or is lost."""
        fleet, coordinator = self._fleet, self._coordinator
        if fleet is None or coordinator is None:
            return True
        with coordinator.lock:
            return all(s.done or s.lost_why is not None for s in fleet.slots)

    # ------------------------------------------------------------ totals

    def agent_totals(self) -> dict[int, AgentTotals]:
        """The totals of the agents that ended well, by index."""
        slots = self._fleet.slots if self._fleet is not None else []
        return {s.index: s.totals for s in slots if s.totals is not None}

    def totals(self, *, stddev: bool = True) -> dict[str, Any]:
        """The run's totals from the seconds handed out, and each agent's own (the seconds
        stop() took count too: `soak load` stores no points, so nobody took them)."""
        if self._tail:
            self._take_merged(self._end_ns)
        out: dict[str, Any] = {k: int(v) for k, v in self._totals.items()}
        out["load_restarts"] = 0
        agents = []
        lost = 0
        if self._fleet is not None:
            for slot in self._fleet.slots:
                lost += slot.lost_why is not None
                counts = self._agent_counts.get(slot.index, dict.fromkeys(AGENT_FIELDS, 0.0))
                row: dict[str, Any] = {"agent": slot.index, "lost_why": slot.lost_why}
                row.update({k: int(v) for k, v in counts.items()})
                if slot.totals is not None:  # it ended well: its whole-run latency too
                    row["latency_ms"] = latency_ms(slot.totals.hist)
                agents.append(row)
        out["latency_ms"] = self._latency_ms()
        out["agents"] = agents
        out["agents_lost"] = lost
        out.update(self._engine_counters())
        return out

    def _engine_counters(self) -> dict[str, Any]:
        """The agents' socket counts summed (result.json's engine_counters, held against
        every window the agents sent); else why there are none: an agent whose totals did
        not reach the coordinator took its counts with it."""
        slots = self._fleet.slots if self._fleet is not None else []
        parts = [s.totals.engine_counters if s.totals is not None else None for s in slots]
        summed = engine_counters(parts)
        if summed is not None:
            return {"engine_counters": {**summed, "from_ns": 0}}
        if not slots:
            return {}
        missing = sum(1 for p in parts if p is None)
        return {
            "engine_counters_lost": f"{missing} of {len(slots)} load agents' socket counts did"
            " not reach the coordinator (an agent lost, or ended without its totals)"
        }

    def _latency_ms(self) -> dict[str, float | None]:
        slots = self._fleet.slots if self._fleet is not None else []
        return latency_ms(merged(s.totals.hist for s in slots if s.totals is not None))
