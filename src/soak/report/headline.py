"""The report's first line: how the run ended (or that it is still going), then its
criteria as soak.analysis.judged counts them."""

from __future__ import annotations

from typing import Any

from soak.analysis.judged import tally
from soak.report.model import ENDED_EARLY
from soak.report.tables import clock

# A run still going: its report says so first, never a pass or a failure yet.
ACTIVE_STATUSES = ("pending", "running")


def headline(report: dict[str, Any]) -> str:
    """What happened first (a run cut short or still going says so), then the criteria as
    soak.analysis.judged counts them: failed, passed and not judged (never a pass)."""
    run = report["run"]
    counts = tally(report["criteria"])
    growing = [v["resource"] for v in report["verdicts"] if v["verdict"] == "growing"]
    parts = [counts.counts()] + (["growing: " + ", ".join(growing)] if growing else [])
    status = str(run.get("status") or "")
    planned = run.get("planned_s")
    ran = clock(run["duration_s"])
    of = f" of {clock(planned)}" if isinstance(planned, int | float) else ""
    if status == "error" and "ready_s" not in report.get("startup", {}):
        return "ERROR before the target got ready — nothing ran: " + "; ".join(parts)
    if status in ACTIVE_STATUSES:
        return f"RUNNING after {ran}{of} — so far: " + "; ".join(parts)
    if status in ENDED_EARLY and not (status == "failed" and counts.failed):
        return f"{status.upper()} after {ran}{of} — over the part that ran: " + "; ".join(parts)
    if counts.failed:
        word = "FAILED"
    elif counts.not_judged:
        # Passed only where the scenario let criteria not judged pass (soak.results.judge).
        word = "PASSED (criteria.not_judged: pass)" if status == "passed" else "NOT JUDGED"
    else:
        word = "PASSED"
    return f"{word} — " + "; ".join(parts)
