"""Witnesses of a run's ledger that the ledger did not compute.

The audit's other checks (soak.report.audit) hold every table against the ledger's
windows; a second copy of those windows would agree with itself whatever they said.
These hold the ledger against what did not come from it:

- the schedule: each phase was due its rate times its seconds (the scenario and the run's
  clock), the seconds the service was away included: a window missing, doubled or taken
  out of the store changes the ledger's due, not the schedule's;
- the server's own count of the queries it received (`server_queries`: unbound's remote
  control, pdns-recursor's `questions`, refdns's `refdns_queries_total`): at its newest
  sample it has received every query answered by then, and no more than were sent by
  then, besides the probes and readiness queries soak sent itself (a share allowed).

A disagreement is a line of text, as the audit's own. Pure: windows and samples in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soak.clock import NS_PER_S

# A due second's queries are all answered or timed out this long after it ends.
_SETTLED_S = 3
# A sample carries its tick's time but is read after it (later still on a busy machine):
# queries sent this long after the tick may be in the count.
_READ_LAG_S = 5
# The server also counts soak's probes and readiness queries: a share of what was sent,
# and a few besides.
_SERVER_EXTRA_SHARE = 0.02
_SERVER_EXTRA_MIN = 200


@dataclass(frozen=True, slots=True)
class Window:
    time_ns: int  # the due second's start
    sent: float
    completed: float


@dataclass(frozen=True, slots=True)
class ScheduledPhase:
    name: str
    rate_qps: float | None  # None: flat out (nothing is scheduled)
    duration_s: float  # as the scenario (and --duration) gave it


def schedule_disagreements(
    report: Mapping[str, Any], schedule: Sequence[ScheduledPhase]
) -> list[str]:
    """Each phase's due against its rate times its scheduled seconds, for the phases that
    ran their whole length (one cut short by a stop, or still going, is not held to it)."""
    out = []
    rows = {row.get("name"): row for row in report.get("phases", [])}
    for phase in schedule:
        row = rows.get(phase.name)
        if phase.rate_qps is None or row is None:
            continue
        due = row.get("metrics", {}).get("due")
        ran_s = row.get("duration_s")
        if not isinstance(due, int | float) or not isinstance(ran_s, int | float):
            continue
        if ran_s < phase.duration_s - 0.5:
            continue  # cut short (a stop) or still going: its seconds end mid-second
        seconds = phase.duration_s
        want = phase.rate_qps * round(seconds)
        # Whole seconds of a whole rate are due to the query; a fractional rate's seconds
        # round apart by one query at most: half a second's worth is already a disagreement.
        if abs(due - want) > 0.5 * phase.rate_qps + 1:
            out.append(
                f"phase {phase.name}: due {due:,.0f} != its schedule {want:,.0f}"
                f" ({phase.rate_qps:g} q/s x {round(seconds)} s)"
            )
    return out


def server_disagreements(
    windows: Iterable[Window], server: Sequence[tuple[int, float]]
) -> list[str]:
    """The server's own count (its samples: time, queries received since it started)
    against the ledger's windows up to its newest sample."""
    if not server:
        return []
    at_ns, counted = server[-1]
    sent = answered = 0.0
    for w in windows:
        if w.time_ns < at_ns + _READ_LAG_S * NS_PER_S:
            sent += w.sent
        if w.time_ns + (1 + _SETTLED_S) * NS_PER_S <= at_ns:
            answered += w.completed
    extra = max(_SERVER_EXTRA_MIN, _SERVER_EXTRA_SHARE * sent)
    if counted < answered:
        return [
            f"the server counted {counted:,.0f} queries, fewer than the {answered:,.0f}"
            " the ledger has answered by then"
        ]
    if counted > sent + extra:
        return [
            f"the server counted {counted:,.0f} queries, more than the {sent:,.0f}"
            f" the ledger has sent by then (and {extra:,.0f} probes besides)"
        ]
    return []


def server_count_words(windows: Iterable[Window], server: Sequence[tuple[int, float]]) -> str:
    """ "the server counted N of the M queries sent by its last sample" (for the report)."""
    if not server:
        return ""
    at_ns, counted = server[-1]
    sent = sum(w.sent for w in windows if w.time_ns < at_ns)
    return f"the server counted {counted:,.0f} queries of the {sent:,.0f} sent by its last sample"
