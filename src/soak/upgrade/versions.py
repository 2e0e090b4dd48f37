"""A version of an upgrade run as the runner starts it: why it failed to start, what
its readiness means (any answer), and the exact answers its probes ask for, as cases."""

from __future__ import annotations

import time

from soak.errors import TargetStartError
from soak.targets import readiness
from soak.targets.base import Running
from soak.targets.specs import DnsProbe, TargetConfig
from soak.upgrade.cases import PROBE_KIND
from soak.upgrade.checks import CheckResult
from soak.upgrade.template import Values

# How soak.targets folds a start log into its one-line error (quote_tail): the case's
# message is the reason before it; the log lines go into the case's body, once.
LOG_QUOTES = ("; log lines that look like errors: ", "; last log lines: ", "; its log is empty")


def reason_of(start_error: str) -> str:
    """A target's start error without the log lines folded into it."""
    cut = min((i for q in LOG_QUOTES if (i := start_error.find(q)) >= 0), default=-1)
    return start_error if cut < 0 else start_error[:cut]


class VersionFailed(TargetStartError):
    """A version that was launched and then exited or never got ready, with its log;
    `full`: the one-line error with the log folded in, for the terminal and stderr."""

    def __init__(self, side: str, message: str, log_lines: list[str], full: str) -> None:
        super().__init__(message)
        self.side = side
        self.log_lines = log_lines
        self.full = full

    def one_line(self) -> str:
        return self.full


def output_block(values: Values, title: str, lines: list[str] | None) -> str:
    """Lines for a case's body, one a line, under a title."""
    if not lines:
        return ""
    return f"{title}:\n" + "\n".join(values.redact(ln.rstrip()) for ln in lines)


def answers_enough(cfg: TargetConfig) -> TargetConfig:
    """The version's spec with its DNS readiness probes asking for any answer: a new
    version that answers has started; what it answers is judged by the probe's case."""
    probes = [
        p.model_copy(update={"rcode": None, "answer": None}) if isinstance(p, DnsProbe) else p
        for p in cfg.ready.probes
    ]
    ready = cfg.ready.model_copy(update={"probes": probes})
    return cfg.model_copy(update={"ready": ready})


def probe_result(name: str, probe: DnsProbe, running: Running, cfg: TargetConfig) -> CheckResult:
    """The probe tried until it passes or the version's readiness timeout (from its
    start) has passed; the last attempt's answer is the verdict."""
    start_s = time.monotonic()
    deadline_s = running.started_monotonic_s + cfg.ready.timeout_s
    attempts = 0
    while True:
        attempts += 1
        outcome = readiness.check(probe, running, timeout_s=1.0)
        if outcome.ok or time.monotonic() >= deadline_s:
            break
        time.sleep(cfg.ready.interval_s)
    want = readiness.describe(probe).rpartition(" -> ")[2]
    return CheckResult(
        name,
        PROBE_KIND,
        "pass" if outcome.ok else "fail",
        (time.monotonic() - start_s) * 1000.0,
        want,
        outcome.detail,
        attempts,
    )
