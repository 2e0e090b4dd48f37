"""The targets a run has started and not yet stopped, each under a key (an upgrade's
`old`, `new`, `rollback`); and a bench side's group (LiveGroup: a scenario's helper
services and target, in a temporary directory the data directory names).

A target is built in the run's directory as the data directory names it (its own
sub-directory per key, see layout.TargetFiles) and counted as live *before* its
start: a signal that arrives inside `start()` still finds it, and the end of the run
stops it. A target that could not even be launched is not live.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from soak.config import Scenario
from soak.errors import TargetStartError
from soak.runs.layout import BENCH_SIDE_PREFIX, TargetFiles, targets_dir
from soak.targets import build_target
from soak.targets.base import ExitInfo, Running, Target
from soak.targets.group import OnEvent, TargetGroup
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


class LiveGroup:
    """A bench side's helper services and target. Nothing exists before `start()`: its
    directory is made there (so bad input found after a side is named leaves nothing),
    and `stop()` stops the group and removes the directory."""

    def __init__(self, scenario: Scenario, *, label: str, run_id: str, on_event: OnEvent) -> None:
        self.scenario = scenario
        self.label = label
        self.run_id = run_id
        self.on_event = on_event
        self.starts = 0  # the target's starts, a restart counted (a bench row's `fresh`)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._group: TargetGroup | None = None

    @property
    def running(self) -> Running | None:
        return self._group.running if self._group is not None else None

    @property
    def target(self) -> Target | None:
        return self._group.target if self._group is not None else None

    def start(self) -> None:
        """Helpers, then the target, ready; on failure everything started is stopped."""
        self._tmp = tempfile.TemporaryDirectory(prefix=BENCH_SIDE_PREFIX.format(side=self.label))
        sc = self.scenario
        self._group = TargetGroup(
            sc.target,
            sc.services,
            sc.setup,
            files=TargetFiles(Path(self._tmp.name)),
            run_id=self.run_id,
            base_dir=sc.base_dir,
            allow_targets=tuple(sc.allow_targets),
            on_event=self.on_event,
            load_connections=sc.load.server_connections() if sc.load is not None else None,
        )
        try:
            self._group.start()
        except BaseException:
            self.stop()
            raise
        self.starts += 1

    def restart_target(self) -> None:
        """A fresh target (empty caches); its helper services keep running."""
        assert self._group is not None, "restart before start"
        self._group.restart_target()
        self.starts += 1

    def stop(self) -> None:
        if self._group is not None:
            self._group.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
