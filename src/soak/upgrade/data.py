"""The plan's data, made before the old version starts: a named volume when every version
is a docker one, else a directory in the run's directory (a docker version mounts it);
from the plan's archive (read only) and owned as the plan says."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

from soak.runs.layout import upgrade_data_dir
from soak.targets.specs import DockerTarget
from soak.upgrade import docker_data
from soak.upgrade.config import UpgradePlan
from soak.upgrade.template import Values


@dataclass
class PlanData:
    data_dir: Path | None = None  # a directory on this host
    volume: str | None = None  # or a docker volume
    made_volume: bool = False  # made for this run: removed with it (unless kept)


def make_data(plan: UpgradePlan, values: Values, run_dir: Path, run_id: str, data: PlanData) -> str:
    """The plan's data made into `data` (filled as it goes: an interruption still finds
    the volume to remove); what was made."""
    spec = plan.data
    if not plan.data_on_host:  # every version a docker one: a named volume
        assert isinstance(plan.old, DockerTarget)
        volume = data.volume = spec.volume or f"soak-upgrade-{run_id}"
        data.made_volume = docker_data.ensure_volume(volume, run_id)
        image = values.render(plan.old.image)  # may be a {{var}}
        mount = plan.old.volume.mount if plan.old.volume else "/data"
        if spec.archive:
            archive = plan.resolve_path(spec.archive)
            docker_data.extract_into_volume(archive, volume, image, mount, run_id)
        if spec.owner:
            docker_data.chown_volume(volume, image, mount, spec.owner, run_id)
        what = "fresh" if data.made_volume else "existing"
        return f"{what} volume {volume}" + _archive_words(plan)
    data_dir = data.data_dir = upgrade_data_dir(run_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    if spec.archive:
        with tarfile.open(plan.resolve_path(spec.archive)) as tar:
            tar.extractall(data_dir, filter="data")
    old = plan.old
    if spec.owner and isinstance(old, DockerTarget) and old.volume is not None:
        image = values.render(old.image)  # the owner's names as the image has them
        docker_data.chown_volume(str(data_dir), image, old.volume.mount, spec.owner, run_id)
    return f"{data_dir}" + _archive_words(plan)


def _archive_words(plan: UpgradePlan) -> str:
    archive = plan.data.archive
    return f" <- archive {plan.resolve_path(archive)} (read only)" if archive else ""
