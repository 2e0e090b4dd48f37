"""One side of a benchmark: a scenario's helper services and target, started and stopped.

`soak bench` has one side; `soak bench --compare` has two, measured in turns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from soak.config import Scenario
from soak.errors import InputError, TargetStartError
from soak.netsafety import parse_host_port
from soak.targets import build_target
from soak.targets.base import Running, Target
from soak.targets.binding import bind_services, run_setup

log = logging.getLogger(__name__)


class Side:
    def __init__(self, label: str, scenario: Scenario, run_id: str) -> None:
        if scenario.load is None:
            raise InputError(f"{scenario.name}: `soak bench` needs a `load:` section")
        self.label = label
        self.scenario = scenario
        self.run_id = run_id
        self._tmp = tempfile.TemporaryDirectory(prefix=f"soak-bench-{label}-")
        self.run_dir = Path(self._tmp.name)
        self.services: dict[str, Target] = {}
        self.target: Target | None = None
        self.running: Running | None = None
        self.starts = 0
        self.notes: list[str] = []
        self._prom: Any = None

    # ------------------------------------------------------------ lifecycle

    def _build(self, cfg: Any) -> Target:
        return build_target(
            cfg,
            run_dir=self.run_dir,
            run_id=self.run_id,
            base_dir=self.scenario.base_dir,
            allow_targets=tuple(self.scenario.allow_targets),
        )

    def start(self) -> None:
        try:
            for cfg in self.scenario.services:
                svc = self._build(cfg)
                self.services[cfg.name] = svc
                svc.start()
                svc.wait_ready()
            helpers = {n: s.running for n, s in self.services.items() if s.running}
            self.target = self._build(bind_services(self.scenario.target, helpers))
            self.target.start()
            self._ready(first_start=True)
        except BaseException:
            self.stop()
            raise

    def _ready(self, *, first_start: bool) -> None:
        assert self.target is not None
        self.running = self.target.wait_ready()
        run_setup(self.scenario.setup, self.running, first_start=first_start)
        self.starts += 1

    def restart(self) -> None:
        """A fresh target (empty caches); its helper services keep running."""
        assert self.target is not None
        self.target.restart()
        self._ready(first_start=False)

    def check_alive(self) -> None:
        if self.target is not None and (info := self.target.poll()) is not None:
            tail = " | ".join(self.target.log_tail(5))
            raise TargetStartError(
                f"{self.label}: target {info.describe()} during the bench: {tail}"
            )

    def stop(self) -> None:
        for part in [self.target, *self.services.values()]:
            if part is None:
                continue
            try:
                part.stop()
            except Exception as exc:  # stop every part, whatever one of them does; say so
                log.warning("%s: stopping %s failed: %s", self.label, part.name, exc)
        self.target = None
        self.services = {}
        self._remove_volumes()
        self._tmp.cleanup()

    def _remove_volumes(self) -> None:
        """A fresh docker volume is this bench's own: it goes with it (as a soak run's)."""
        configs = [self.scenario.target, *self.scenario.services]
        if not any(c.runtime == "docker" and getattr(c, "volume", None) for c in configs):
            return
        from soak.targets import cleanup_stale

        try:
            cleanup_stale(run_id=self.run_id)
        except Exception as exc:  # the bench still ends; what was left is said
            log.warning("%s: removing the bench's volumes: %s", self.label, exc)

    # ------------------------------------------------------------ what runs measure

    @property
    def pid(self) -> int | None:
        return self.running.pid if self.running is not None else None

    def server(self) -> tuple[str, int]:
        load = self.scenario.load
        assert load is not None
        if load.server:
            return parse_host_port(load.server)
        if self.running is None or "dns" not in self.running.ports:
            raise TargetStartError("load: no `server` given and the target has no `dns` port")
        return self.running.address("dns")

    def counters(self) -> dict[str, float]:
        """The scenario's mapped target metrics (samplers.prom.map), now; {} without them."""
        prom_cfg = self.scenario.samplers.prom
        if prom_cfg is None or self.scenario.bench is None or not self.scenario.bench.counters:
            return {}
        if self._prom is None:
            from soak.samplers.prom import PromSampler

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
