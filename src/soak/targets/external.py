"""The `external` runtime: a server that is already running; probed and sampled only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soak.errors import InputError, TargetStartError
from soak.placeholders import render
from soak.procfs import children, pid_alive, start_ticks
from soak.targets.base import ExitInfo, FilePaths, Running
from soak.targets.common import RuntimeBase
from soak.targets.render import resolve
from soak.targets.specs import ExternalTarget


class ExternalRuntime(RuntimeBase):
    runtime = "external"
    cfg: ExternalTarget

    def __init__(
        self, cfg: ExternalTarget, *, files: FilePaths, run_id: str, base_dir: Path
    ) -> None:
        super().__init__(cfg, files=files, run_id=run_id, base_dir=base_dir)
        missing = [name for name, spec in cfg.ports.items() if spec.host is None]
        if missing:
            raise InputError(f"{cfg.name}: external ports need `host`: {', '.join(missing)}")
        self._gone = False

    def start(self) -> Running:
        """Nothing is started: the address, and a PID if one can be found."""
        ports = {name: spec.host for name, spec in self.cfg.ports.items() if spec.host}
        self.running = self._new_running(ports=ports, pid=self._find_pid(ports))
        self.running.log_path = None
        if self.running.pid is not None:
            self.running.pid_start_ticks = start_ticks(self.running.pid)
        return self.running

    def _find_pid(self, ports: dict[str, int]) -> int | None:
        if self.cfg.pid is not None:
            return self.cfg.pid
        if self.cfg.pidfile is not None:
            text = render(self.cfg.pidfile, self.placeholders(ports, None), "pidfile")
            path = resolve(text, self.base_dir)
            try:
                return int(path.read_text().split()[0])
            except (OSError, ValueError, IndexError) as exc:
                raise TargetStartError(f"{self.name}: no PID in pidfile {path}: {exc}") from exc
        if self.cfg.container is not None:
            return container_pid(self.name, self.cfg.container)
        return None

    def poll(self) -> ExitInfo | None:
        """Only "gone" is known, and only when a PID was found."""
        running = self.running
        if running is None or running.pid is None:
            return None
        if self._gone or not pid_alive(running.pid, running.pid_start_ticks):
            self._gone = True
            return ExitInfo(None)
        return None

    def stop(self) -> ExitInfo | None:
        return None  # not ours to stop

    def restart(self) -> Running:
        raise TargetStartError(f"{self.name}: an external target cannot be restarted by soak")

    def attach(self, state: dict[str, Any]) -> Running:
        self.running = Running.from_state(state) if state else self.start()
        return self.running

    def log_tail(self, lines: int = 12) -> list[str]:
        return []


def container_pid(target: str, name: str) -> int | None:
    from soak.docker_client import engine

    try:
        import docker.errors

        container = engine().containers.get(name)
    except docker.errors.NotFound as exc:
        raise TargetStartError(f"{target}: no container named {name}") from exc
    pid = int(container.attrs["State"].get("Pid") or 0)
    if pid <= 0:
        return None
    if container.attrs.get("HostConfig", {}).get("Init"):
        kids = children(pid)
        return kids[0] if kids else pid
    return pid
