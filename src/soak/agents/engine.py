"""The one small interface every agents engine implements, and the agents' states."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from soak.agents.spec import ROLE, AgentSpec
from soak.errors import SoakError

State = Literal["pending", "running", "complete", "failed"]
DONE: tuple[State, ...] = ("complete", "failed")


@dataclass(frozen=True)
class AgentState:
    index: int
    state: State
    message: str = ""  # why it failed (an exit code, the engine's error)

    @property
    def done(self) -> bool:
        return self.state in DONE


class AgentOutput(Protocol):
    """Where local agents write their output: a folder and a file per agent and stream,
    each named by the run (soak.runs.layout.AgentFiles); an engine names none."""

    @property
    def dir(self) -> Path: ...

    def out(self, index: int) -> Path: ...

    def err(self, index: int) -> Path: ...


class AgentEngine(Protocol):
    """start() checks first (engine reachable, image there) and raises InputError with
    nothing started; remove() takes away everything start() made, and may be called
    any number of times, also after a failed start."""

    name: str

    def start(self, spec: AgentSpec) -> None: ...

    def poll(self) -> list[AgentState]: ...

    def logs(self, index: int) -> str: ...

    def remove(self) -> None: ...

    def sweep(self, run_id: str, role: str = ROLE) -> None:
        """Remove the agents of `role` an earlier coordinator of this run left (it was
        SIGKILLed)."""
        ...


class OneByOneEngine(ABC):
    """An engine that starts its agents one at a time, all of them or none: after a
    failure, what was started is removed before the error goes on."""

    def start(self, spec: AgentSpec) -> None:
        self._prepare(spec)
        try:
            for i in range(spec.count):
                self._start_agent(spec, i)
        except BaseException:
            self.remove()
            raise

    @abstractmethod
    def _prepare(self, spec: AgentSpec) -> None:
        """Checks and set-up before the first agent; an error here has started nothing."""

    @abstractmethod
    def _start_agent(self, spec: AgentSpec, index: int) -> None: ...

    @abstractmethod
    def remove(self) -> None: ...


WAIT_S = 0.2


def wait_for_agents(
    engine: AgentEngine,
    missing: Callable[[], list[str]],
    timeout_s: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Until missing() names no agent that has yet to call in; SoakError (the run does
    not start) when an agent's task fails first or timeout_s passes."""
    end = clock() + timeout_s
    while True:
        waiting = missing()
        if not waiting:
            return
        failed = [s for s in engine.poll() if s.state == "failed"]
        if failed:
            raise SoakError(f"{what} {failed[0].index} failed: {failed[0].message}")
        if clock() > end:
            raise SoakError(f"{what} {', '.join(waiting)} did not call in within {timeout_s:g} s")
        time.sleep(WAIT_S)
