"""The targets a run has started and not yet stopped, each under a key (an upgrade's
`old`, `new`, `rollback`).

A target is built in the run's directory as the data directory names it (its own
sub-directory per key, see layout.TargetFiles) and counted as live *before* its
start: a signal that arrives inside `start()` still finds it, and the end of the run
stops it. A target that could not even be launched is not live.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from soak.errors import TargetStartError
from soak.runs.layout import TargetFiles, targets_dir
from soak.targets import build_target
from soak.targets.base import ExitInfo, Running, Target
from soak.targets.specs import TargetConfig


class LiveTargets:
    def __init__(
        self,
        *,
        run_dir: Path,
        run_id: str,
        base_dir: Path,
        allow_targets: Sequence[str] = (),
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.base_dir = base_dir
        self.allow_targets = tuple(allow_targets)
        self.labels = dict(labels or {})
        self._live: dict[str, Target] = {}

    def start(self, key: str, cfg: TargetConfig, *, volume_name: str | None = None) -> Target:
        """The target launched (not yet ready); TargetStartError if it cannot be, and then
        it is not live."""
        target = build_target(
            cfg,
            files=TargetFiles(targets_dir(self.run_dir, key)),
            run_id=f"{self.run_id}-{key}",
            base_dir=self.base_dir,
            volume_name=volume_name,
            allow_targets=self.allow_targets,
            labels=self.labels,
        )
        self._live[key] = target  # before start: an interruption in start() stops it too
        try:
            target.start()
        except TargetStartError:  # never launched; a signal leaves it live, to be stopped
            self._live.pop(key, None)
            raise
        return target

    def wait_ready(self, key: str) -> Running:
        """The target ready; if it exits or never gets ready, TargetStartError, and it is
        no longer live (soak.targets has stopped what was left of it)."""
        try:
            return self._live[key].wait_ready()
        except TargetStartError:
            self._live.pop(key, None)
            raise

    def stop(self, key: str) -> ExitInfo | None:
        """The target stopped, if it is live; it stays live if the stop is interrupted."""
        target = self._live.get(key)
        if target is None:
            return None
        info = target.stop()
        self._live.pop(key, None)
        return info

    def started(self) -> list[str]:
        """The keys of the live targets, in the order they started."""
        return list(self._live)

    def __contains__(self, key: str) -> bool:
        return key in self._live
