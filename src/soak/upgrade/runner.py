"""The ordered upgrade run.

data -> start old -> ready -> populate -> snapshot -> stop old -> migrate ->
start new -> ready (time recorded) -> checks -> stop new -> clean up.

Whatever happens, every started version is stopped, every container of the run is
removed (found again by its labels: one created in the moment of a SIGINT too) and
(unless `keep`) the run directory and a volume made for the run are removed. A
populate, snapshot or migrate step that fails ends the run with a failed case named
after it (exit 1), and so does the new version failing on the old data (it exits or
never gets ready: `new version starts`, with its log lines) or the old one on the
rollback. A plan that cannot run ends it with `start_error` (exit 2, an error case):
a version that cannot be launched at all (image or binary missing, port taken), or
the old version failing on the plan's own data. SIGINT or SIGTERM (Interrupted)
ends it with an error case `interrupted` (exit 130 or 143). Every planned case is
reported every time (cases.py), the ones not reached as skipped.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import tarfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from soak.errors import InputError, TargetStartError
from soak.runs.layout import (
    TargetFiles,
    targets_dir,
    upgrade_data_dir,
    upgrade_migrate_log,
    upgrade_owner_file,
)
from soak.targets import build_target
from soak.targets.base import Target
from soak.targets.config import DockerTarget, ProcessTarget, TargetConfig
from soak.upgrade import actions, docker_data
from soak.upgrade.actions import StepFailed, Version
from soak.upgrade.cases import (
    ROLLBACK_PREFIX,
    CaseBook,
    Section,
    cannot_run_case,
    exact_probes,
    interrupted_case,
    planned_cases,
    probe_case_name,
)
from soak.upgrade.checks import CheckContext, CheckResult, run_checks
from soak.upgrade.config import (
    ApiStep,
    CommandStep,
    DnsStep,
    Migrate,
    PopulateStep,
    Rollback,
    UpgradePlan,
)
from soak.upgrade.interrupt import Interrupted
from soak.upgrade.migrate import MigrateWhere, run_migrate
from soak.upgrade.result import StepRecord, UpgradeResult, describe_step
from soak.upgrade.snapshot import Snapshot
from soak.upgrade.swap import SwapLoadRun
from soak.upgrade.template import Values
from soak.upgrade.versions import (
    VersionFailed,
    answers_enough,
    output_block,
    probe_result,
    reason_of,
)

Show = Callable[[str, str], None]  # phase, text


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
        self._live: dict[str, Target] = {}  # side -> a target started and not yet stopped
        self._phase_now = "data"  # what the run was doing, for an interruption
        self._start_s = time.monotonic()
        self.cases = CaseBook(planned_cases(plan))
        self.result = UpgradeResult(
            plan.name, run_id, run_dir, keep, datetime.now(UTC).isoformat(timespec="seconds")
        )

    # ---------------------------------------------------------------- output

    def show(
        self,
        phase: str,
        text: str,
        ok: bool = True,
        duration_ms: float = 0.0,
        started_s: float | None = None,
    ) -> None:
        """A step as it happened; `started_s` (monotonic) when it began, default now."""
        text = self.values.redact(text)
        began = time.monotonic() - duration_ms / 1000.0 if started_s is None else started_s
        offset_s = max(0.0, began - self._start_s)
        self.result.steps.append(StepRecord(phase, text, ok, duration_ms, offset_s))
        self._show(phase, text)

    def _show_since(self, phase: str, text: str, start_s: float, ok: bool = True) -> None:
        """A step that began at `start_s` (monotonic) and ends now."""
        ms = (time.monotonic() - start_s) * 1000.0
        self.show(phase, text, ok=ok, duration_ms=ms, started_s=start_s)

    @contextlib.contextmanager
    def _in(self, phase: str) -> Iterator[None]:
        """The run is in `phase`; an interruption going through is told so (the
        innermost phase names it: a stop in a `finally` does not hide what it ended)."""
        self._phase_now = phase
        try:
            yield
        except Interrupted as exc:
            exc.phase = exc.phase or phase
            raise

    # ---------------------------------------------------------------- the run

    def run(self) -> UpgradeResult:
        """The run to its end; an Interrupted (SIGINT, SIGTERM) stops it where it is,
        and the clean-up runs to its end either way. Whatever ends it is in the result
        (the reports are written from it), an unexpected error too (exit 3)."""
        self._start_s = time.monotonic()
        try:
            try:
                self._prepare_run_dir()
                self._run_phases()
            except Interrupted as exc:
                self._interrupted(exc)
            except InputError as exc:  # found only when running, e.g. a port a step names
                self._cannot_run("plan can run", str(exc), str(exc))
            except Exception as exc:  # a fault of soak or the engine: reported, exit 3
                self._internal_error(exc)
        finally:
            try:
                self._tear_down()
            except Interrupted as exc:  # arrived during the clean-up: it starts again
                self._interrupted(exc)
                self._tear_down()
            self.result.checks = self.cases.assemble()
            self.result.duration_s = time.monotonic() - self._start_s
        return self.result

    def _prepare_run_dir(self) -> None:
        """The run directory, with its owner: a later run removes it if this process
        was killed outright (unless it is kept)."""
        from soak.targets.docker_engine import owner_label

        self.run_dir.mkdir(parents=True, exist_ok=True)
        owner = owner_label() + (" keep" if self.keep else "")
        upgrade_owner_file(self.run_dir).write_text(owner + "\n")

    def _run_phases(self) -> None:
        snapshot = Snapshot.of(self.plan.snapshot, self.plan.base_dir)
        try:
            with self._in("data"):
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
                self._stop("old")
            if self.plan.migrate is not None:
                self._phase("migrate", self._migrate)
            new = self._start("new", self.plan.new)
            try:
                if self._load is not None:
                    self._finish_load()
                self._probe_cases(new, "")
                ctx = CheckContext(
                    self.values, new.version, snapshot, self.plan.base_dir, self.result.swap
                )
                with self._in("checks"):
                    run_checks(self.plan.checks, ctx, self._on_check)
            finally:
                self._stop("new")
            if self.plan.rollback is not None:
                self._rollback(self.plan.rollback, snapshot)
        except StepFailed as exc:
            name = str(exc).split(":", 1)[0]
            self._abort_checks(
                name, str(exc), output_block(self.values, "last output lines", exc.output_lines)
            )
        except VersionFailed as exc:
            output = output_block(self.values, "last log lines", exc.log_lines)
            if exc.side == "new":  # the new version on the old data: the upgrade fails
                self._abort_checks("new version starts", str(exc), output, exc.one_line())
            else:  # the old version on the plan's own data: the plan cannot run
                self._cannot_run(f"{exc.side} version starts", exc.one_line(), str(exc), output)
        except TargetStartError as exc:
            message = str(exc)
            sides = ("old", "new")
            name = next((f"{s} version starts" for s in sides if message.startswith(s)), "data")
            self._cannot_run(name, message, message)

    def _phase(self, phase: str, action: Callable[[], str]) -> None:
        start_s = time.monotonic()
        try:
            with self._in(phase):
                text = action()
        except StepFailed as exc:
            self._show_since(phase, f"FAILED: {exc}", start_s, ok=False)
            raise StepFailed(f"{phase}: {exc}", exc.output_lines) from exc
        self._show_since(phase, text, start_s)

    def _abort_checks(self, name: str, reason: str, output: str = "", shown: str = "") -> None:
        """The checks were not reached: one failed case for the cause, the rest skipped;
        `shown` on the terminal (default the reason)."""
        reason = self.values.redact(reason)
        cause = CheckResult(name, "setup", "fail", 0.0, "the run to reach its checks", reason)
        cause.output = output
        self.cases.cause("upgrade", cause, f"not run: {name} failed")
        self.show("abort", shown or reason, ok=False)

    def _cannot_run(self, name: str, one_line: str, reason: str, output: str = "") -> None:
        """The plan cannot run (exit 2): an error case, every other case skipped."""
        self.result.start_error = self.values.redact(one_line)
        reason = self.values.redact(reason)
        cause = cannot_run_case(name, reason)
        cause.output = output
        self.cases.cause("upgrade", cause, f"not run: {name} failed")
        self.show("abort", one_line, ok=False)

    def _internal_error(self, exc: Exception) -> None:
        message = self.values.redact(f"{type(exc).__name__}: {exc}")
        self.result.internal_error = message
        cause = CheckResult("internal error", "internal", "error", 0.0, "the run to end", message)
        cause.output = self.values.redact("".join(traceback.format_exception(exc)))
        self.cases.cause("upgrade", cause, "not run: internal error")
        self.show("abort", f"internal error: {message}", ok=False)

    def _interrupted(self, exc: Interrupted) -> None:
        """An error case saying where the signal came; what did not run is skipped."""
        if self.result.interrupted is not None:
            return
        self.result.interrupted = exc.signal_name
        where = exc.phase or self._phase_now
        reason = f"{exc.signal_name} during {where}: the run was stopped and cleaned up"
        section: Section = "rollback" if where.startswith("rollback") else "upgrade"
        cause = interrupted_case(reason)
        self.cases.causes[section].append(cause)
        self.cases.stop_all(f"not run: interrupted by {exc.signal_name}")
        self.show("abort", reason, ok=False)

    def _on_check(self, index: int, result: CheckResult, phase: str = "check") -> None:
        checks = self.plan.rollback.checks if phase == "rollback" and self.plan.rollback else []
        total = len(checks or self.plan.checks)
        if phase == "rollback":
            result = replace(result, name=ROLLBACK_PREFIX + result.name)
        self.cases.record(result)
        word = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "error": "ERROR"}[result.status]
        detail = "" if result.status == "pass" else f" - {result.message}"
        shown = result.name.removeprefix(ROLLBACK_PREFIX)
        self.show(
            phase,
            f"{index + 1}/{total} {word} {shown}{detail}",
            ok=result.status != "fail",
            duration_ms=result.duration_ms,
        )

    # ---------------------------------------------------------------- data

    def _prepare_data(self) -> None:
        start_s = time.monotonic()
        self._show_since("data", self._make_data(), start_s)

    def _make_data(self) -> str:
        """The plan's data made (a volume, or a directory here); what was made."""
        data = self.plan.data
        if not self.plan.data_on_host:  # every version a docker one: a named volume
            assert isinstance(self.plan.old, DockerTarget)
            self.volume = data.volume or f"soak-upgrade-{self.run_id}"
            self._made_volume = docker_data.ensure_volume(self.volume, self.run_id)
            image = self.values.render(self.plan.old.image)  # may be a {{var}}
            mount = self.plan.old.volume.mount if self.plan.old.volume else "/data"
            if data.archive:
                docker_data.extract_into_volume(
                    self.plan.resolve_path(data.archive), self.volume, image, mount, self.run_id
                )
            if data.owner:
                docker_data.chown_volume(self.volume, image, mount, data.owner, self.run_id)
            what = "fresh" if self._made_volume else "existing"
            return f"{what} volume {self.volume}" + self._archive_words()
        self.data_dir = upgrade_data_dir(self.run_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if data.archive:
            with tarfile.open(self.plan.resolve_path(data.archive)) as tar:
                tar.extractall(self.data_dir, filter="data")
        old = self.plan.old
        if data.owner and isinstance(old, DockerTarget) and old.volume is not None:
            image = self.values.render(old.image)  # the owner's names as the image has them
            owner, mount, run_id = data.owner, old.volume.mount, self.run_id
            docker_data.chown_volume(str(self.data_dir), image, mount, owner, run_id)
        return f"{self.data_dir}" + self._archive_words()

    def _archive_words(self) -> str:
        archive = self.plan.data.archive
        return f" <- archive {self.plan.resolve_path(archive)} (read only)" if archive else ""

    # ---------------------------------------------------------------- versions

    @dataclass
    class Started:
        target: Target
        version: Version
        cfg: TargetConfig  # as rendered, with the plan's readiness probes

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
        if isinstance(cfg, DockerTarget) and cfg.volume is not None and self.data_dir:
            # A plan with a process version too: the host directory at the volume's mount.
            mount = {"source": str(self.data_dir), "target": cfg.volume.mount}
            raw["mounts"] = [*raw.get("mounts", []), mount]
            raw["volume"] = None
        adapter: TypeAdapter[TargetConfig] = TypeAdapter(TargetConfig)
        return adapter.validate_python(raw)

    def _start(self, side: str, cfg: TargetConfig) -> Started:
        with self._in(f"{side} start"):
            return self._start_version(side, cfg)

    def _start_version(self, side: str, cfg: TargetConfig) -> Started:
        rendered = self._target_cfg(side, cfg)
        label = f"{rendered.name} {rendered.version}".strip()
        self.show(side, f"starting {label}")
        start_s = time.monotonic()
        target = build_target(
            answers_enough(rendered) if side != "old" else rendered,
            files=TargetFiles(targets_dir(self.run_dir, side)),
            run_id=f"{self.run_id}-{side}",
            base_dir=self.plan.base_dir,
            volume_name=self.volume,
            allow_targets=self.plan.allow_targets,
            labels={docker_data.LABEL_UPGRADE: self.run_id},
        )
        self._live[side] = target  # before start: an interruption in start() stops it too
        try:
            target.start()
        except TargetStartError as exc:  # never launched: the plan cannot run
            self._live.pop(side, None)
            raise TargetStartError(f"{side} version ({label}) cannot start: {exc}") from exc
        try:
            running = target.wait_ready()
        except TargetStartError as exc:  # launched, then exited or never got ready
            self._live.pop(side, None)
            what = f"{side} version ({label}) cannot start: "
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
        self._show_since(side, f"ready in {ready_s or 0:.2f} s ({who}; {ports})", start_s)
        env = dict(getattr(rendered, "env", {}) or {})
        data_dir = self.data_dir  # docker: the volume's mount point inside the container
        if isinstance(cfg, DockerTarget) and cfg.volume is not None:
            data_dir = Path(cfg.volume.mount)
        version = Version(side, running, data_dir, env, list(self.plan.allow_targets))
        return self.Started(target, version, rendered)

    def _stop(self, side: str) -> None:
        target = self._live.get(side)
        if target is None:
            return
        start_s = time.monotonic()
        with self._in(f"{side} stop"):
            info = target.stop()
        self._live.pop(side, None)
        took_s = time.monotonic() - start_s  # one reading: the line and the record agree
        took = f" in {took_s:.2f} s"
        if info is None or info.requested:
            text = (info.describe() if info else "stopped") + took
        else:  # it had ended by itself before soak asked
            text = f"stopped{took} (it had already {info.describe()})"
        self.show(side, text, duration_ms=took_s * 1000.0, started_s=start_s)

    def _probe_cases(self, started: Started, prefix: str) -> None:
        """The exact answers the plan's readiness probes ask for, as cases: the version
        is ready when it answers; what it answers is a verdict, not a start failure."""
        running, cfg = started.version.running, started.cfg
        phase = "rollback" if prefix else "check"
        with self._in("rollback checks" if prefix else "checks"):
            for probe in exact_probes(cfg):
                result = probe_result(prefix + probe_case_name(probe), probe, running, cfg)
                self.cases.record(result)
                word = "PASS" if result.status == "pass" else "FAIL"
                detail = "" if result.status == "pass" else f" - {result.message}"
                self.show(
                    phase,
                    f"{word} {result.name.removeprefix(prefix)}{detail}",
                    ok=result.status == "pass",
                    duration_ms=result.duration_ms,
                )

    # ---------------------------------------------------------------- load through the swap

    def _start_load(self, version: Version) -> None:
        assert self.plan.load is not None
        load = self._load = SwapLoadRun(
            self.plan.load, self.plan.base_dir, list(self.plan.allow_targets)
        )
        self._phase("load", lambda: "started: " + load.start(version))

    def _finish_load(self, settle_s: float | None = None) -> None:
        assert self._load is not None
        with self._in("load"):
            stats = self.result.swap = self._load.finish(settle_s)
        self.show("load", "stopped: " + stats.describe())

    # ---------------------------------------------------------------- populate, migrate

    def _populate(self, version: Version) -> None:
        total = len(self.plan.populate)
        for i, step in enumerate(self.plan.populate):
            count = f"{i + 1}/{total}"

            def action(step: PopulateStep = step, count: str = count) -> str:
                what = self._filled(describe_step(step), version)
                return f"{count} {what} -> {self._run_step(step, version)}"

            try:
                self._phase("populate", action)
            except StepFailed as exc:
                detail = str(exc).removeprefix("populate: ")
                raise StepFailed(f"populate {count}: {detail}") from exc

    def _filled(self, text: str, version: Version) -> str:
        """`{{name}}` and `{port.NAME}`-style placeholders filled, as the step sends them
        (a name that cannot be filled yet stays as written)."""
        try:
            return str(actions.render(self.values, version, text))
        except InputError:
            return text

    def _run_step(self, step: PopulateStep, version: Version) -> str:
        if isinstance(step, ApiStep):
            return actions.run_api_step(step, self.values, version)
        if isinstance(step, DnsStep):
            return actions.run_dns_step(step, self.values, version, self.plan.base_dir)
        if isinstance(step, CommandStep):
            return actions.run_command_step(step, self.values, version)
        return actions.run_wait_step(step, version)

    def _migrate(self, migrate: Migrate | None = None, direction: str = "up") -> str:
        migrate = migrate or self.plan.migrate
        assert migrate is not None
        where = MigrateWhere(self.run_dir, self.data_dir, self.volume, self.run_id)
        return run_migrate(
            migrate, self.values, where, upgrade_migrate_log(self.run_dir, direction)
        )

    # ---------------------------------------------------------------- rollback

    def _rollback(self, rollback: Rollback, snapshot: Snapshot) -> None:
        """The old version again on the new one's data; its checks named `rollback: ...`.

        A down-migration that fails or an old version that refuses to start is the
        answer to "can we go back?": a failed check saying so, the rest skipped; the
        new version's results stand."""

        def refused(name: str, expected: str, why: str, output: str = "") -> None:
            why = self.values.redact(why)
            self.show("rollback", f"FAILED: {why}", ok=False)
            cause = CheckResult(ROLLBACK_PREFIX + name, "setup", "fail", 0.0, expected, why)
            cause.output = output
            self.cases.cause("rollback", cause, f"not run: {name} failed")

        if rollback.migrate is not None:
            down = rollback.migrate
            try:
                self._phase("rollback", lambda: self._migrate(down, "down"))
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

            def on_result(index: int, result: CheckResult) -> None:
                self._on_check(index, result, "rollback")

            with self._in("rollback checks"):
                run_checks(rollback.checks, ctx, on_result)
        finally:
            self._stop("rollback")

    # ---------------------------------------------------------------- clean up

    def _tear_down(self) -> None:
        """Everything the run made goes, whatever it was doing: the load, every version
        still running, every container of the run (by its label), then the volume and
        the run directory unless kept. Safe to run twice."""
        with self._in("cleanup"):
            self._tear_down_parts()

    def _tear_down_parts(self) -> None:
        """Each part tried whatever the one before did: a fault is shown and recorded
        (exit 3), and the rest still goes."""
        if self._load is not None and self._load.running:  # a run that ended early
            self._cleanup_part("the load", lambda: self._finish_load(settle_s=0.0))
        for side in list(self._live):
            self._cleanup_part(f"the {side} version", functools.partial(self._stop, side))
        if self.plan.uses_docker:
            self._cleanup_part("the run's containers", self._remove_containers)
        self._clean_up()

    def _remove_containers(self) -> None:
        removed = docker_data.remove_run(self.run_id, keep_volumes=self.keep)
        if removed:
            self.show("cleanup", f"removed {removed} container(s) or volume(s) of the run")

    def _cleanup_part(self, what: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # the next part must still run
            self.show("cleanup", f"FAILED to stop or remove {what}: {exc}", ok=False)
            if self.result.internal_error is None:
                self._internal_error(exc)

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
