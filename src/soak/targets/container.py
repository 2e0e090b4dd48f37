"""The `docker` runtime: one container per target, through the docker SDK: its lifecycle.

The container's spec is docker_spec.py's; the engine client, labels, state, stats
and the log stream are docker_engine.py's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker.errors

from soak.docker_client import engine
from soak.errors import InputError, TargetStartError
from soak.labels import LABEL_TARGET
from soak.procfs import children, start_ticks
from soak.targets.base import ExitInfo, FilePaths, Running
from soak.targets.common import LOG_TAIL_LINES, START_LOG_LINES, RuntimeBase
from soak.targets.docker_engine import (
    LogPump,
    exit_info_from_state,
    image_problem,
    in_container,
    process_fields_from_stats,
    run_labels,
)
from soak.targets.docker_spec import ContainerSpec, resource_name
from soak.targets.ports import allocate_ports
from soak.targets.render import remove_secret_files, write_files
from soak.targets.specs import DockerTarget


class DockerRuntime(RuntimeBase):
    runtime = "docker"
    cfg: DockerTarget

    def __init__(
        self,
        cfg: DockerTarget,
        *,
        files: FilePaths,
        run_id: str,
        base_dir: Path,
        volume_name: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(cfg, files=files, run_id=run_id, base_dir=base_dir)
        if volume_name is not None and cfg.volume is None:
            raise InputError(f"{cfg.name}: a volume name is given but the target has no `volume`")
        self.volume_name = volume_name
        self.spec = ContainerSpec(cfg, run_id, base_dir, dict(labels or {}))
        self.container: Any = None
        self._client: Any = None
        self._created_volume: str | None = None  # removed again if the start fails
        self._pump: LogPump | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = engine()
        return self._client

    def labels(self) -> dict[str, str]:
        return run_labels(self.run_id, self.name)

    # ---------------------------------------------------------------- start

    def start(self) -> Running:
        if self.container is not None and self.poll() is None:
            raise TargetStartError(f"{self.name}: already running ({self.container.short_id})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._check_image()
        host_net = self.cfg.network == "host"
        ports = allocate_ports(self.name, self.spec.host_port_specs(host_net), self.cfg.host)
        data_dir = self.cfg.volume.mount if self.cfg.volume else None
        values = self.placeholders(ports, data_dir)
        # The container's user (often not root) reads them through a bind mount; the run
        # directory around them is private.
        write_files(self.cfg.files, values, self.run_dir, self.base_dir, default_mode=0o644)
        volume = self._ensure_volume()
        kwargs = self.spec.create_kwargs(values, ports, volume, host_net)
        self.running = self._new_running(
            ports=ports, pid=None, volume=volume, data_dir=self._volume_on_host(volume)
        )
        try:
            self.container = self.client.containers.create(self.cfg.image, **kwargs)
            self.container.start()
        except docker.errors.DockerException as exc:
            message = getattr(exc, "explanation", None) or str(exc)
            if "rlimit" in message:
                message += " (is `nofile` above the engine's own hard limit?)"
            self._abort()
            raise TargetStartError(f"{self.name}: container did not start: {message}") from exc
        self._after_start(since=None)
        return self.running

    def _check_image(self) -> None:
        problem = image_problem(self.client, self.name, self.cfg.image)
        if problem is not None:
            raise TargetStartError(problem)

    def _ensure_volume(self) -> str | None:
        """The data volume: the one passed in or configured (reused), else a fresh one."""
        if self.cfg.volume is None:
            return None
        name = self.volume_name or self.cfg.volume.name
        fresh = name is None
        if name is None:
            name = resource_name(self.run_id, self.name)
        try:
            self.client.volumes.get(name)
            return name  # reused as it is: an upgrade runs the new version on old data
        except docker.errors.NotFound:
            pass
        # A user-named volume is created without the run label: cleanup never removes it.
        labels = self.labels() if fresh or self.volume_name else {LABEL_TARGET: self.name}
        self.client.volumes.create(name=name, labels=labels)
        self._created_volume = name
        return name

    def _volume_on_host(self, volume: str | None) -> Path | None:
        """The volume's directory on this host when this process can read it (a local
        engine, soak as root): the files sampler reads the server's data there."""
        if volume is None:
            return None
        try:
            mountpoint = self.client.volumes.get(volume).attrs.get("Mountpoint")
        except docker.errors.DockerException:
            return None
        if not mountpoint or not os.access(mountpoint, os.R_OK | os.X_OK):
            return None
        return Path(mountpoint)

    def _after_start(self, since: float | None) -> None:
        running = self._require_running()
        self.container.reload()
        running.container_id = self.container.id
        self._find_pid(running)
        self._pump = LogPump(self.container.id, self.log_path, since)
        self._pump.start()

    def _find_pid(self, running: Running) -> None:
        """The server's host PID, when /proc of this host shows the container's processes.

        With init=True the engine's PID is docker-init; the server is its child.
        A remote engine (or another PID namespace) leaves pid None: use stats_fields().
        """
        pid = int(self.container.attrs["State"].get("Pid") or 0)
        if pid <= 0 or not in_container(pid, self.container.id):
            running.pid = None
            return
        if self.cfg.init:
            kids = children(pid)
            pid = kids[0] if kids else pid
        running.pid = pid
        running.pid_start_ticks = start_ticks(pid)

    # ---------------------------------------------------------------- while running

    def _on_ready(self, running: Running) -> None:
        self._find_pid(running)  # init's child may not have existed right after start

    def poll(self) -> ExitInfo | None:
        container = self.container  # stop() may clear it from another thread
        if container is None:
            return None
        try:
            container.reload()
        except docker.errors.NotFound:
            return ExitInfo(None)
        return exit_info_from_state(container.attrs["State"])

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        """From the engine (the log file may lag the stream by a moment)."""
        if self.container is None:
            return super().log_tail(lines)
        try:
            raw = self.container.logs(tail=lines)
        except docker.errors.DockerException:
            return super().log_tail(lines)
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        return [ln for ln in text.splitlines() if ln.strip()][-lines:]

    def start_log(self) -> list[str]:
        """The container's own output (a restart is a fresh container: only its start)."""
        return self.log_tail(START_LOG_LINES)

    def stats_fields(self) -> dict[str, float]:
        """The `process` fields the engine's stats API gives (slow, about 1 s): the
        fallback when /proc is not reachable (running.pid is None)."""
        if self.container is None:
            return {}
        return process_fields_from_stats(self.container.stats(stream=False))

    # ---------------------------------------------------------------- stop

    def stop(self) -> ExitInfo | None:
        """docker stop (SIGTERM, SIGKILL after stop_timeout_s), then the container is removed,
        and the rendered files that hold a secret."""
        remove_secret_files(self.cfg.files, self.run_dir, self.base_dir)
        if self.container is None:
            return None
        info = self._stop_container()
        with contextlib.suppress(docker.errors.NotFound):
            self.container.remove(force=True)
        self.container = None
        self._join_pump()
        return info

    def close(self) -> None:
        """Drops the engine connection (a long-lived service builds many targets)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _stop_container(self) -> ExitInfo | None:
        try:
            requested = self.poll() is None
            if requested:
                self.container.stop(timeout=int(max(1, round(self.cfg.stop_timeout_s))))
            info = self.poll()
        except docker.errors.NotFound:
            return ExitInfo(None)
        return dataclasses.replace(info, requested=True) if requested and info else info

    def _join_pump(self) -> None:
        if self._pump is not None:
            self._pump.join(timeout=2.0)
            self._pump = None

    def _abort(self) -> None:
        """A failed start: the container and a volume created for it go."""
        self.stop()
        if self._created_volume is not None:
            with contextlib.suppress(docker.errors.NotFound):
                self.client.volumes.get(self._created_volume).remove(force=True)
            self._created_volume = None
        self.close()

    def restart(self) -> Running:
        """The same container started again: same volume, same ports."""
        running = self._require_running()
        if self.container is None:
            raise TargetStartError(f"{self.name}: no container to restart")
        self._stop_container()
        self._join_pump()
        running.started_monotonic_s = time.monotonic()
        try:
            self.container.start()
        except docker.errors.DockerException as exc:
            raise TargetStartError(f"{self.name}: restart failed: {exc}") from exc
        running.ready_after_s = None
        running.fd_limit = None
        running.conditions_s.clear()
        running.restarts += 1
        self._after_start(since=time.time())
        return running

    def attach(self, state: dict[str, Any]) -> Running:
        """Adopts the container an earlier soak service started."""
        cid = state.get("container_id")
        if not cid:
            raise InputError(f"{self.name}: no container id in the saved state; cannot re-attach")
        try:
            self.container = self.client.containers.get(cid)
        except docker.errors.NotFound as exc:
            raise TargetStartError(f"{self.name}: container {cid[:12]} is gone") from exc
        self.running = Running.from_state(state)
        if self.running.log_path is not None:
            self.log_path = self.running.log_path
        if self.poll() is None:
            self._find_pid(self.running)
            self._pump = LogPump(self.container.id, self.log_path, since=time.time())
            self._pump.start()
        return self.running
