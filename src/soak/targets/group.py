"""A target and its helper services as one lifecycle: the helpers start (in order) and
are waited for, their ports are bound into the target's config, the target starts and
is waited for, the setup calls go to it; at the end everything stops and the fresh
docker volumes go. A soak run and a bench side both drive one TargetGroup.

What happens on the way (a helper ready, start-up figures, warnings, a part that would
not stop) is told to `on_event(kind, message, value)`; the caller records or logs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from soak.errors import TargetStartError
from soak.netsafety import parse_host_port
from soak.targets import build_target, cleanup_stale
from soak.targets.base import ExitInfo, FilePaths, Running, Target
from soak.targets.binding import bind_services, run_setup
from soak.targets.process import ProcessRuntime
from soak.targets.specs import DockerTarget, ProcessTarget, SetupCall, TargetConfig
from soak.targets.version import detect_version

OnEvent = Callable[[str, str, float], None]


def _ignore(kind: str, message: str, value: float) -> None:
    return None


def load_address(server: str | None, running: Running | None) -> tuple[str, int]:
    """Where the load goes: the load's own `server` if given, else the target's `dns` port."""
    if server:
        return parse_host_port(server)
    if running is None or "dns" not in running.ports:
        raise TargetStartError("load: no `server` given and the target has no `dns` port")
    return running.address("dns")


class TargetGroup:
    def __init__(
        self,
        target: TargetConfig,
        helpers: Sequence[TargetConfig],
        setup: Sequence[SetupCall],
        *,
        files: FilePaths,
        run_id: str,
        base_dir: Path,
        allow_targets: Sequence[str] = (),
        on_event: OnEvent = _ignore,
        resumable_in: Path | None = None,
        load_connections: int | None = None,
    ) -> None:
        """`resumable_in`: see build_target (a service's runs outlive a service restart);
        `load_connections`: what the run's load holds open to the target (a warning when its
        open-files limit is below that need; None: no load, no warning)."""
        self.load_connections = load_connections
        self.target_cfg = target
        self.resumable_in = resumable_in
        self.helper_cfgs = {cfg.name: cfg for cfg in helpers}
        self.setup = list(setup)
        self.files = files
        self.run_id = run_id
        self.base_dir = base_dir
        self.allow_targets = tuple(allow_targets)
        self.on_event = on_event
        self.target: Target | None = None
        self.helpers: dict[str, Target] = {}
        self.running: Running | None = None  # the target's, once started or attached
        self._warned: set[str] = set()

    def _build(self, cfg: TargetConfig) -> Target:
        return build_target(
            cfg,
            files=self.files,
            run_id=self.run_id,
            base_dir=self.base_dir,
            allow_targets=self.allow_targets,
            resumable_in=self.resumable_in,
        )

    def _bound_target(self) -> Target:
        ready = {name: h.running for name, h in self.helpers.items() if h.running}
        target = self._build(bind_services(self.target_cfg, ready))
        target.load_connections = self.load_connections
        return target

    def start(self) -> Running:
        """Helpers, then the target, each ready; the setup calls sent. A failure raises and
        leaves what started for `stop()`."""
        for name, cfg in self.helper_cfgs.items():
            helper = self._build(cfg)
            self.helpers[name] = helper
            helper.start()
            running = helper.wait_ready()
            self.on_event("service_ready", f"helper {name} ready", running.ready_after_s or 0.0)
        self.target = self._bound_target()
        self.running = self.target.start()
        self.on_event("started", f"target {self.target.name} started", 0.0)
        return self.ready(first_start=True)

    def attach(self, state: dict[str, Any]) -> Running:
        """Re-attach to a group an earlier process started, from its `state()`."""
        for name, cfg in self.helper_cfgs.items():
            helper = self._build(cfg)
            self.helpers[name] = helper
            helper.attach(state.get("services", {}).get(name, {}))
        self.target = self._bound_target()
        self.running = self.target.attach(state.get("target", {}))
        self.on_event("attached", f"target {self.target.name} re-attached", 0.0)
        return self.running

    def ready(self, *, first_start: bool) -> Running:
        """Wait until the target is ready, tell its figures, send the setup calls."""
        assert self.target is not None
        self.running = self.target.wait_ready()
        ready_s = self.running.ready_after_s or 0.0
        self.on_event("ready", f"target ready after {ready_s:.2f} s", ready_s)
        if first_start:
            self._tell_version()
        for name, seconds in self.running.conditions_s.items():
            self.on_event("condition", f"{name} after {seconds:.2f} s", seconds)
        for warning in self.running.warnings:
            if warning not in self._warned:  # a restart repeats them; once is evidence
                self._warned.add(warning)
                self.on_event("warning", warning, 0.0)
        calls = run_setup(self.setup, self.running, first_start=first_start, base_dir=self.base_dir)
        for line in calls:
            self.on_event("setup", line, 0.0)
        return self.running

    def _tell_version(self) -> None:
        """The version the target reports, as a `version` event (a failure: a warning)."""
        try:
            version = detect_version(self.target_cfg)
        except Exception as exc:  # the run goes on; the failure is evidence
            self.on_event("warning", f"could not read the target's version: {exc}", 0.0)
            return
        if version:
            self.on_event("version", version, 0.0)

    def restart_target(self) -> Running:
        """A fresh target process or container (same ports and data); helpers keep running."""
        assert self.target is not None
        self.running = self.target.restart()
        return self.ready(first_start=False)

    def swap_target(
        self,
        cfg: TargetConfig,
        between: Callable[[], object],
        started: Callable[[], object] = lambda: None,
    ) -> Running:
        """The target stopped, `between` run (a migration), then `cfg` (a new version of
        it: a process's argv and env, a docker target's image, command and environment)
        started in its place on the same ports and data (a process's data directory, a
        docker target's volume: a new container on it), and ready; `started` is told once
        the new version runs (before it is ready). Raises as restart_target does; a failed
        `between` leaves it stopped."""
        target, old = self.target, self.running
        docker = isinstance(cfg, DockerTarget) and old is not None and old.volume is not None
        if target is None or old is None or not (isinstance(target, ProcessRuntime) or docker):
            raise TargetStartError("a swap needs a process target, or a docker one with a volume")
        target.stop()
        between()
        self.target_cfg = cfg
        ready = {name: h.running for name, h in self.helpers.items() if h.running}
        bound = bind_services(cfg, ready)
        if isinstance(target, ProcessRuntime) and isinstance(bound, ProcessTarget):
            target.cfg = bound
            self.running = target.restart()
        else:  # a new container on the old one's volume and host ports
            pinned = {
                name: port.model_copy(update={"host": port.host or old.ports.get(name)})
                for name, port in bound.ports.items()
            }
            new = build_target(
                bound.model_copy(update={"ports": pinned}),
                files=self.files,
                run_id=self.run_id,
                base_dir=self.base_dir,
                volume_name=old.volume,
                allow_targets=self.allow_targets,
                resumable_in=self.resumable_in,
            )
            new.load_connections = self.load_connections
            self.target = new
            self.running = new.start()
        started()
        running = self.ready(first_start=False)  # its data has what the setup made
        self._tell_version()
        return running

    def poll_target(self) -> ExitInfo | None:
        return self.target.poll() if self.target is not None else None

    def restart_helper(self, name: str) -> None:
        helper = self.helpers[name]
        helper.restart()
        helper.wait_ready()

    def state(self) -> dict[str, Any]:
        """JSON-safe: what `attach()` needs to find the same processes or containers."""
        return {
            "target": self.running.to_state() if self.running is not None else {},
            "services": {
                name: h.running.to_state()
                for name, h in self.helpers.items()
                if h.running is not None
            },
        }

    def stop(self) -> None:
        """The target, then the helpers; every part is stopped whatever one does."""
        parts = [("target", self.target), *self.helpers.items()]
        self.target, self.helpers = None, {}
        for name, part in parts:
            if part is None:
                continue
            try:
                part.stop()
            except Exception as exc:
                self.on_event("error", f"stopping {name}: {exc}", 0.0)
        self._remove_volumes()

    def _remove_volumes(self) -> None:
        """A fresh volume is the group's own: it goes with it (a volume the config names is
        not labelled with the run, so it stays for the next one)."""
        configs = [self.target_cfg, *self.helper_cfgs.values()]
        if not any(isinstance(c, DockerTarget) and c.volume is not None for c in configs):
            return
        try:
            removed = cleanup_stale(run_id=self.run_id)
        except Exception as exc:  # the end goes on; what was left is said
            self.on_event("error", f"removing the run's volumes: {exc}", 0.0)
            return
        if removed:
            self.on_event(
                "cleanup", f"removed {removed} container(s)/volume(s) of the run", removed
            )
