"""The `docker` runtime: one container per target, through the docker SDK.

Everything a run creates carries the labels `soak.run` (run id), `soak.target`
and `soak.owner` (host:pid of the soak process), so that `cleanup_stale`
finds what an interrupted run left behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import docker.errors
from docker.client import DockerClient
from docker.types import Mount, Ulimit

from soak.errors import InputError, TargetStartError
from soak.targets.base import ExitInfo, Running
from soak.targets.common import LOG_TAIL_LINES, RuntimeBase, safe_name
from soak.targets.config import DockerTarget, PortSpec
from soak.targets.ports import allocate_ports
from soak.targets.procinfo import children, start_ticks
from soak.targets.render import Placeholders, render, render_all, render_map, resolve, write_files

LABEL_RUN = "soak.run"
LABEL_TARGET = "soak.target"
LABEL_OWNER = "soak.owner"
ENGINE_TIMEOUT_S = 60


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def engine() -> Any:
    """A client for the local engine (DOCKER_HOST honoured), or TargetStartError."""
    try:
        client = DockerClient.from_env(timeout=ENGINE_TIMEOUT_S)
        client.ping()
    except docker.errors.DockerException as exc:
        raise TargetStartError(f"no Docker engine answers: {exc}") from exc
    return client


def exit_info_from_state(state: dict[str, Any]) -> ExitInfo | None:
    """Exit code, signal (codes 129-192 are 128 + signal) and OOM kill from inspect."""
    if state.get("Running") or state.get("Status") in ("created", "running", "restarting"):
        return None
    code = int(state.get("ExitCode", 0))
    sig = code - 128 if 128 < code <= 128 + 64 else None
    return ExitInfo(code, signal=sig, oom_killed=bool(state.get("OOMKilled")))


class _LogPump(threading.Thread):
    """Copies the container's stdout and stderr into the run's log file until it stops."""

    def __init__(self, container_id: str, path: Path, since: float | None) -> None:
        super().__init__(name=f"soak-log-{container_id[:12]}", daemon=True)
        self.container_id, self.path, self.since = container_id, path, since

    def run(self) -> None:
        # A client of its own: the stream holds its connection for the container's life.
        client = DockerClient.from_env(timeout=None)
        with open(self.path, "ab") as out, contextlib.closing(client):
            try:
                container = client.containers.get(self.container_id)
                kwargs: dict[str, Any] = {"stream": True, "follow": True}
                if self.since is not None:
                    kwargs["since"] = self.since
                for chunk in container.logs(**kwargs):
                    out.write(chunk)
                    out.flush()
            except docker.errors.DockerException as exc:
                # Recorded where the log is read: a gap in the log is evidence too.
                out.write(f"[soak] container log stream ended: {exc}\n".encode())


class DockerRuntime(RuntimeBase):
    runtime = "docker"
    cfg: DockerTarget

    def __init__(
        self,
        cfg: DockerTarget,
        *,
        run_dir: Path,
        run_id: str,
        base_dir: Path,
        volume_name: str | None = None,
    ) -> None:
        super().__init__(cfg, run_dir=run_dir, run_id=run_id, base_dir=base_dir)
        if volume_name is not None and cfg.volume is None:
            raise InputError(f"{cfg.name}: a volume name is given but the target has no `volume`")
        self.volume_name = volume_name
        self.container: Any = None
        self._client: Any = None
        self._created_volume: str | None = None  # removed again if the start fails
        self._pump: _LogPump | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = engine()
        return self._client

    def labels(self) -> dict[str, str]:
        return {LABEL_RUN: self.run_id, LABEL_TARGET: self.name, LABEL_OWNER: owner_label()}

    # ---------------------------------------------------------------- start

    def start(self) -> Running:
        if self.container is not None and self.poll() is None:
            raise TargetStartError(f"{self.name}: already running ({self.container.short_id})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._check_image()
        host_net = self.cfg.network == "host"
        ports = allocate_ports(self.name, self._host_port_specs(host_net), self.cfg.host)
        data_dir = self.cfg.volume.mount if self.cfg.volume else None
        values = self.placeholders(ports, data_dir)
        write_files(self.cfg.files, values, self.run_dir, self.base_dir)
        volume = self._ensure_volume()
        kwargs = self._create_kwargs(values, ports, volume, host_net)
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

    def _host_port_specs(self, host_net: bool) -> dict[str, PortSpec]:
        """With host networking the port inside is the host port, unless one is given."""
        if not host_net:
            return self.cfg.ports
        return {
            name: spec.model_copy(update={"host": spec.host or spec.container})
            for name, spec in self.cfg.ports.items()
        }

    def _check_image(self) -> None:
        try:
            self.client.images.get(self.cfg.image)
        except docker.errors.ImageNotFound as exc:
            raise TargetStartError(
                f"{self.name}: image {self.cfg.image} not found in the local engine "
                "(build or load it first; soak does not pull)"
            ) from exc
        except docker.errors.DockerException as exc:
            raise TargetStartError(f"{self.name}: image {self.cfg.image}: {exc}") from exc

    def _ensure_volume(self) -> str | None:
        """The data volume: the one passed in or configured (reused), else a fresh one."""
        if self.cfg.volume is None:
            return None
        name = self.volume_name or self.cfg.volume.name
        fresh = name is None
        if name is None:
            name = f"soak-{safe_name(self.run_id)}-{safe_name(self.name)}"
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

    def _create_kwargs(
        self, values: Placeholders, ports: dict[str, int], volume: str | None, host_net: bool
    ) -> dict[str, Any]:
        cfg = self.cfg
        mounts = [
            Mount(
                target=m.target,
                source=str(resolve(render(m.source, values, "mounts"), self.base_dir)),
                type="bind",
                read_only=m.read_only,
            )
            for m in cfg.mounts
        ]
        if volume is not None and cfg.volume is not None:
            mounts.append(Mount(target=cfg.volume.mount, source=volume, type="volume"))
        kwargs: dict[str, Any] = {
            "name": f"soak-{safe_name(self.run_id)}-{safe_name(self.name)}",
            "command": render_all(cfg.command, values, "command") if cfg.command else None,
            "environment": render_map(cfg.environment, values, f"{self.name}.environment"),
            "labels": self.labels(),
            "mounts": mounts,
            "read_only": cfg.read_only,
            "tmpfs": {path: "" for path in cfg.tmpfs},
            "cap_drop": cfg.cap_drop or None,
            "cap_add": cfg.cap_add or None,
            "security_opt": ["no-new-privileges"] if cfg.no_new_privileges else None,
            "user": cfg.user,
            "init": cfg.init,
            "cpuset_cpus": cfg.cpuset,
            "detach": True,
        }
        if cfg.cpus is not None:
            kwargs["nano_cpus"] = int(cfg.cpus * 1e9)
        if cfg.mem_limit is not None:
            # Swap equal to the limit: the container is OOM-killed rather than swapping.
            kwargs["mem_limit"] = cfg.mem_limit
            kwargs["memswap_limit"] = cfg.mem_limit
        if cfg.nofile is not None:
            kwargs["ulimits"] = [Ulimit(name="nofile", soft=cfg.nofile, hard=cfg.nofile)]
        if host_net:
            kwargs["network_mode"] = "host"  # the command must use {port.<name>}
        else:
            kwargs["ports"] = self._port_bindings(ports)
        return kwargs

    def _port_bindings(self, ports: dict[str, int]) -> dict[str, tuple[str, int]]:
        bindings: dict[str, tuple[str, int]] = {}
        for name, spec in self.cfg.ports.items():
            if spec.container is None:
                raise InputError(f"{self.name}: port {name} needs `container` (the port inside)")
            protocols = ["tcp", "udp"] if spec.protocol == "both" else [spec.protocol]
            for proto in protocols:
                bindings[f"{spec.container}/{proto}"] = (self.cfg.host, ports[name])
        return bindings

    def _after_start(self, since: float | None) -> None:
        running = self._require_running()
        self.container.reload()
        running.container_id = self.container.id
        self._find_pid(running)
        self._pump = _LogPump(self.container.id, self.log_path, since)
        self._pump.start()

    def _find_pid(self, running: Running) -> None:
        """The server's host PID, when /proc of this host shows the container's processes.

        With init=True the engine's PID is docker-init; the server is its child.
        A remote engine (or another PID namespace) leaves pid None: use stats_fields().
        """
        pid = int(self.container.attrs["State"].get("Pid") or 0)
        if pid <= 0 or not _in_container(pid, self.container.id):
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

    def stats_fields(self) -> dict[str, float]:
        """The `process` fields the engine's stats API gives (slow, about 1 s): the
        fallback when /proc is not reachable (running.pid is None)."""
        if self.container is None:
            return {}
        return process_fields_from_stats(self.container.stats(stream=False))

    # ---------------------------------------------------------------- stop

    def stop(self) -> ExitInfo | None:
        """docker stop (SIGTERM, SIGKILL after stop_timeout_s), then the container is removed."""
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
            self._pump = _LogPump(self.container.id, self.log_path, since=time.time())
            self._pump.start()
        return self.running


def _in_container(pid: int, container_id: str) -> bool:
    """True when /proc/PID on this host is the container's process (same PID namespace)."""
    try:
        return container_id in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False


def process_fields_from_stats(stats: dict[str, Any]) -> dict[str, float]:
    """Engine stats (cgroup v1 or v2) -> `process` measurement fields."""
    fields: dict[str, float] = {}
    memory = stats.get("memory_stats") or {}
    mstats = memory.get("stats") or {}
    if "usage" in memory:
        # The page cache is not the process's memory; v1 names it total_cache, v2 file.
        cache = mstats.get("total_cache", mstats.get("file", 0))
        fields["rss_bytes"] = float(memory["usage"] - cache)
    if "total_rss" in mstats or "anon" in mstats:
        fields["rss_anon_bytes"] = float(mstats.get("total_rss", mstats.get("anon", 0)))
    cpu = (stats.get("cpu_stats") or {}).get("cpu_usage") or {}
    if "usage_in_usermode" in cpu:
        fields["cpu_user_s"] = cpu["usage_in_usermode"] / 1e9
        fields["cpu_system_s"] = cpu.get("usage_in_kernelmode", 0) / 1e9
    pids = (stats.get("pids_stats") or {}).get("current")
    if pids is not None:
        fields["threads"] = float(pids)
    io = (stats.get("blkio_stats") or {}).get("io_service_bytes_recursive") or []
    for entry in io:
        op = str(entry.get("op", "")).lower()
        if op in ("read", "write"):
            key = f"{op}_bytes"
            fields[key] = fields.get(key, 0.0) + float(entry.get("value", 0))
    return fields
