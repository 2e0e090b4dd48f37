"""A criterion's result, and the criteria of a run counted once.

One owner for the counts: the judge's message (result.json, `soak status`, `soak list`),
the report's headline and the live view all read `tally`, so "1 of 9 criteria failed"
is said the same everywhere. A criterion is counted by its name: the whole run and its
worst window are one criterion, failed when either failed.

A criterion that could not be judged says why in `why`, one short phrase: too few leak
windows, the leak start-up wait, no samples, a busy machine. A run with one passes only
when the scenario says `criteria.not_judged: pass` (soak.results.judge).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass, replace
from typing import Any

from soak.analysis.leaks import LeakVerdict
from soak.analysis.pvalues import mann_kendall_points_needed
from soak.analysis.scenario_sections import CriteriaConfig, LeaksConfig
from soak.words import counted


@dataclass(frozen=True, slots=True)
class CriterionResult:
    name: str  # e.g. "lost_ratio", "p99_ms[cached]", "leak[rss_anon_bytes]"
    ok: bool
    value: float | None  # None: nothing to judge
    limit: float | None
    window: str  # "run", or e.g. "300 s to +1:05:00" (offset from the run's start)
    message: str
    judged: bool = True  # False: not judged (shown as `not judged`, never a pass)
    why: str = ""  # why it was not judged, in a few words ("" when judged)

    @property
    def result(self) -> str:
        """One of: pass, fail, not judged."""
        return result_of(self.ok, self.judged)


def result_of(ok: bool, judged: bool = True) -> str:
    return "not judged" if not judged else ("pass" if ok else "fail")


def failed(results: Sequence[CriterionResult]) -> list[CriterionResult]:
    """The criteria judged and not met (a criterion not judged is neither)."""
    return [r for r in results if r.judged and not r.ok]


# Why a leak verdict is `insufficient`, told from what the verdict carries: its window
# count, and its note, which names the setting that makes it wait.
NO_SAMPLES = "no samples"
TOO_FEW_WINDOWS = "too few windows"
STARTUP_WAIT = "the leak start-up wait"
SPAN_WAIT = "the windows span less than leaks.min_span_s"


def leak_why(v: LeakVerdict) -> str:
    """Why an `insufficient` verdict is not judged, in a few words."""
    if v.windows == 0:
        return f"{NO_SAMPLES}: no complete leak window after the warm-up"
    if v.why == "windows":
        return f"{TOO_FEW_WINDOWS} ({v.windows}, fewer than leaks.min_windows)"
    if v.why == "power":  # soak.analysis.leaks: the trend test cannot reach the p-value
        return f"{TOO_FEW_WINDOWS} ({v.windows}): {v.note.removeprefix('not judged yet: ')}"
    if v.why == "startup" or "startup_max_s" in v.note:
        return f"{STARTUP_WAIT} (leaks.startup_max_s): rising since the warm-up's end"
    if v.why == "span" or "min_span_s" in v.note:
        return SPAN_WAIT
    if v.note:  # a reason the detector gives that is none of the above: its own words
        return v.note.removeprefix("not judged yet: ")
    return f"{TOO_FEW_WINDOWS} ({v.windows}, fewer than leaks.min_windows)"


# The reason of a criterion still without samples in a run that is going.
NOT_YET = "not judged yet"


def so_far(criteria: Iterable[CriterionResult]) -> list[CriterionResult]:
    """The criteria of a run still going: one without samples yet (a failure at the end:
    a missing sample is evidence) is `not judged yet`, not failed."""
    return [
        replace(c, judged=False, why=NOT_YET, message=f"{NOT_YET}: {c.message}")
        if c.judged and not c.ok and c.value is None
        else c
        for c in criteria
    ]


@dataclass(frozen=True)
class Tally:
    """The criteria by name: which failed, which were not judged (and why), how many."""

    names: tuple[str, ...]
    failed: tuple[str, ...]
    not_judged: tuple[tuple[str, str], ...]  # (name, why)

    @property
    def passed(self) -> int:
        return len(self.names) - len(self.failed) - len(self.not_judged)

    def counts(self) -> str:
        """ "1 of 9 criteria failed: lost_ratio; 1 not judged: leak[fds] (too few windows
        ...)", "7 of 9 criteria pass, 2 not judged: ...", "all 9 criteria pass"."""
        total, nj = counted(len(self.names), "criterion"), len(self.not_judged)
        not_judged = f"{nj} not judged: {self.not_judged_text()}"
        if self.failed:
            text = f"{len(self.failed)} of {total} failed: " + ", ".join(self.failed)
            return text + (f"; {not_judged}" if nj else "")
        if nj == len(self.names):
            return f"{total} not judged: {self.not_judged_text()}"
        if nj:
            return f"{self.passed} of {total} pass, {not_judged}"
        return f"all {total} pass"

    def not_judged_text(self) -> str:
        """ "leak[rss_anon_bytes], leak[fds] (the leak start-up wait ...), p99_ms[all]
        (the machine ...)": the names, grouped by why."""
        by_why: dict[str, list[str]] = {}
        for name, why in self.not_judged:
            by_why.setdefault(why, []).append(name)
        return ", ".join(
            ", ".join(names) + (f" ({why})" if why else "") for why, names in by_why.items()
        )


def tally(criteria: Iterable[CriterionResult | Mapping[str, Any]]) -> Tally:
    """The criteria counted by name (results, or their dicts as result.json holds them)."""
    names: dict[str, None] = {}
    failed_names: dict[str, None] = {}
    not_judged: dict[str, str] = {}
    for c in criteria:
        d = asdict(c) if is_dataclass(c) and not isinstance(c, type) else dict(c)
        name = str(d.get("name", "?"))
        names[name] = None
        if not d.get("judged", True):
            # Written before `why` existed: the message says it.
            not_judged.setdefault(name, str(d.get("why") or d.get("message") or ""))
        elif not d.get("ok", False):
            failed_names[name] = None
    return Tally(
        tuple(names),
        tuple(failed_names),
        tuple((n, w) for n, w in not_judged.items() if n not in failed_names),
    )


def leaks_out_of_reach(leaks: LeaksConfig, criteria: CriteriaConfig, judged_s: float) -> str | None:
    """One line when a scenario's judged phases (`judged_s`, after the leading warm-ups)
    cannot give its leak criteria a verdict at its settings; None when they can (or it
    has none)."""
    if not criteria.leaks_ok or not leaks.thresholds:
        return None
    why = leak_shortfall(leaks, judged_s)
    if why is None:
        return None
    outcome = "such a run ends NOT JUDGED (exit 1) unless criteria.not_judged: pass"
    return f"the judged phases last {judged_s:g} s, {why}; {outcome}"


def leak_shortfall(leaks: LeaksConfig, judged_s: float) -> str | None:
    """Why `judged_s` seconds cannot give a leak verdict at these settings (a phrase),
    None when they can. Too few windows always leaves them not judged; a span shorter
    than the start-up wait leaves a resource rising from its start not judged."""
    # The trend test needs this many windows to be significant at all (soak.analysis.pvalues).
    windows = max(leaks.min_windows, mann_kendall_points_needed(leaks.p_value))
    needed_s = windows * leaks.window_s
    if judged_s < needed_s:
        return (
            f"fewer than {windows} windows of leaks.window_s ({windows} x"
            f" {leaks.window_s:g} s = {needed_s:g} s; leaks.min_windows {leaks.min_windows},"
            f" the trend test at p < {leaks.p_value:g} needs"
            f" {mann_kendall_points_needed(leaks.p_value)}): every leak criterion is not judged"
        )
    if judged_s < leaks.startup_wait_s:
        return (
            f"shorter than the leak start-up wait ({leaks.startup_wait_s:g} s,"
            " leaks.startup_max_s): a resource rising from the warm-up's end is not judged"
        )
    return None
