"""Targets: the server under test and its helper services, one lifecycle each.

    target = build_target(cfg, files=..., run_id=..., base_dir=...)
    target.start(); running = target.wait_ready()
    ... target.poll() ... target.restart() ...
    target.stop()

Runtimes: `docker` (DockerRuntime), `process` (ProcessRuntime), `external`
(ExternalRuntime). See docs/targets.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from soak.netsafety import check_allowed
from soak.targets.base import ExitInfo, FilePaths, Running, Target
from soak.targets.external import ExternalRuntime
from soak.targets.process import ProcessRuntime
from soak.targets.specs import DockerTarget, ExternalTarget, ProcessTarget, TargetConfig

__all__ = [
    "ExitInfo",
    "Running",
    "Target",
    "build_target",
    "cleanup_stale",
]


def build_target(
    cfg: TargetConfig,
    *,
    files: FilePaths,
    run_id: str,
    base_dir: Path,
    volume_name: str | None = None,
    allow_targets: Sequence[str] = (),
    resumable_in: Path | None = None,
    labels: Mapping[str, str] | None = None,
) -> Target:
    """The runtime for a target config; nothing is started yet. It writes where `files`
    says (the run's data directory names the paths: soak.runs.layout.TargetFiles).

    `volume_name` (docker) mounts that named volume instead of a fresh one: the
    upgrade plan runs the old and the new version on the same data.
    Probes go only to loopback unless `allow_targets` names the target's network.
    `resumable_in` (a service's data directory): a process target outlives this soak
    process, for the service to resume; by default it dies with it.
    `labels` (docker) are put on the container beside the run's own, so that a caller
    finds everything of its kind again (an upgrade: a killed run's leftovers).
    """
    check_allowed(cfg.host, tuple(allow_targets))
    if isinstance(cfg, ProcessTarget):
        return ProcessRuntime(
            cfg, files=files, run_id=run_id, base_dir=base_dir, resumable_in=resumable_in
        )
    if isinstance(cfg, DockerTarget):
        from soak.targets.container import DockerRuntime  # the docker SDK only when needed

        return DockerRuntime(
            cfg,
            files=files,
            run_id=run_id,
            base_dir=base_dir,
            volume_name=volume_name,
            labels=labels,
        )
    assert isinstance(cfg, ExternalTarget)
    return ExternalRuntime(cfg, files=files, run_id=run_id, base_dir=base_dir)


def cleanup_stale(run_id: str | None = None, *, keep_runs: Sequence[str] = ()) -> int:
    """Removes containers and volumes labelled by soak runs that are gone; returns how many.

    With `run_id`: everything of that run. Without: everything whose owning soak
    process (label soak.owner: host, pid and start time) is gone from this host, except
    runs in `keep_runs` (runs a restarted service is about to re-attach to).
    Without a Docker engine there is nothing to clean: 0.
    """
    from soak.targets.cleanup import cleanup_labelled

    return cleanup_labelled(run_id, keep_runs=tuple(keep_runs))
