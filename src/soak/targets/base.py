"""The one lifecycle every runtime implements (docker, process, external)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from signal import SIGKILL, SIGTERM
from typing import Any, Protocol


@dataclass(frozen=True)
class ExitInfo:
    """How a target ended: exit code, or the signal that killed it, or an OOM kill."""

    exit_code: int | None
    signal: int | None = None
    oom_killed: bool = False
    requested: bool = False  # soak asked it to stop (SIGTERM, then SIGKILL after the timeout)
    # It exited 0 and left its server running in the background: what happened, and what
    # to change ("dnsmasq forked into the background (pid N): run it in the foreground ...")
    forked: str | None = None

    def describe(self) -> str:
        if self.forked is not None:
            return self.forked
        if self.oom_killed:
            return "OOM-killed"
        if self.requested:
            return self._describe_stop()
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        if self.exit_code is None:
            return "exited (code unknown)"  # a re-attached process is not our child
        return f"exited with code {self.exit_code}"

    def _describe_stop(self) -> str:
        """A stop soak asked for: "stopped", and how, when it was not a plain exit."""
        if self.signal == SIGKILL:
            return "stopped (killed: it did not exit within its stop timeout)"
        if self.signal is not None and self.signal != SIGTERM:
            return f"stopped (killed by signal {self.signal})"
        if self.exit_code not in (None, 0) and self.signal is None:
            return f"stopped (exited with code {self.exit_code})"
        return "stopped"


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
    runtime: str = ""  # "process", "docker" or "external"
    restarts: int = 0
    # Identity of `pid` (field 22 of /proc/PID/stat), so a re-attach is not fooled by
    # a recycled PID.
    pid_start_ticks: int | None = None
    volume: str | None = None  # docker: the named volume mounted for data
    run_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. a low fd limit, for events

    def address(self, port_name: str) -> tuple[str, int]:
        return self.host, self.ports[port_name]

    def to_state(self) -> dict[str, Any]:
        """JSON-safe state, so that a restarted soak service can re-attach."""
        state: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            state[name] = str(value) if isinstance(value, Path) else value
        state["ports"] = dict(self.ports)
        state["conditions_s"] = dict(self.conditions_s)
        state["warnings"] = list(self.warnings)
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Running:
        known = {k: v for k, v in state.items() if k in cls.__dataclass_fields__}
        for name in ("log_path", "data_dir", "run_dir"):
            if known.get(name) is not None:
                known[name] = Path(known[name])
        return cls(**known)


class FilePaths(Protocol):
    """Where a target writes, as its run's data directory names it (soak.runs.layout
    .TargetFiles): `dir` for rendered config files and sockets, each target's log and a
    process target's default data directory. A target names no file of its own."""

    @property
    def dir(self) -> Path: ...

    def log(self, target: str) -> Path: ...

    def data(self, target: str) -> Path: ...


class Target(Protocol):
    name: str
    running: Running | None  # set by start() / attach(), None before
    load_connections: int | None  # a run's load's connections to it (its open-files need)

    def start(self) -> Running: ...

    def wait_ready(self) -> Running: ...

    def poll(self) -> ExitInfo | None: ...

    def stop(self) -> ExitInfo | None: ...

    def restart(self) -> Running: ...

    def attach(self, state: dict[str, Any]) -> Running: ...

    def log_tail(self, lines: int = 20) -> list[str]: ...
