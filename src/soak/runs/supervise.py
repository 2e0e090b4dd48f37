"""Keeping a run's target, helpers and load engine going, as its scenario says: a target
that exits is restarted or ends the run; a helper is restarted per its own `on_exit`; dead
load workers are replaced. Each is an event of the run."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from soak.errors import SoakError
from soak.procfs import pid_alive, start_ticks
from soak.runs.ending import Ending
from soak.runs.parts import RunParts
from soak.runs.state import RunRecord, RunStatus
from soak.targets.group import TargetGroup


def owner() -> dict[str, Any]:
    """Who drives the run: a foreground run whose command is gone is abandoned."""
    return {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid())}


def owner_alive(target_state: dict[str, Any] | None) -> bool:
    """Is the process that drove a run still there? (Unknown owner: assume so.)"""
    found = (target_state or {}).get("owner") or {}
    pid = found.get("pid")
    if not isinstance(pid, int):
        return True
    return pid_alive(pid, found.get("start_ticks"))


ABANDONED_WHY = "the foreground command that ran it is gone"
ABANDONED_MESSAGE = f"abandoned: {ABANDONED_WHY}"


def as_seen(record: RunRecord) -> RunRecord:
    """The record as `soak status` and `soak list` tell it: a foreground run still
    `pending` or `running` whose command is gone (its pid, checked against its start
    time so that a recycled pid is not taken for it) is `abandoned`, ended at its last
    tick. A service's run is the next service's to resume: left as it is."""
    if not record.active or not record.foreground or owner_alive(record.target_state):
        return record
    return dataclasses.replace(
        record,
        status=RunStatus.ABANDONED,
        message=ABANDONED_MESSAGE,
        ended_ns=abandoned_at_ns(record),
    )


def abandoned_at_ns(record: RunRecord) -> int:
    """When an abandoned run ended, as far as anyone knows: its last tick."""
    return record.last_tick_ns or record.started_ns or record.created_ns


class Supervisor:
    def __init__(
        self,
        group: TargetGroup,
        parts: RunParts,
        *,
        restarts: int,
        end: Callable[[Ending, str], object],
    ) -> None:
        """The run's id, scenario and context are its parts' (`parts.run_id`, ...)."""
        self.group = group
        self.parts = parts
        self.restarts = restarts  # the target's, which criteria count
        self.helper_restarts: dict[str, int] = {}
        # Load agents lost, as their events say ("agent 1 of 2 lost at +0:00:11: ..."):
        # the cause the judge names when the generator fell short.
        self.lost_agents: list[str] = []
        self._helpers_gone: set[str] = set()
        self._end = end

    def target_state(self) -> dict[str, Any]:
        """What a restarted service needs to re-attach, and who drives the run."""
        return {"owner": owner(), **self.group.state()}

    def check_target(self, now_ns: int | None = None) -> None:
        """Target gone: an `exited` event, then a restart or the end, per `on_exit`."""
        info = self.group.poll_target()
        if info is None:
            return
        value = info.signal if info.signal is not None else (info.exit_code or 0)
        self.parts.event("exited", f"target {info.describe()}", float(value), now_ns)
        if info.forked is not None:  # set up to daemonize: a restart would do it again
            self._end(Ending.ERROR, f"target {info.forked}")
            return
        cfg = self.parts.scenario.target
        if cfg.on_exit == "restart" and self.restarts < cfg.max_restarts:
            try:
                self.group.restart_target()
            except SoakError as exc:
                self.parts.event("error", f"restart failed: {exc}", 0.0)
                self._end(Ending.ERROR, f"target could not be restarted: {exc}")
                return
            self.restarts += 1
            self.parts.ctx.metrics.count_restart(self.parts.run_id, cfg.name)
            # The record first: whoever sees the event sees the count and the new PID.
            self.parts.ctx.state.update_run(
                self.parts.run_id, restarts=self.restarts, target_state=self.target_state()
            )
            message = f"target restarted ({self.restarts})"
            self.parts.event("restarted", message, float(self.restarts))
            return
        self._end(Ending.FAILED, f"target {info.describe()}")

    def check_helpers(self, now_ns: int | None = None) -> None:
        """A helper gone: `service_exited`, then restarted per its own `on_exit` (helper
        restarts are events, not the target's restarts that criteria count)."""
        for name, helper in self.group.helpers.items():
            info = None if name in self._helpers_gone else helper.poll()
            if info is None:
                continue
            self.parts.event("service_exited", f"helper {name} {info.describe()}", 0.0, now_ns)
            cfg = self.group.helper_cfgs[name]
            done = self.helper_restarts.get(name, 0)
            if cfg.on_exit != "restart" or done >= cfg.max_restarts:
                self._helpers_gone.add(name)  # told once; the target's answers show the cost
                continue
            try:
                self.group.restart_helper(name)
            except SoakError as exc:
                self.parts.event("error", f"helper {name} could not be restarted: {exc}", 0.0)
                continue
            self.helper_restarts[name] = done + 1
            self.parts.ctx.state.update_run(self.parts.run_id, target_state=self.target_state())
            message = f"helper {name} restarted ({done + 1})"
            self.parts.event("service_restarted", message, done + 1)

    def check_load(self, tick_ns: int, remaining_s: float) -> None:
        """Dead load workers (a fresh engine for the rest of the run), load agents lost,
        the sampler agent lost."""
        events = self.parts.load.check(remaining_s) if self.parts.load is not None else []
        self.lost_agents += [e.message for e in events if e.kind == "agent_lost"]
        if self.parts.remote_samplers is not None:
            events += self.parts.remote_samplers.check()
        for e in events:
            self.parts.event(e.kind, e.message, e.value, tick_ns)
