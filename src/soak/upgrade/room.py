"""The room a soak's swap (or rollback) leaves after it, before the next one or the run's
end: enough for its checks, and for a leak verdict of the version it brings in.

- **An error** (`soak validate`, `soak start`, POST /runs: exit 2 before anything
  starts) when the time left is shorter than the longest one of its checks may wait
  (the largest `timeout_s` among them: an `api` or `metric` check's 10 s by default, a
  `dig`'s 2 s, a `command`'s 60 s). A run that ends, or a next swap that stops the
  version, sooner can stop it under its checks. A `ready_within` check is judged from
  the measured start, a `log` check reads the log at once: neither waits.
- **A warning** when the time left cannot give the new version's own leak verdicts
  (the report's segments: judged from the version's start, with its own start-up) at
  the scenario's leak settings: too few leak windows, or shorter than the start-up
  wait (soak.analysis.judged.leak_shortfall). Such a segment's verdicts are
  `insufficient`, its figures still told.

The rule is the same on a plan shortened by `--duration` (its moments scaled).
"""

from __future__ import annotations

from dataclasses import dataclass

from soak.analysis.judged import leak_shortfall
from soak.config import Scenario
from soak.upgrade.config.checks import Check


@dataclass(frozen=True)
class Move:
    """A swap or a rollback: its YAML path, its moment, its checks."""

    where: str  # e.g. upgrade.swaps.0.after
    at_s: float
    checks: list[Check]


def longest_wait_s(checks: list[Check]) -> tuple[float, str]:
    """The longest one check may wait, and which check (its kind and name)."""
    waits = [(float(getattr(c, "timeout_s", 0.0) or 0.0), f"{c.kind} {c.name!r}") for c in checks]
    return max(waits, default=(0.0, ""))


def room_errors(scenario: Scenario, moves: list[Move]) -> list[str]:
    """A line for each move that leaves less time than its checks may wait."""
    out = []
    for at_s, left_s, until, move in _spans(scenario, moves):
        need_s, which = longest_wait_s(move.checks)
        if left_s < need_s:
            out.append(
                f"{move.where}: at {at_s:g} s leaves {left_s:g} s before {until}, less than"
                f" its checks may wait ({need_s:g} s, {which}); place it earlier or"
                " lengthen the phases after it"
            )
    return out


def room_warnings(scenario: Scenario, moves: list[Move]) -> list[str]:
    """A line for each move whose version has too little time for a leak verdict."""
    if not scenario.criteria.leaks_ok or not scenario.leaks.thresholds:
        return []
    out = []
    for _, left_s, until, move in _spans(scenario, moves):
        why = leak_shortfall(scenario.leaks, left_s)
        if why is not None:
            out.append(
                f"{move.where}: the version it brings in runs {left_s:g} s before {until},"
                f" {why}: its segment's leak verdicts are not judged"
            )
    return out


def _spans(scenario: Scenario, moves: list[Move]) -> list[tuple[float, float, str, Move]]:
    """Each move's moment, the seconds to the next move (or the run's end) and which."""
    ordered = sorted(moves, key=lambda m: m.at_s)
    out = []
    for k, move in enumerate(ordered):
        nxt = ordered[k + 1] if k + 1 < len(ordered) else None
        end_s = nxt.at_s if nxt is not None else scenario.duration_s
        until = f"{nxt.where.rsplit('.', 1)[0]} at {nxt.at_s:g} s" if nxt else "the run's end"
        out.append((move.at_s, end_s - move.at_s, until, move))
    return out
