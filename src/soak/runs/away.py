"""The seconds a run's service was away, counted: due by the schedule and skipped.

A SIGKILLed (or stopped) service takes its load engine with it; the run resumes
when a service comes back, and its load starts again from a second of the run's
grid. The seconds between the last window the store holds and that second were
due by the schedule and nobody counted them: without these windows the ledger's
due would fall short of its phases' rate x seconds, and the generator criterion
and the achieved rate would not show that the load stopped. Each such second is
stored as a `load` window (per class and `all`) with its due, all of it skipped,
and a field saying why (`skipped_away`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from soak.analysis.rundata import StoreReader
from soak.clock import NS_PER_S
from soak.load.fleet.lease import split_by_share
from soak.load.fleet.run_load import class_shares
from soak.points import Point
from soak.runs.parts import RunParts
from soak.runs.timeline import PhaseSpan, Timeline, span_at
from soak.units import MAX_RATE_QPS

AWAY_FIELD = "skipped_away"  # of a window's skipped, those due while the service was away
AWAY_EVENT = "service_away"  # the event: how many seconds and queries, and why


@dataclass(frozen=True, slots=True)
class Away:
    points: list[Point]
    seconds: int
    due: int


def due_by(spans: Sequence[PhaseSpan], t_ns: int) -> float:
    """The queries the phases' rates put between the origin and `t_ns` (a flat-out
    phase schedules nothing): a phase boundary mid-second splits that second's due."""
    due = 0.0
    for span in spans:
        if span.rate_qps <= 0 or span.rate_qps >= MAX_RATE_QPS:
            continue
        overlap_ns = min(t_ns, span.end_ns) - span.start_ns
        if overlap_ns > 0:
            due += span.rate_qps * overlap_ns / NS_PER_S
    return due


def away_windows(
    spans: Sequence[PhaseSpan],
    class_shares: dict[str, float],
    from_ns: int,
    to_ns: int,
    tags: dict[str, str],
) -> Away:
    """The windows of the whole seconds in [from_ns, to_ns) (both on the run's grid),
    stamped at the end of their second as every window is; `class_shares` the mix's
    classes and their shares of the rate. A second's due is the schedule's whole
    queries up to its end less those up to its start, so that seconds add up."""
    points: list[Point] = []
    total = seconds = 0
    lo_ns = from_ns
    while lo_ns + NS_PER_S <= to_ns:
        hi_ns = lo_ns + NS_PER_S
        span = span_at(list(spans), lo_ns)
        if span is not None:
            n = math.floor(due_by(spans, hi_ns) + 1e-6) - math.floor(due_by(spans, lo_ns) + 1e-6)
            seconds += 1
            total += n
            rate = span.rate_qps if span.rate_qps < MAX_RATE_QPS else 0.0
            parts = {"all": n, **split_by_share(n, class_shares)}
            for cls, m in parts.items():
                fields: dict[str, float | str] = {
                    "due": float(m),
                    "skipped": float(m),
                    AWAY_FIELD: float(m),
                    "sent": 0.0,
                    "completed": 0.0,
                    "lost": 0.0,
                    "rate_achieved": 0.0,
                    "rate_target": rate * (1.0 if cls == "all" else class_shares[cls]),
                }
                points.append(Point("load", fields, hi_ns, {**tags, "class": cls}))
        lo_ns = hi_ns
    return Away(points, seconds, total)


def away_text(away: Away, gap_s: float) -> str:
    """The event's line: the cause first (as a generator failure names it)."""
    return (
        f"service away for {gap_s:.1f} s: {away.due:,} queries due in {away.seconds} s"
        " of the run counted as skipped"
    )


def newest_window_end_ns(store: StoreReader, run_id: str) -> int | None:
    """The end of the newest second the run's store holds a window of (class `all`)."""
    newest = None
    for _tags, samples in store.series(run_id, "load", "due", {"class": "all"}):
        if samples:
            newest = max(newest or samples[-1][0], samples[-1][0])
    return newest


def count_away(parts: RunParts, timeline: Timeline, gap_s: float, now_ns: int) -> str | None:
    """On a resumed run: the seconds from the newest window stored up to the one the
    restarted load counts from (the run's end, if it ended while the service was away),
    stored as skipped windows; the event's line, or None where there were none. A
    replay's seconds are due by its capture's timing, not a rate: not counted here."""
    cfg = parts.scenario.load
    sinks = parts.sinks
    if cfg is None or cfg.replay is not None or sinks is None or sinks.store is None:
        return None
    from_ns = newest_window_end_ns(sinks.store, parts.run_id) or timeline.origin_ns
    load = parts.load
    to_ns = timeline.end_ns
    if load is not None and timeline.span_at(now_ns) is not None:
        to_ns = min(to_ns, getattr(load, "counted_from_ns", None) or now_ns)
    away = away_windows(timeline.spans, class_shares(cfg), from_ns, to_ns, parts.run_tags)
    if not away.seconds:
        return None
    parts.write(away.points)
    return away_text(away, gap_s)
