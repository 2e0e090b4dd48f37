"""The ordered upgrade run.

data -> start old -> ready -> populate -> snapshot -> stop old -> migrate ->
start new -> ready (time recorded) -> checks -> stop new -> clean up.

Whatever happens, every started version is stopped and (unless `keep`) the run
directory and a volume made for the run are removed. A populate, snapshot or
migrate step that fails ends the run with a failed pseudo-check named after it
(exit 1), and so does the new version failing on the old data (it exits or never
gets ready: `new version starts`, with its log lines) or the old one on the
rollback. A plan that cannot run ends it with `start_error` (exit 2): a version
that cannot be launched at all (image or binary missing, port taken), or the old
version failing on the plan's own data.
"""

from __future__ import annotations

import shutil
import tarfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from soak.errors import TargetStartError
from soak.targets import build_target
from soak.targets.base import Target
from soak.targets.config import DockerTarget, ProcessTarget, TargetConfig
from soak.upgrade import actions, docker_data
from soak.upgrade.actions import StepFailed, Version
from soak.upgrade.checks import CheckContext, CheckResult, run_checks, skipped
from soak.upgrade.config import (
    ApiStep,
    CommandStep,
    DnsStep,
    Migrate,
    PopulateStep,
    Rollback,
    UpgradePlan,
)
from soak.upgrade.migrate import MigrateWhere, run_migrate
from soak.upgrade.result import StepRecord, UpgradeResult, describe_step
from soak.upgrade.snapshot import Snapshot
from soak.upgrade.swap import SwapLoadRun
from soak.upgrade.template import Values

Show = Callable[[str, str], None]  # phase, text


class VersionFailed(TargetStartError):
    """A version that was launched and then exited or never got ready, with its log."""

    def __init__(self, message: str, log_lines: list[str]) -> None:
        super().__init__(message)
        self.log_lines = log_lines


def _log_block(values: Values, lines: list[str] | None) -> str:
    """The version's last log lines, one a line, for the failed case's body."""
    if not lines:
        return ""
    return "\nlast log lines:\n" + "\n".join(values.redact(ln.rstrip()) for ln in lines)


class UpgradeRunner:
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
        self._show = show
        self.data_dir: Path | None = None
        self.volume: str | None = None
        self._made_volume = False
        self._load: SwapLoadRun | None = None
        self._old_ports: dict[str, int] = {}
        self.result = UpgradeResult(
            plan.name, run_id, run_dir, keep, datetime.now(UTC).isoformat(timespec="seconds")
        )

    # ---------------------------------------------------------------- output

    def show(self, phase: str, text: str, ok: bool = True, duration_ms: float = 0.0) -> None:
        text = self.values.redact(text)
        self.result.steps.append(StepRecord(phase, text, ok, duration_ms))
        self._show(phase, text)

    # ---------------------------------------------------------------- the run

    def run(self) -> UpgradeResult:
        start_s = time.monotonic()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._run_phases()
        finally:
            if self._load is not None and self._load.running:  # a run that ended early
                self._finish_load(settle_s=0.0)
            self._clean_up()
            self.result.duration_s = time.monotonic() - start_s
        return self.result

    def _run_phases(self) -> None:
        snapshot = Snapshot.of(self.plan.snapshot, self.plan.base_dir)
        try:
            self._prepare_data()
            old = self._start("old", self.plan.old)
            try:
                self._populate(old.version)
                self._phase("snapshot", lambda: "; ".join(snapshot.take(self.values, old.version)))
                if self.plan.load is not None:
                    self._start_load(old.version)
            finally:
                if self._load is not None:
                    self._load.mark_stop()
                self._stop("old", old.target)
            if self.plan.migrate is not None:
                self._phase("migrate", self._migrate)
            new = self._start("new", self.plan.new)
            try:
                if self._load is not None:
                    self._finish_load()
                ctx = CheckContext(
                    self.values, new.version, snapshot, self.plan.base_dir, self.result.swap
                )
                self.result.checks = run_checks(self.plan.checks, ctx, self._on_check)
            finally:
                self._stop("new", new.target)
            if self.plan.rollback is not None:
                self.result.checks += self._rollback(self.plan.rollback, snapshot)
        except StepFailed as exc:
            self._abort_checks(str(exc).split(":", 1)[0], str(exc))
        except VersionFailed as exc:  # the new version on the old data: the upgrade fails
            self._abort_checks("new version starts", str(exc), exc.log_lines)
        except TargetStartError as exc:
            message = self.result.start_error = self.values.redact(str(exc))
            sides = ("old", "new")
            name = next((f"{s} version starts" for s in sides if message.startswith(s)), "data")
            self._abort_checks(name, message)

    def _phase(self, phase: str, action: Callable[[], str]) -> None:
        start_s = time.monotonic()
        try:
            text = action()
        except StepFailed as exc:
            ms = (time.monotonic() - start_s) * 1000.0
            self.show(phase, f"FAILED: {exc}", ok=False, duration_ms=ms)
            raise StepFailed(f"{phase}: {exc}") from exc
        self.show(phase, text, duration_ms=(time.monotonic() - start_s) * 1000.0)

    def _abort_checks(self, name: str, reason: str, log_lines: list[str] | None = None) -> None:
        """The checks were not reached: one failed case for the cause, the rest skipped."""
        reason = self.values.redact(reason)
        got = reason + _log_block(self.values, log_lines)
        cause = CheckResult(name, "setup", "fail", 0.0, "the run to reach its checks", got)
        self.result.checks = [cause] + [
            skipped(c, f"not run: {name} failed") for c in self.plan.checks
        ]
        self.show("abort", reason, ok=False)

    def _on_check(self, index: int, result: CheckResult, phase: str = "check") -> None:
        checks = self.plan.rollback.checks if phase == "rollback" and self.plan.rollback else []
        total = len(checks or self.plan.checks)
        word = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}[result.status]
        detail = "" if result.status == "pass" else f" - {result.message}"
        self.show(
            phase,
            f"{index + 1}/{total} {word} {result.name}{detail}",
            ok=result.status != "fail",
            duration_ms=result.duration_ms,
        )

    # ---------------------------------------------------------------- data

    def _prepare_data(self) -> None:
        data = self.plan.data
        if isinstance(self.plan.old, DockerTarget):
            self.volume = data.volume or f"soak-upgrade-{self.run_id}"
            self._made_volume = docker_data.ensure_volume(self.volume, self.run_id)
            image = self.values.render(self.plan.old.image)  # may be a {{var}}
            mount = self.plan.old.volume.mount if self.plan.old.volume else "/data"
            if data.archive:
                docker_data.extract_into_volume(
                    self.plan.resolve_path(data.archive), self.volume, image, mount
                )
            if data.owner:
                docker_data.chown_volume(self.volume, image, mount, data.owner)
            what = "fresh" if self._made_volume else "existing"
            self.show("data", f"{what} volume {self.volume}" + self._archive_words())
            return
        self.data_dir = self.run_dir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if data.archive:
            with tarfile.open(self.plan.resolve_path(data.archive)) as tar:
                tar.extractall(self.data_dir, filter="data")
        self.show("data", f"{self.data_dir}" + self._archive_words())

    def _archive_words(self) -> str:
        archive = self.plan.data.archive
        return f" <- archive {self.plan.resolve_path(archive)} (read only)" if archive else ""

    # ---------------------------------------------------------------- versions

    @dataclass
    class Started:
        target: Target
        version: Version

    def _target_cfg(self, side: str, cfg: TargetConfig) -> TargetConfig:
        raw: dict[str, Any] = self.values.render(cfg.model_dump(by_alias=True, exclude_unset=True))
        if side == "new" and self.plan.load is not None:
            # The load keeps its address: new listens where old did.
            for name, port in raw.get("ports", {}).items():
                if name in self._old_ports and port.get("host") is None:
                    port["host"] = self._old_ports[name]
        if isinstance(cfg, ProcessTarget):
            raw["data_dir"] = str(self.data_dir)
        if isinstance(cfg, DockerTarget) and cfg.volume is None:
            raise TargetStartError(f"{side}: a docker version needs `volume:` for its data")
        adapter: TypeAdapter[TargetConfig] = TypeAdapter(TargetConfig)
        return adapter.validate_python(raw)

    def _start(self, side: str, cfg: TargetConfig) -> Started:
        rendered = self._target_cfg(side, cfg)
        label = f"{rendered.name} {rendered.version}".strip()
        self.show(side, f"starting {label}")
        target = build_target(
            rendered,
            run_dir=self.run_dir / side,
            run_id=f"{self.run_id}-{side}",
            base_dir=self.plan.base_dir,
            volume_name=self.volume,
            allow_targets=self.plan.allow_targets,
        )
        try:
            target.start()
        except TargetStartError as exc:  # never launched: the plan cannot run
            raise TargetStartError(f"{side} version ({label}) cannot start: {exc}") from exc
        try:
            running = target.wait_ready()
        except TargetStartError as exc:  # launched, then exited or never got ready
            message = f"{side} version ({label}) cannot start: {exc}"
            if side == "old":  # on the plan's own data: the plan cannot run
                raise TargetStartError(message) from exc
            raise VersionFailed(message, target.log_tail()) from exc
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
        self.show(side, f"ready in {ready_s or 0:.2f} s ({who}; {ports})")
        env = dict(getattr(rendered, "env", {}) or {})
        data_dir = self.data_dir  # docker: the volume's mount point inside the container
        if isinstance(rendered, DockerTarget) and rendered.volume is not None:
            data_dir = Path(rendered.volume.mount)
        version = Version(side, running, data_dir, env, list(self.plan.allow_targets))
        return self.Started(target, version)

    def _stop(self, side: str, target: Target) -> None:
        info = target.stop()
        if info is None or info.requested:
            self.show(side, info.describe() if info else "stopped")
        else:  # it had ended by itself before soak asked
            self.show(side, f"stopped (it had already {info.describe()})")

    # ---------------------------------------------------------------- load through the swap

    def _start_load(self, version: Version) -> None:
        assert self.plan.load is not None
        load = self._load = SwapLoadRun(
            self.plan.load, self.plan.base_dir, list(self.plan.allow_targets)
        )
        self._phase("load", lambda: "started: " + load.start(version))

    def _finish_load(self, settle_s: float | None = None) -> None:
        assert self._load is not None
        stats = self.result.swap = self._load.finish(settle_s)
        self.show("load", "stopped: " + stats.describe())

    # ---------------------------------------------------------------- populate, migrate

    def _populate(self, version: Version) -> None:
        total = len(self.plan.populate)
        for i, step in enumerate(self.plan.populate):
            count = f"{i + 1}/{total}"

            def action(step: PopulateStep = step, count: str = count) -> str:
                return f"{count} {describe_step(step)} -> {self._run_step(step, version)}"

            try:
                self._phase("populate", action)
            except StepFailed as exc:
                detail = str(exc).removeprefix("populate: ")
                raise StepFailed(f"populate {count}: {detail}") from exc

    def _run_step(self, step: PopulateStep, version: Version) -> str:
        if isinstance(step, ApiStep):
            return actions.run_api_step(step, self.values, version)
        if isinstance(step, DnsStep):
            return actions.run_dns_step(step, self.values, version, self.plan.base_dir)
        if isinstance(step, CommandStep):
            return actions.run_command_step(step, self.values, version)
        return actions.run_wait_step(step, version)

    def _migrate(self, migrate: Migrate | None = None, log_name: str = "migrate.log") -> str:
        migrate = migrate or self.plan.migrate
        assert migrate is not None
        where = MigrateWhere(self.run_dir, self.data_dir, self.volume, self.run_id)
        return run_migrate(migrate, self.values, where, log_name)

    # ---------------------------------------------------------------- rollback

    def _rollback(self, rollback: Rollback, snapshot: Snapshot) -> list[CheckResult]:
        """The old version again on the new one's data; its checks named `rollback: ...`.

        A down-migration that fails or an old version that refuses to start is the
        answer to "can we go back?": a failed check saying so, the rest skipped; the
        new version's results stand."""

        def named(results: list[CheckResult]) -> list[CheckResult]:
            return [replace(r, name=f"rollback: {r.name}") for r in results]

        def refused(name: str, expected: str, why: str) -> list[CheckResult]:
            why = self.values.redact(why)
            self.show("rollback", f"FAILED: {why}", ok=False)
            cause = CheckResult(f"rollback: {name}", "setup", "fail", 0.0, expected, why)
            rest = [skipped(c, f"not run: {name} failed") for c in rollback.checks]
            return [cause, *named(rest)]

        if rollback.migrate is not None:
            down = rollback.migrate
            try:
                self._phase("rollback", lambda: self._migrate(down, "rollback-migrate.log"))
            except StepFailed as exc:
                return refused("migrate", "the down-migration to succeed", str(exc))
        try:
            started = self._start("rollback", rollback.old or self.plan.old)
        except TargetStartError as exc:  # launched or not: the way back is closed
            lines = exc.log_lines if isinstance(exc, VersionFailed) else []
            why = str(exc) + _log_block(self.values, lines)
            return refused("old version starts", "the old version to start on the new data", why)
        try:
            ctx = CheckContext(self.values, started.version, snapshot, self.plan.base_dir)

            def on_result(index: int, result: CheckResult) -> None:
                self._on_check(index, result, "rollback")

            return named(run_checks(rollback.checks, ctx, on_result))
        finally:
            self._stop("rollback", started.target)

    # ---------------------------------------------------------------- clean up

    def _clean_up(self) -> None:
        if self.keep:
            volume = f" and volume {self.volume}" if self.volume else ""
            self.show("cleanup", f"kept {self.run_dir}{volume}")
            return
        if self.volume and self._made_volume:
            docker_data.remove_volume(self.volume)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        leftover = self.run_dir.exists()
        self.show(
            "cleanup", f"removed {self.run_dir}" + (" (some files remain)" if leftover else "")
        )
