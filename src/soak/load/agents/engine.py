"""The one small interface every agents engine implements, and the agents' states."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from soak.load.agents.spec import AgentSpec

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


class AgentEngine(Protocol):
    """start() checks first (engine reachable, image there) and raises InputError with
    nothing started; remove() takes away everything start() made, and may be called
    any number of times, also after a failed start."""

    name: str

    def start(self, spec: AgentSpec) -> None: ...

    def poll(self) -> list[AgentState]: ...

    def logs(self, index: int) -> str: ...

    def remove(self) -> None: ...
