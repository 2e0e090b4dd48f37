"""The checklist against the new version: in order, `needs:` honoured, `retry:` deadlines.

A check whose prerequisite did not pass is skipped, not failed. A check with
`retry: 10s` is tried again (every retry_interval_s) until it passes or the
deadline passes; the last attempt's verdict is the one reported.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from soak.errors import InputError
from soak.probes import http_request
from soak.upgrade import corpus_diff
from soak.upgrade.actions import (
    StepFailed,
    Version,
    api_call,
    dig,
    file_facts,
    render,
    run_command,
)
from soak.upgrade.config.checks import (
    REGEX_FIELDS,
    TEMPLATED_EXPECT_FIELDS,
    ApiCheck,
    Check,
    CommandCheck,
    CorpusCheck,
    DigCheck,
    FileCheck,
    LogCheck,
    MetricCheck,
    ReadyWithinCheck,
    SwapCheck,
    UnchangedCheck,
)
from soak.upgrade.judge import (
    Verdict,
    judge_api,
    judge_command,
    judge_dig,
    judge_file,
    judge_log,
    judge_metric,
    judge_ready,
    judge_swap,
    judge_unchanged,
)
from soak.upgrade.snapshot import Snapshot
from soak.upgrade.swap import SwapStats
from soak.upgrade.template import Values

# "error": the run could not reach a verdict (it could not start, it was interrupted).
Status = Literal["pass", "fail", "skip", "error"]


@dataclass
class CheckResult:
    name: str
    kind: str
    status: Status
    duration_ms: float
    expected: str = ""
    got: str = ""
    attempts: int = 0
    details: list[dict[str, Any]] | None = None  # a corpus check's every difference
    # Lines that tell why (a version's last log lines, a migration's output), titled:
    # the body of the JUnit case, never its one-line message.
    output: str = ""

    @property
    def message(self) -> str:
        if self.status in ("skip", "error"):
            return self.got
        return f"expected {self.expected}; got {self.got}"


@dataclass
class CheckContext:
    values: Values
    version: Version
    snapshot: Snapshot
    base_dir: Path
    swap: SwapStats | None = None  # what the plan's `load:` saw during the swap
    # Where the version's lines begin in its log (a soak's swap: the old version's
    # lines are before them, in the same file).
    log_from_bytes: int = 0


def _log_lines(path: Path | None, from_bytes: int = 0) -> Iterator[str]:
    """The new version's log from `from_bytes` on, line by line (a long log is not read
    into memory)."""
    if path is None:
        raise InputError("log check: the new version has no log file")
    try:
        with open(path, errors="replace") as fh:
            fh.seek(from_bytes)
            for line in fh:
                yield line.rstrip("\n")
    except FileNotFoundError:
        return


# What each kind compares with `{{name}}` filled in (its request is filled as it is sent).
_EXPECTED_FIELDS: dict[type[Check], tuple[str, ...]] = {
    ApiCheck: ("header",),
    DigCheck: ("answers", "contains"),
    LogCheck: ("pattern",),
    MetricCheck: ("path", "labels"),
    FileCheck: ("owner", "group"),
    CommandCheck: ("stdout_contains", "stdout_matches"),
}


def filled_check(check: Check, values: Values) -> Check:
    """`check` with `{{name}}` filled into what it expects (a value in a regex escaped:
    it is text to find), so that a saved or var value is compared, never `{{name}}`."""
    update: dict[str, Any] = {}
    for field in _EXPECTED_FIELDS.get(type(check), ()):
        quote = re.escape if field in REGEX_FIELDS else None
        update[field] = values.render(getattr(check, field), quote)
    if isinstance(check, ApiCheck):
        update["expect"] = [
            e.model_copy(
                update={
                    k: values.render(getattr(e, k))
                    for k in TEMPLATED_EXPECT_FIELDS & e.model_fields_set
                }
            )
            for e in check.expect
        ]
    return check.model_copy(update=update)


def evaluate(check: Check, ctx: CheckContext) -> Verdict:
    """One attempt of one check."""
    values, version = ctx.values, ctx.version
    check = filled_check(check, values)
    if isinstance(check, ApiCheck):
        result = api_call(values, version, check)
        return judge_api(check, result)
    if isinstance(check, DigCheck):
        result_dns = dig(
            values,
            version,
            check.port,
            check.qname,
            check.type,
            check.protocol,
            check.timeout_s,
        )
        return judge_dig(check, result_dns)
    if isinstance(check, UnchangedCheck):
        before = ctx.snapshot.records[check.snapshot]
        after = ctx.snapshot.retake(check.snapshot, values, version)
        return judge_unchanged(check, before, after)
    if isinstance(check, LogCheck):
        return judge_log(check, _log_lines(version.running.log_path, ctx.log_from_bytes))
    if isinstance(check, MetricCheck):
        http = http_request("GET", version.url(check.port, check.path), timeout_s=check.timeout_s)
        if http.status != 200:
            got = http.error or f"status {http.status}"
            return Verdict(False, f"{check.metric} {check.op} {check.value:g}", got)
        return judge_metric(check, http.body.decode(errors="replace"))
    if isinstance(check, ReadyWithinCheck):
        return judge_ready(check, version.running.ready_after_s)
    if isinstance(check, CommandCheck):
        argv = render(values, version, check.argv)
        try:
            proc = run_command(argv, version, render(values, version, check.env), check.timeout_s)
        except StepFailed as exc:  # it did not finish in time: this check's verdict
            return Verdict(False, f"{argv[0]} to finish", str(exc))
        return judge_command(check, proc.returncode, proc.stdout or "", proc.stderr or "")
    if isinstance(check, CorpusCheck):
        return judge_corpus(check, ctx)
    if isinstance(check, SwapCheck):
        swap = ctx.swap
        if swap is None:
            return judge_swap(check, None, None)
        return judge_swap(check, swap.lost, swap.longest_gap_s, swap.sent)
    assert isinstance(check, FileCheck)
    return judge_file(check, file_facts(render(values, version, check.path), version))


def judge_corpus(check: CorpusCheck, ctx: CheckContext) -> Verdict:
    before = ctx.snapshot.records[check.snapshot]
    after = ctx.snapshot.retake(check.snapshot, ctx.values, ctx.version)
    differences = corpus_diff.compare(before, after, check.ignore)
    ignored = f", not counting {', '.join(check.ignore)}" if check.ignore else ""
    return Verdict(
        len(differences) <= check.max_differences,
        f"at most {check.max_differences} differences in {len(before)} answers{ignored}",
        corpus_diff.summary(differences, len(before)),
        [d.to_json() for d in differences],
    )


def run_check(check: Check, ctx: CheckContext, sleep: Callable[[float], None]) -> CheckResult:
    start_s = time.monotonic()
    deadline_s = start_s + (check.retry or 0.0)
    attempts = 0
    while True:
        attempts += 1
        verdict = evaluate(check, ctx)
        if verdict.ok or time.monotonic() >= deadline_s:
            break
        sleep(check.retry_interval_s)
    duration_ms = (time.monotonic() - start_s) * 1000.0
    return CheckResult(
        check.name,
        check.kind,
        "pass" if verdict.ok else "fail",
        duration_ms,
        ctx.values.redact(verdict.expected),
        ctx.values.redact(verdict.got),
        attempts,
        verdict.details,
    )


def skipped(check: Check, reason: str, name: str | None = None) -> CheckResult:
    return CheckResult(name or check.name, check.kind, "skip", 0.0, got=reason)


def run_checks(
    checks: list[Check],
    ctx: CheckContext,
    on_result: Callable[[int, CheckResult], Any] = lambda i, r: None,
    sleep: Callable[[float], None] = time.sleep,
    on_start: Callable[[int, str], Any] = lambda i, name: None,
) -> list[CheckResult]:
    """Each check in order, `on_start` as it begins (one that hangs is seen), `on_result`
    with its verdict."""
    results: list[CheckResult] = []
    status: dict[str, Status] = {}
    for i, check in enumerate(checks):
        unmet = [n for n in check.needs if status.get(n) != "pass"]
        if unmet:
            result = skipped(
                check, "needs " + ", ".join(f"{n!r} ({status.get(n, 'not run')})" for n in unmet)
            )
        else:
            on_start(i, check.name)
            result = run_check(check, ctx, sleep)
        status[check.name] = result.status
        results.append(result)
        on_result(i, result)
    return results
