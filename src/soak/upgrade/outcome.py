"""What an upgrade run tells as it goes: each step shown and recorded (with its offset
from the run's start), the phase it is in (an interruption names it), the cases a
check, a probe or a failure adds, and the result the reports are written from."""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from soak.clock import s_to_ns
from soak.interrupt import Interrupted
from soak.runs.events import RunEvents
from soak.upgrade.cases import (
    ROLLBACK_PREFIX,
    CaseBook,
    Section,
    cannot_run_case,
    interrupted_case,
    planned_cases,
)
from soak.upgrade.checklist import CheckResult
from soak.upgrade.config import UpgradePlan
from soak.upgrade.result import StepRecord, UpgradeResult, run_tags
from soak.upgrade.template import Values

Show = Callable[[str, str], None]  # phase, text

_WORDS = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "error": "ERROR"}


class Outcome:
    def __init__(
        self,
        plan: UpgradePlan,
        values: Values,
        *,
        run_dir: Path,
        run_id: str,
        keep: bool,
        show: Show,
    ) -> None:
        self.plan = plan
        self.values = values
        self._show = show
        self.phase_now = "data"  # what the run was doing, for an interruption
        self.step_now = ""  # the step under way (announced, not yet ended), for the same
        self.begin()
        self.cases = CaseBook(planned_cases(plan))
        self.result = UpgradeResult(
            plan.name, run_id, run_dir, keep, datetime.now(UTC).isoformat(timespec="seconds")
        )
        # Each step is an event of the run, as a soak's are: the engine's one event path.
        tags = run_tags(plan.name, run_id, plan.new.name, plan.new.version)
        self.events = RunEvents(
            run_id, tags, record=self.result.events.append, write=self.result.event_points.extend
        )

    def begin(self) -> None:
        """The run starts now: its steps' offsets (monotonic) and events' times (wall)."""
        self.start_s = time.monotonic()
        self.start_ns = time.time_ns()

    def show(
        self,
        phase: str,
        text: str,
        ok: bool = True,
        duration_ms: float = 0.0,
        started_s: float | None = None,
        begins: bool = False,
    ) -> None:
        """A step as it happened; `started_s` (monotonic) when it began, default now;
        `begins`: the step is under way (a start: its `ready` line ends it)."""
        text = self.values.redact(text)
        self.step_now = f"{phase} {text}" if begins else ""
        began = time.monotonic() - duration_ms / 1000.0 if started_s is None else started_s
        offset_s = max(0.0, began - self.start_s)
        self.result.steps.append(StepRecord(phase, text, ok, duration_ms, offset_s))
        # The event: kind the step's phase, value its seconds, at the wall time it began
        # (the run's wall start plus its monotonic offset: the steps keep their order).
        self.events.add(phase, text, duration_ms / 1000.0, self.start_ns + s_to_ns(offset_s))
        self._show(phase, text)

    def announce(self, phase: str, text: str) -> None:
        """A step as it begins, shown and not recorded (its record comes when it ends):
        a step that hangs shows what it is doing, and an interruption names it."""
        text = self.values.redact(text)
        self._show(phase, f"{text} ...")
        self.step_now = f"{phase} {text}"

    def show_since(self, phase: str, text: str, start_s: float, ok: bool = True) -> None:
        """A step that began at `start_s` (monotonic) and ends now."""
        ms = (time.monotonic() - start_s) * 1000.0
        self.show(phase, text, ok=ok, duration_ms=ms, started_s=start_s)

    @contextlib.contextmanager
    def in_phase(self, phase: str) -> Iterator[None]:
        """The run is in `phase`; an interruption going through is told so (the
        innermost phase names it: a stop in a `finally` does not hide what it ended)."""
        self.phase_now = phase
        try:
            yield
        except Interrupted as exc:
            exc.phase = exc.phase or phase
            exc.step = exc.step or self.step_now  # before a stop in a `finally` announces
            raise

    def failed(self) -> bool:
        """Whether the run so far failed or could not run (an interruption is a cancel,
        not a verdict: it keeps nothing)."""
        result = self.result
        if result.interrupted is not None:
            return False
        if result.start_error is not None or result.internal_error is not None:
            return True
        return any(c.status in ("fail", "error") for c in self.cases.assemble())

    def finish(self) -> UpgradeResult:
        self.result.checks = self.cases.assemble()
        self.result.duration_s = time.monotonic() - self.start_s
        return self.result

    # ---------------------------------------------------------------- causes

    def abort_checks(self, name: str, reason: str, output: str = "", shown: str = "") -> None:
        """The checks were not reached: one failed case for the cause, the rest skipped;
        `shown` on the terminal (default the reason)."""
        reason = self.values.redact(reason)
        cause = CheckResult(name, "setup", "fail", 0.0, "the run to reach its checks", reason)
        cause.output = output
        self.cases.cause("upgrade", cause, f"not run: {name} failed")
        self.show("abort", shown or reason, ok=False)

    def cannot_run(self, name: str, one_line: str, reason: str, output: str = "") -> None:
        """The plan cannot run (exit 2): an error case, every other case skipped."""
        self.result.start_error = self.values.redact(one_line)
        reason = self.values.redact(reason)
        cause = cannot_run_case(name, reason)
        cause.output = output
        self.cases.cause("upgrade", cause, f"not run: {name} failed")
        self.show("abort", one_line, ok=False)

    def internal_error(self, exc: Exception) -> None:
        message = self.values.redact(f"{type(exc).__name__}: {exc}")
        self.result.internal_error = message
        cause = CheckResult("internal error", "internal", "error", 0.0, "the run to end", message)
        cause.output = self.values.redact("".join(traceback.format_exception(exc)))
        self.cases.cause("upgrade", cause, "not run: internal error")
        self.show("abort", f"internal error: {message}", ok=False)

    def interrupted(self, exc: Interrupted) -> None:
        """An error case saying where the signal came; what did not run is skipped."""
        if self.result.interrupted is not None:
            return
        self.result.interrupted = exc.signal_name
        where = exc.phase or self.phase_now
        step = exc.step or self.step_now
        under_way = f"`{step}` was under way; " if step else ""
        self.result.interrupted_where = (
            f"during {where}: {under_way}the run was stopped and cleaned up"
        )
        reason = f"{exc.signal_name} {self.result.interrupted_where}"
        section: Section = "rollback" if where.startswith("rollback") else "upgrade"
        cause = interrupted_case(reason)
        self.cases.causes[section].append(cause)
        self.cases.stop_all(f"not run: interrupted by {exc.signal_name}")
        self.show("abort", reason, ok=False)

    def refused_rollback(self, name: str, expected: str, why: str, output: str = "") -> None:
        """The way back is closed (a down-migration failed, the old version would not
        start): a failed rollback case saying so, the rest skipped."""
        why = self.values.redact(why)
        self.show("rollback", f"FAILED: {why}", ok=False)
        cause = CheckResult(ROLLBACK_PREFIX + name, "setup", "fail", 0.0, expected, why)
        cause.output = output
        self.cases.cause("rollback", cause, f"not run: {name} failed")

    # ---------------------------------------------------------------- verdicts

    def _check_total(self, phase: str) -> int:
        rollback = self.plan.rollback
        checks = rollback.checks if phase == "rollback" and rollback else []
        return len(checks or self.plan.checks)

    def on_check_start(self, index: int, name: str, phase: str = "check") -> None:
        self.announce(phase, f"{index + 1}/{self._check_total(phase)} {name}")

    def on_rollback_check_start(self, index: int, name: str) -> None:
        self.on_check_start(index, name, "rollback")

    def on_check(self, index: int, result: CheckResult, phase: str = "check") -> None:
        total = self._check_total(phase)
        if phase == "rollback":
            result = replace(result, name=ROLLBACK_PREFIX + result.name)
        self.cases.record(result)
        detail = "" if result.status == "pass" else f" - {result.message}"
        shown = result.name.removeprefix(ROLLBACK_PREFIX)
        self.show(
            phase,
            f"{index + 1}/{total} {_WORDS[result.status]} {shown}{detail}",
            ok=result.status != "fail",
            duration_ms=result.duration_ms,
        )

    def on_rollback_check(self, index: int, result: CheckResult) -> None:
        self.on_check(index, result, "rollback")

    def on_probe(self, result: CheckResult, phase: str, prefix: str) -> None:
        """An exact answer a readiness probe asks for, as a case."""
        self.cases.record(result)
        detail = "" if result.status == "pass" else f" - {result.message}"
        self.show(
            phase,
            f"{_WORDS[result.status]} {result.name.removeprefix(prefix)}{detail}",
            ok=result.status == "pass",
            duration_ms=result.duration_ms,
        )
