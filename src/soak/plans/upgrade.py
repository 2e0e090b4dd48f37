"""An upgrade, as a plan: what happens when.

data -> start old -> ready -> populate -> snapshot -> stop old -> migrate ->
start new -> ready (time recorded) -> checks -> stop new -> [rollback] -> clean up.

The engine (soak.runs) starts and stops the versions (runs.live_targets) in the run directory
the data directory names; the domain (soak.upgrade) makes the data, runs the steps,
the checks and the migration, and keeps the outcome (upgrade.outcome).

Whatever happens, every started version is stopped, every container of the run is
removed (found again by its labels: one created in the moment of a SIGINT too) and
(unless `keep`) the run directory and a volume made for the run are removed. A
migrate step that fails ends the run with a failed case named after it (exit 1), and
so does the new version failing on the old data (it exits or never gets ready: `new
version starts`, with its log lines) or the old one on the rollback. A plan that
cannot run ends it with `start_error` (exit 2, an error case): a version that cannot
be launched at all (image or binary missing, port taken), the old version failing on
the plan's own data, or a setup step on it (data, populate, snapshot, the load's
start) failing: a pipeline tells "setup broken" from "upgrade broken" by the code.
SIGINT or SIGTERM (Interrupted) ends it with an error case `interrupted` (exit 130 or
143). Every planned case is reported every time (upgrade.cases), the ones not reached
as skipped.
"""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from soak.errors import InputError, TargetStartError
from soak.interrupt import Interrupted
from soak.labels import owner_label
from soak.runs.layout import upgrade_logs_dir, upgrade_migrate_log, upgrade_owner_file
from soak.runs.live_targets import LiveTargets
from soak.targets.specs import DockerTarget, TargetConfig
from soak.upgrade import actions, docker_data
from soak.upgrade.actions import StepFailed, Version
from soak.upgrade.artefacts import keep_logs
from soak.upgrade.cases import ROLLBACK_PREFIX, exact_probes, probe_case_name
from soak.upgrade.checklist import CheckContext, run_checks
from soak.upgrade.config import (
    Migrate,
    PopulateStep,
    Rollback,
    UpgradePlan,
)
from soak.upgrade.data import PlanData, make_data
from soak.upgrade.identity import identify
from soak.upgrade.migrate import MigrateWhere, run_migrate
from soak.upgrade.outcome import Outcome, Show
from soak.upgrade.result import UpgradeResult, describe_step
from soak.upgrade.snapshot import Snapshot
from soak.upgrade.swap import SwapLoadRun
from soak.upgrade.template import Values
from soak.upgrade.versions import (
    VersionFailed,
    answers_enough,
    output_block,
    probe_result,
    reason_of,
    version_cfg,
)


@dataclass
class Started:
    version: Version
    cfg: TargetConfig  # as rendered, with the plan's readiness probes


class UpgradeRun:
    def __init__(
        self,
        plan: UpgradePlan,
        *,
        run_dir: Path,
        run_id: str,
        keep: bool = False,
        env: Mapping[str, str] | None = None,
        show: Show = lambda phase, text: None,
    ) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.run_id = run_id
        self.keep = keep
        self.values = Values(plan.vars, dict(env or {}), plan.secrets)
        self.out = Outcome(plan, self.values, run_dir=run_dir, run_id=run_id, keep=keep, show=show)
        self.result: UpgradeResult = self.out.result
        self.data = PlanData()
        self.targets = LiveTargets(
            run_dir=run_dir,
            run_id=run_id,
            base_dir=plan.base_dir,
            allow_targets=plan.allow_targets,
            labels={docker_data.LABEL_UPGRADE: run_id},
        )
        self._load: SwapLoadRun | None = None
        self._old_ports: dict[str, int] = {}
        # False while the old version is set up (data, populate, snapshot, load): a step
        # failing then is a plan that cannot run (exit 2); from the migration on, the
        # upgrade failing (exit 1).
        self._upgrading = False

    # ---------------------------------------------------------------- the run

    def run(self) -> UpgradeResult:
        """The run to its end; an Interrupted (SIGINT, SIGTERM) stops it where it is,
        and the clean-up runs to its end either way. Whatever ends it is in the result
        (the reports are written from it), an unexpected error too (exit 3)."""
        self.out.begin()
        try:
            try:
                self._claim_run_dir()
                self._run_phases()
            except Interrupted as exc:
                self.out.interrupted(exc)
            except InputError as exc:  # found only when running, e.g. a port a step names
                self.out.cannot_run("plan can run", str(exc), str(exc))
            except Exception as exc:  # a fault of soak or the engine: reported, exit 3
                self.out.internal_error(exc)
        finally:
            try:
                self._tear_down()
            except Interrupted as exc:  # arrived during the clean-up: it starts again
                self.out.interrupted(exc)
                self._tear_down()
        return self.out.finish()

    def _claim_run_dir(self) -> None:
        """The run directory, with its owner: a later run removes it if this process
        was killed outright (unless it is kept)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        owner = owner_label() + (" keep" if self.keep else "")
        upgrade_owner_file(self.run_dir).write_text(owner + "\n")

    def _run_phases(self) -> None:
        plan, out = self.plan, self.out
        snapshot = Snapshot.of(plan.snapshot, plan.base_dir)
        try:
            self._phase("data", "preparing", lambda: make_data(plan, self.values, *self._where()))
            old = self._start("old", plan.old)
            try:
                self._populate(old.version)
                self._phase(
                    "snapshot",
                    f"{len(plan.snapshot)} item(s)",
                    lambda: "; ".join(snapshot.take(self.values, old.version)),
                )
                if plan.load is not None:
                    self._start_load(old.version)
            finally:
                if self._load is not None:
                    self._load.mark_stop()
                self._stop("old")
            self._upgrading = True
            if plan.migrate is not None:
                self._phase("migrate", "running", self._migrate)
            new = self._start("new", plan.new)
            try:
                if self._load is not None:
                    self._finish_load()
                self._probe_cases(new, "")
                swap = self.result.swap
                ctx = CheckContext(self.values, new.version, snapshot, plan.base_dir, swap)
                with out.in_phase("checks"):
                    run_checks(plan.checks, ctx, out.on_check, on_start=out.on_check_start)
            finally:
                self._stop("new")
            if plan.rollback is not None:
                self._rollback(plan.rollback, snapshot)
        except StepFailed as exc:
            name = str(exc).split(":", 1)[0]
            output = output_block(self.values, "last output lines", exc.output_lines)
            if self._upgrading:  # a migration: the upgrade's own answer
                out.abort_checks(name, str(exc), output)
            else:  # the setup on the old version: nothing about the upgrade is known
                out.cannot_run(name, f"setup failed on the old version: {exc}", str(exc), output)
        except VersionFailed as exc:
            output = output_block(self.values, "last log lines", exc.log_lines)
            if exc.side == "new":  # the new version on the old data: the upgrade fails
                out.abort_checks("new version starts", str(exc), output, exc.one_line())
            else:  # the old version on the plan's own data: the plan cannot run
                out.cannot_run(f"{exc.side} version starts", exc.one_line(), str(exc), output)
        except TargetStartError as exc:
            message = str(exc)
            sides = ("old", "new")
            name = next((f"{s} version starts" for s in sides if message.startswith(s)), "data")
            out.cannot_run(name, message, message)

    def _where(self) -> tuple[Path, str, PlanData]:
        return self.run_dir, self.run_id, self.data

    def _phase(self, phase: str, what: str, action: Callable[[], str]) -> None:
        """A step announced as it begins (`what`), shown with its result as it ends."""
        self.out.announce(phase, what)
        start_s = time.monotonic()
        try:
            with self.out.in_phase(phase):
                text = action()
        except StepFailed as exc:
            self.out.show_since(phase, f"FAILED: {exc}", start_s, ok=False)
            raise StepFailed(f"{phase}: {exc}", exc.output_lines) from exc
        self.out.show_since(phase, text, start_s)

    # ---------------------------------------------------------------- versions

    def _start(self, side: str, cfg: TargetConfig) -> Started:
        with self.out.in_phase(f"{side} start"):
            return self._start_version(side, cfg)

    def _start_version(self, side: str, cfg: TargetConfig) -> Started:
        data_dir = self.data.data_dir
        rendered = version_cfg(self.plan, self.values, side, cfg, self._old_ports, data_dir)
        label = f"{rendered.name} {rendered.version}".strip()
        self.out.show(side, f"starting {label}", begins=True)
        start_s = time.monotonic()
        what = f"{side} version ({label}) cannot start: "
        launched = answers_enough(rendered) if side != "old" else rendered
        try:
            target = self.targets.start(side, launched, volume_name=self.data.volume)
        except TargetStartError as exc:  # never launched: the plan cannot run
            raise TargetStartError(what + str(exc)) from exc
        try:
            running = self.targets.wait_ready(side)
        except TargetStartError as exc:  # launched, then exited or never got ready
            reason, full = what + reason_of(str(exc)), what + str(exc)
            raise VersionFailed(side, reason, target.log_tail(), full) from exc
        ready_s = running.ready_after_s
        if side == "old":
            self.result.old_ready_s = ready_s
            self._old_ports = dict(running.ports)
        elif side == "new":
            self.result.new_ready_s = ready_s
        else:
            self.result.rollback_ready_s = ready_s
        ports = ", ".join(f"{k} {running.host}:{v}" for k, v in running.ports.items())
        who = f"pid {running.pid}" if running.pid else f"container {running.container_id}"
        self.out.show_since(side, f"ready in {ready_s or 0:.2f} s ({who}; {ports})", start_s)
        env = dict(getattr(rendered, "env", {}) or {})
        if isinstance(cfg, DockerTarget) and cfg.volume is not None:
            data_dir = Path(cfg.volume.mount)  # docker: the volume's mount point inside
        version = Version(side, running, data_dir, env, list(self.plan.allow_targets))
        ident = identify(side, rendered, version, self.plan.server_version, self.values)
        self.result.versions[side] = ident
        self.out.show(side, ident.describe())
        return Started(version, rendered)

    def _stop(self, side: str) -> None:
        if side not in self.targets:
            return
        start_s = time.monotonic()
        with self.out.in_phase(f"{side} stop"):
            self.out.announce(side, "stopping")
            info = self.targets.stop(side)
        took_s = time.monotonic() - start_s  # one reading: the line and the record agree
        took = f" in {took_s:.2f} s"
        if info is None or info.requested:
            text = (info.describe() if info else "stopped") + took
        else:  # it had ended by itself before soak asked
            text = f"stopped{took} (it had already {info.describe()})"
        self.out.show(side, text, duration_ms=took_s * 1000.0, started_s=start_s)

    def _probe_cases(self, started: Started, prefix: str) -> None:
        """The exact answers the plan's readiness probes ask for, as cases: the version
        is ready when it answers; what it answers is a verdict, not a start failure."""
        running, cfg = started.version.running, started.cfg
        phase = "rollback" if prefix else "check"
        with self.out.in_phase("rollback checks" if prefix else "checks"):
            for probe in exact_probes(cfg):
                result = probe_result(prefix + probe_case_name(probe), probe, running, cfg)
                self.out.on_probe(result, phase, prefix)

    # ---------------------------------------------------------------- load through the swap

    def _start_load(self, version: Version) -> None:
        assert self.plan.load is not None
        load = self._load = SwapLoadRun(
            self.plan.load, self.plan.base_dir, list(self.plan.allow_targets)
        )
        self._phase("load", "starting", lambda: "started: " + load.start(version))

    def _finish_load(self, settle_s: float | None = None) -> None:
        assert self._load is not None
        with self.out.in_phase("load"):
            self.out.announce("load", "stopping")
            stats = self.result.swap = self._load.finish(settle_s)
        self.out.show("load", "stopped: " + stats.describe())

    # ---------------------------------------------------------------- populate, migrate

    def _populate(self, version: Version) -> None:
        total = len(self.plan.populate)
        for i, step in enumerate(self.plan.populate):
            count = f"{i + 1}/{total}"
            what = f"{count} {actions.filled(self.values, version, describe_step(step))}"

            def action(step: PopulateStep = step, what: str = what) -> str:
                done = actions.run_populate_step(step, self.values, version, self.plan.base_dir)
                return f"{what} -> {done}"

            try:
                self._phase("populate", what, action)
            except StepFailed as exc:
                detail = str(exc).removeprefix("populate: ")
                raise StepFailed(f"populate {count}: {detail}") from exc

    def _migrate(self, migrate: Migrate | None = None, direction: str = "up") -> str:
        migrate = migrate or self.plan.migrate
        assert migrate is not None
        where = MigrateWhere(self.run_dir, self.data.data_dir, self.data.volume, self.run_id)
        log_path = upgrade_migrate_log(self.run_dir, direction)
        return run_migrate(migrate, self.values, where, log_path)

    # ---------------------------------------------------------------- rollback

    def _rollback(self, rollback: Rollback, snapshot: Snapshot) -> None:
        """The old version again on the new one's data; its checks named `rollback: ...`.

        A down-migration that fails or an old version that refuses to start is the
        answer to "can we go back?": a failed check saying so, the rest skipped; the
        new version's results stand."""
        refused = self.out.refused_rollback
        if rollback.migrate is not None:
            down = rollback.migrate
            try:
                self._phase("rollback", "down-migrating", lambda: self._migrate(down, "down"))
            except StepFailed as exc:
                output = output_block(self.values, "last output lines", exc.output_lines)
                return refused("migrate", "the down-migration to succeed", str(exc), output)
        try:
            started = self._start("rollback", rollback.old or self.plan.old)
        except TargetStartError as exc:  # launched or not: the way back is closed
            log = exc.log_lines if isinstance(exc, VersionFailed) else []
            output = output_block(self.values, "last log lines", log)
            expected = "the old version to start on the new data"
            return refused("old version starts", expected, str(exc), output)
        try:
            self._probe_cases(started, ROLLBACK_PREFIX)
            ctx = CheckContext(self.values, started.version, snapshot, self.plan.base_dir)
            with self.out.in_phase("rollback checks"):
                run_checks(
                    rollback.checks,
                    ctx,
                    self.out.on_rollback_check,
                    on_start=self.out.on_rollback_check_start,
                )
        finally:
            self._stop("rollback")

    # ---------------------------------------------------------------- clean up

    def _tear_down(self) -> None:
        """Everything the run made goes, whatever it was doing: the load, every version
        still running, every container of the run (by its label), then the volume and
        the run directory unless kept. Safe to run twice. Each part is tried whatever
        the one before did: a fault is shown and recorded (exit 3), and the rest goes."""
        with self.out.in_phase("cleanup"):
            if self._load is not None and self._load.running:  # a run that ended early
                self._cleanup_part("the load", lambda: self._finish_load(settle_s=0.0))
            for side in self.targets.started():
                self._cleanup_part(f"the {side} version", functools.partial(self._stop, side))
            if self.plan.uses_docker:
                self._cleanup_part("the run's containers", self._remove_containers)
            if not self.keep and self.out.failed():
                self._cleanup_part("the logs", self._keep_logs)
            self._remove_run_dir()

    def _keep_logs(self) -> None:
        dest = upgrade_logs_dir(self.run_dir)
        if keep_logs(self.run_dir, dest, self.values.redact):
            self.result.logs_dir = dest
            self.out.show("cleanup", f"kept the failed run's logs in {dest}")

    def _remove_containers(self) -> None:
        removed = docker_data.remove_run(self.run_id, keep_volumes=self.keep)
        if removed:
            self.out.show("cleanup", f"removed {removed} container(s) or volume(s) of the run")

    def _cleanup_part(self, what: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # the next part must still run
            self.out.show("cleanup", f"FAILED to stop or remove {what}: {exc}", ok=False)
            if self.result.internal_error is None:
                self.out.internal_error(exc)

    def _remove_run_dir(self) -> None:
        volume, show = self.data.volume, functools.partial(self.out.show, "cleanup")
        if self.keep:
            return show(f"kept {self.run_dir}" + (f" and volume {volume}" if volume else ""))
        if volume and self.data.made_volume:
            docker_data.remove_volume(volume)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        show(f"removed {self.run_dir}" + (" (some files remain)" if self.run_dir.exists() else ""))
