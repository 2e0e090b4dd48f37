"""One side of a benchmark: a scenario's target as the bench measures it (its address,
counters, what it ran on); the engine starts and stops it (plans.bench).

`soak bench` has one side; `soak bench --compare` has two, measured in turns.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from soak.config import Scenario
from soak.errors import InputError, TargetStartError
from soak.runs.live_targets import LiveGroup
from soak.samplers.prom import PromSampler
from soak.targets.base import Running
from soak.targets.group import load_address


class Side:
    """`targets` is the engine's (runs.live_targets.LiveGroup): the bench plan starts and
    stops it; the loop asks it for a fresh target between classes."""

    def __init__(self, label: str, scenario: Scenario, run_id: str, targets: LiveGroup) -> None:
        if scenario.load is None:
            raise InputError(f"{scenario.name}: `soak bench` needs a `load:` section")
        self.label = label
        self.scenario = scenario
        self.run_id = run_id
        self.targets = targets
        self.notes: list[str] = []
        self._prom: PromSampler | None = None

    # ------------------------------------------------------------ the target

    @property
    def running(self) -> Running | None:
        return self.targets.running

    @property
    def starts(self) -> int:
        return self.targets.starts

    def restart(self) -> None:
        """A fresh target (empty caches); its helper services keep running."""
        self.targets.restart_target()

    def check_alive(self) -> None:
        target = self.targets.target
        if target is not None and (info := target.poll()) is not None:
            tail = " | ".join(target.log_tail(5))
            raise TargetStartError(
                f"{self.label}: target {info.describe()} during the bench: {tail}"
            )

    # ------------------------------------------------------------ what runs measure

    @property
    def pid(self) -> int | None:
        return self.running.pid if self.running is not None else None

    def server(self) -> tuple[str, int]:
        load = self.scenario.load
        assert load is not None
        return load_address(load.server, self.running)

    def counters(self) -> dict[str, float]:
        """The scenario's mapped target metrics (samplers.prom.map), now; {} without them."""
        prom_cfg = self.scenario.samplers.prom
        if prom_cfg is None or self.scenario.bench is None or not self.scenario.bench.counters:
            return {}
        if self._prom is None:
            self._prom = PromSampler(prom_cfg, lambda: self.running)
        try:
            points = self._prom.sample(0)
        except (RuntimeError, OSError) as exc:
            note = f"target counters not read: {exc}"
            if note not in self.notes:  # evidence, once
                self.notes.append(note)
            return {}
        wanted = set(self.scenario.bench.counters)
        out: dict[str, float] = {}
        for p in points:
            if p.measurement == "runtime":
                for k, v in p.fields.items():
                    if k in wanted and isinstance(v, int | float):
                        out[k] = float(v)
        return out

    def environment(self) -> dict[str, Any]:
        """What the target ran on: CPUs it may use, pinning, fd limit, version."""
        cfg = self.scenario.target
        env: dict[str, Any] = {
            "target": cfg.name,
            "version": cfg.version,
            "runtime": cfg.runtime,
        }
        pid = self.pid
        if pid is not None:
            with contextlib.suppress(OSError):
                env["target_cpus"] = sorted(os.sched_getaffinity(pid))
        if self.running is not None:
            env["fd_limit"] = self.running.fd_limit
        for key in ("cpuset", "cpus", "network", "image"):
            value = getattr(cfg, key, None)
            if value is not None:
                env[key] = value
        return env
