"""Every case a plan reports, whatever happens to the run.

A pipeline compares reports across runs, so the list of cases is the plan's, not the
failure's: the checks, the exact answers of the new version's readiness probes, the
rollback's checks (`rollback: NAME`) and its probes' answers, in that order, each with its
result or skipped with the reason it was not run. Cases that say why the run ended
(a failed step, a version that could not start, an interruption) come before the
part of the run they ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from soak.targets.readiness import describe
from soak.targets.specs import DnsProbe, TargetConfig
from soak.upgrade.checklist import CheckResult
from soak.upgrade.config import Check, UpgradePlan

Section = Literal["upgrade", "rollback"]
SECTIONS: tuple[Section, ...] = ("upgrade", "rollback")
ROLLBACK_PREFIX = "rollback: "
PROBE_KIND = "ready_probe"


@dataclass(frozen=True)
class Planned:
    name: str
    kind: str
    section: Section
    check: Check | None = None  # None: a readiness probe's exact answer
    probe: DnsProbe | None = None

    def skipped(self, reason: str) -> CheckResult:
        return CheckResult(self.name, self.kind, "skip", 0.0, got=reason)


def cannot_run_case(name: str, reason: str) -> CheckResult:
    """The error case of a plan that cannot run (exit 2): what `name` says failed."""
    return CheckResult(name, "setup", "error", 0.0, "the plan to run", reason)


def interrupted_case(reason: str) -> CheckResult:
    """The error case of a run ended by SIGINT or SIGTERM."""
    return CheckResult("interrupted", "interrupt", "error", 0.0, "the run to end", reason)


def exact_probes(cfg: TargetConfig) -> list[DnsProbe]:
    """DNS readiness probes that ask for more than an answer (an rcode, a record)."""
    return [
        p
        for p in cfg.ready.probes
        if isinstance(p, DnsProbe) and (p.rcode is not None or p.answer is not None)
    ]


def probe_case_name(probe: DnsProbe) -> str:
    return f"answers as its ready probe expects: {describe(probe)}"


def planned_cases(plan: UpgradePlan) -> list[Planned]:
    cases = [Planned(c.name, c.kind, "upgrade", check=c) for c in plan.checks]
    cases += [
        Planned(probe_case_name(p), PROBE_KIND, "upgrade", probe=p) for p in exact_probes(plan.new)
    ]
    if plan.rollback is not None:
        back = plan.rollback.old or plan.old
        cases += [
            Planned(ROLLBACK_PREFIX + c.name, c.kind, "rollback", check=c)
            for c in plan.rollback.checks
        ]
        cases += [
            Planned(ROLLBACK_PREFIX + probe_case_name(p), PROBE_KIND, "rollback", probe=p)
            for p in exact_probes(back)
        ]
    return cases


@dataclass
class CaseBook:
    """The cases of one run as they come; `assemble` gives the report's list."""

    planned: list[Planned]
    ran: dict[str, CheckResult] = field(default_factory=dict)
    causes: dict[Section, list[CheckResult]] = field(
        default_factory=lambda: {"upgrade": [], "rollback": []}
    )
    not_run: dict[Section, str] = field(default_factory=dict)  # why the rest was skipped

    def record(self, result: CheckResult) -> None:
        self.ran[result.name] = result

    def cause(self, section: Section, result: CheckResult, reason: str) -> None:
        """A case that ended (part of) the run; what it kept from running says `reason`."""
        self.causes[section].append(result)
        self.not_run.setdefault(section, reason)
        if section == "upgrade":
            self.not_run.setdefault("rollback", reason)

    def stop_all(self, reason: str) -> None:
        """Nothing more runs (an interruption): whatever is left is skipped so."""
        for section in SECTIONS:
            self.not_run.setdefault(section, reason)

    def assemble(self) -> list[CheckResult]:
        out: list[CheckResult] = []
        for section in SECTIONS:
            out += self.causes[section]
            reason = self.not_run.get(section, "not run")
            for case in (p for p in self.planned if p.section == section):
                result = self.ran.get(case.name)
                out.append(result or case.skipped(reason))
        return out
