"""Data of docker plans: the named volume, an archive put into it, a one-shot migration;
and what a run made, found again by its labels.

Everything an upgrade run makes in the engine (the versions' containers, helper and
migration containers, a volume made for the run) carries `soak.upgrade=RUN_ID` beside
the run labels of soak.targets (`soak.run`, `soak.owner`). A run removes its own by
that label at its end, whatever it was doing when it was stopped, and the next run
removes what a run killed outright (SIGKILL) left through soak.runs.leftovers, as it
does every dead run's (their `soak.owner` is gone). A
volume the plan names and that already exists is never labelled, so never removed.
The docker SDK is imported only here and only when a plan needs it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from soak.errors import InputError, TargetStartError
from soak.upgrade.actions import StepFailed
from soak.upgrade.config import MigrateContainer


def _engine() -> Any:
    from soak.docker_client import engine

    return engine()


def image_of(container_id: str) -> tuple[str, list[str]]:
    """The image a container runs: its id and its repository digests (none for an image
    built here and never pushed)."""
    image = _engine().containers.get(container_id).image
    return str(image.id), list(image.attrs.get("RepoDigests") or [])


LABEL_UPGRADE = "soak.upgrade"  # the upgrade run's id, on everything the run makes


def run_labels(run_id: str, part: str = "") -> dict[str, str]:
    """Labels of what the upgrade run `run_id` makes; `part` ("-migrate", ...) tells
    its containers apart in `soak.run`."""
    from soak.labels import LABEL_OWNER, LABEL_RUN, owner_label

    return {LABEL_RUN: run_id + part, LABEL_OWNER: owner_label(), LABEL_UPGRADE: run_id}


def ensure_volume(name: str, run_id: str) -> bool:
    """The named volume, created (labelled with the run) if missing; True if created."""
    import docker.errors

    client = _engine()
    try:
        client.volumes.get(name)
        return False
    except docker.errors.NotFound:
        client.volumes.create(name=name, labels=run_labels(run_id))
        return True


def remove_volume(name: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        _engine().volumes.get(name).remove(force=True)


def extract_into_volume(archive: Path, volume: str, image: str, mount: str, run_id: str) -> None:
    """The archive's members put into the volume through a created, never started,
    container of `image` (the engine unpacks tar, tar.gz, bz2 and xz); the archive is
    only read."""
    import docker.errors

    try:
        data = archive.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read archive {archive}: {exc.strerror or exc}") from exc
    client = _engine()
    try:
        helper = client.containers.create(
            image,
            command=["true"],
            mounts=[data_mount(mount, volume)],
            labels=run_labels(run_id, "-data"),
        )
    except docker.errors.DockerException as exc:
        raise TargetStartError(f"cannot create a helper container of {image}: {exc}") from exc
    try:
        if not helper.put_archive(mount, data):
            raise TargetStartError(f"the engine refused archive {archive} for volume {volume}")
    finally:
        helper.remove(force=True)


def data_mount(target: str, source: str) -> Any:
    """The plan's data at `target` in a container: a named volume, or (a plan with a
    process version too) a host directory, bind-mounted."""
    from docker.types import Mount

    kind = "bind" if source.startswith("/") else "volume"
    return Mount(target=target, source=source, type=kind)


def chown_volume(volume: str, image: str, mount: str, owner: str, run_id: str) -> None:
    """`chown -R owner mount` as root in a one-shot container of `image`, so that user
    and group names mean what they mean in the image; `volume`: a volume's name or
    a host directory."""
    import docker.errors

    client = _engine()
    try:
        client.containers.run(
            image,
            entrypoint=["chown", "-R", owner, mount],
            user="0:0",
            remove=True,
            mounts=[data_mount(mount, volume)],
            labels=run_labels(run_id, "-data"),
        )
    except docker.errors.DockerException as exc:
        raise TargetStartError(f"cannot chown the data volume to {owner}: {exc}") from exc


def run_one_shot(
    spec: MigrateContainer,
    command: list[str],
    volume: str,
    env: dict[str, str],
    timeout_s: float,
    run_id: str,
    part: str,
) -> tuple[int, str, str]:
    """Runs `command` in a fresh container (named RUN_ID + part) with the data volume
    (or host directory); (exit code, stdout, stderr)."""
    import docker.errors

    client = _engine()
    try:
        container = client.containers.create(
            spec.image,
            entrypoint=spec.entrypoint,
            command=command,
            environment=env,
            user=spec.user,
            name=run_id + part,
            mounts=[data_mount(spec.mount, volume)],
            labels=run_labels(run_id, part),
        )
    except docker.errors.DockerException as exc:
        raise StepFailed(f"cannot create the migration container: {exc}") from exc
    try:
        container.start()
        try:
            status = container.wait(timeout=timeout_s)
        except Exception as exc:  # requests' ReadTimeout: the engine did not answer in time
            raise StepFailed(f"migration container did not finish in {timeout_s:g} s") from exc
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
        return int(status.get("StatusCode", -1)), stdout, stderr
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)


# ---------------------------------------------------------------- what a run left


def remove_run(run_id: str, *, keep_volumes: bool) -> int:
    """Every container of the upgrade run `run_id` (and its volumes unless kept), by the
    label; whatever the run's own stops did not reach (a container created in the moment
    the run was stopped). Returns how many were removed."""
    return _remove_labelled(f"{LABEL_UPGRADE}={run_id}", keep_volumes)


def _remove_labelled(label_filter: str, keep_volumes: bool) -> int:
    """Containers first (a volume in use cannot go), then volumes; each `soak.run` found
    goes through soak.targets' label clean-up."""
    from soak.labels import LABEL_RUN
    from soak.targets import cleanup_stale

    client = _engine()
    try:
        containers = client.containers.list(
            all=True, filters={"label": label_filter}, ignore_removed=True
        )
        volumes = [] if keep_volumes else client.volumes.list(filters={"label": label_filter})
    finally:
        client.close()
    found = [c.labels for c in containers] + [v.attrs.get("Labels") or {} for v in volumes]
    runs = dict.fromkeys(lb[LABEL_RUN] for lb in found if LABEL_RUN in lb)
    return sum(cleanup_stale(run) for run in runs)
