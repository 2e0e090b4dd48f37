"""A leak verdict: what one pass says of one resource (soak.analysis.leaks gives them),
and its `leak` points (docs/architecture.md "Time series")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from soak.points import Point

VERDICTS = ("ok", "growing", "levelling", "insufficient")


@dataclass(frozen=True, slots=True)
class LeakVerdict:
    resource: str
    verdict: str  # one of VERDICTS
    slope_per_hour: float  # Theil-Sen slope of the window minima, units per hour
    p_value: float  # Mann-Kendall, two-sided
    windows: int  # complete windows used
    threshold_per_hour: float
    # Slope of the last part (the tail judged for `levelling`); 0 when too short.
    recent_slope_per_hour: float = 0.0
    # Why a whole-run rise was not called `growing`, or what a `growing` slope is of
    # (soak.analysis.changepoint): "" when the whole run's trend said it all.
    note: str = ""
    change_at_s: float | None = None  # the last change of course (window midpoint, epoch s)
    # Why an `insufficient` verdict gave none (WHY_NOT_JUDGED); "" for a verdict.
    why: str = ""


# Why a verdict is `insufficient` (LeakVerdict.why): too few windows yet; too few for the
# trend test to reach the p-value asked; a rise from the warm-up's end waiting for start-up
# growth to stop; windows spanning less than leaks.min_span_s.
WHY_NOT_JUDGED = ("windows", "power", "startup", "span")


def leak_points(verdicts: Sequence[LeakVerdict], time_ns: int) -> list[Point]:
    """`leak` points (tag `resource`; fields slope_per_hour, p_value, verdict)."""
    return [
        Point(
            "leak",
            {"slope_per_hour": v.slope_per_hour, "p_value": v.p_value, "verdict": v.verdict},
            time_ns,
            {"resource": v.resource},
        )
        for v in verdicts
    ]
