"""The one lifecycle every runtime implements (docker, process, external)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ExitInfo:
    """How a target ended: exit code, or the signal that killed it, or an OOM kill."""

    exit_code: int | None
    signal: int | None = None
    oom_killed: bool = False

    def describe(self) -> str:
        if self.oom_killed:
            return "OOM-killed"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exited with code {self.exit_code}"


@dataclass
class Running:
    """What samplers and checks need of a started target."""

    name: str
    host: str  # where its ports answer (127.0.0.1)
    ports: dict[str, int]  # port name -> host port
    pid: int | None  # host PID of the main process (for /proc), None when unknown
    log_path: Path | None
    data_dir: Path | None = None
    container_id: str | None = None
    started_monotonic_s: float = 0.0
    ready_after_s: float | None = None  # start to ready
    conditions_s: dict[str, float] = field(default_factory=dict)  # named condition -> s
    fd_limit: int | None = None

    def address(self, port_name: str) -> tuple[str, int]:
        return self.host, self.ports[port_name]


class Target(Protocol):
    name: str

    def start(self) -> Running: ...

    def wait_ready(self) -> Running: ...

    def poll(self) -> ExitInfo | None: ...

    def stop(self) -> ExitInfo | None: ...
