"""The docker engine as the docker runtime sees it: the client, labels, state, stats, logs.

Everything a run creates carries the labels `soak.run` (run id), `soak.target`
and `soak.owner` (host:pid:start of the soak process, soak.labels), so that `cleanup_stale`
finds what an interrupted run left behind.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import docker.errors
from docker.client import DockerClient

from soak.clock import ns_to_s
from soak.labels import LABEL_OWNER, LABEL_RUN, LABEL_TARGET, owner_label
from soak.procfs import PROC_ROOT, read_cgroup
from soak.targets.base import ExitInfo


def image_problem(client: Any, name: str, image: str) -> str | None:
    """Why `image` cannot be used from the local engine (soak does not pull), or None."""
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return (
            f"{name}: image {image} not found in the local engine "
            "(build or load it first; soak does not pull)"
        )
    except docker.errors.DockerException as exc:
        return f"{name}: image {image}: {exc}"
    return None


def exit_info_from_state(state: dict[str, Any]) -> ExitInfo | None:
    """Exit code, signal (codes 129-192 are 128 + signal) and OOM kill from inspect."""
    if state.get("Running") or state.get("Status") in ("created", "running", "restarting"):
        return None
    code = int(state.get("ExitCode", 0))
    sig = code - 128 if 128 < code <= 128 + 64 else None
    return ExitInfo(code, signal=sig, oom_killed=bool(state.get("OOMKilled")))


def run_labels(run_id: str, target: str) -> dict[str, str]:
    return {LABEL_RUN: run_id, LABEL_TARGET: target, LABEL_OWNER: owner_label()}


def in_container(pid: int, container_id: str, root: Path = PROC_ROOT) -> bool:
    """True when /proc/PID on this host is the container's process (same PID namespace)."""
    try:
        return container_id in read_cgroup(pid, root)
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
        fields["cpu_user_s"] = ns_to_s(cpu["usage_in_usermode"])
        fields["cpu_system_s"] = ns_to_s(cpu.get("usage_in_kernelmode", 0))
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


class LogPump(threading.Thread):
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
