"""Data of docker plans: the named volume, an archive put into it, a one-shot migration.

Volumes made for a run carry the run's labels, so `cleanup_stale` finds them if
the run is killed; a volume the plan names and that already exists is never
removed. The docker SDK is imported only here and only when a plan needs it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from soak.errors import InputError, TargetStartError
from soak.upgrade.actions import StepFailed
from soak.upgrade.config import MigrateContainer


def _engine() -> Any:
    from soak.targets.docker_engine import engine

    return engine()


def _labels(run_id: str) -> dict[str, str]:
    from soak.targets.docker_engine import LABEL_OWNER, LABEL_RUN, owner_label

    return {LABEL_RUN: run_id, LABEL_OWNER: owner_label()}


def ensure_volume(name: str, run_id: str) -> bool:
    """The named volume, created (labelled with the run) if missing; True if created."""
    import docker.errors

    client = _engine()
    try:
        client.volumes.get(name)
        return False
    except docker.errors.NotFound:
        client.volumes.create(name=name, labels=_labels(run_id))
        return True


def remove_volume(name: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        _engine().volumes.get(name).remove(force=True)


def extract_into_volume(archive: Path, volume: str, image: str, mount: str) -> None:
    """The archive's members put into the volume through a created, never started,
    container of `image` (the engine unpacks tar, tar.gz, bz2 and xz); the archive is
    only read."""
    import docker.errors
    from docker.types import Mount

    try:
        data = archive.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read archive {archive}: {exc.strerror or exc}") from exc
    client = _engine()
    try:
        helper = client.containers.create(
            image, command=["true"], mounts=[Mount(target=mount, source=volume, type="volume")]
        )
    except docker.errors.DockerException as exc:
        raise TargetStartError(f"cannot create a helper container of {image}: {exc}") from exc
    try:
        if not helper.put_archive(mount, data):
            raise TargetStartError(f"the engine refused archive {archive} for volume {volume}")
    finally:
        helper.remove(force=True)


def chown_volume(volume: str, image: str, mount: str, owner: str) -> None:
    """`chown -R owner mount` as root in a one-shot container of `image`, so that user
    and group names mean what they mean in the image."""
    import docker.errors
    from docker.types import Mount

    client = _engine()
    try:
        client.containers.run(
            image,
            entrypoint=["chown", "-R", owner, mount],
            user="0:0",
            remove=True,
            mounts=[Mount(target=mount, source=volume, type="volume")],
        )
    except docker.errors.DockerException as exc:
        raise TargetStartError(f"cannot chown the data volume to {owner}: {exc}") from exc


def run_one_shot(
    spec: MigrateContainer,
    command: list[str],
    volume: str,
    env: dict[str, str],
    timeout_s: float,
    name: str,
) -> tuple[int, str]:
    """Runs `command` in a fresh container with the data volume; (exit code, output)."""
    import docker.errors
    from docker.types import Mount

    client = _engine()
    try:
        container = client.containers.create(
            spec.image,
            entrypoint=spec.entrypoint,
            command=command,
            environment=env,
            user=spec.user,
            name=name,
            mounts=[Mount(target=spec.mount, source=volume, type="volume")],
            labels=_labels(name),
        )
    except docker.errors.DockerException as exc:
        raise StepFailed(f"cannot create the migration container: {exc}") from exc
    try:
        container.start()
        try:
            status = container.wait(timeout=timeout_s)
        except Exception as exc:  # requests' ReadTimeout: the engine did not answer in time
            raise StepFailed(f"migration container did not finish in {timeout_s:g} s") from exc
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
        return int(status.get("StatusCode", -1)), output
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)
