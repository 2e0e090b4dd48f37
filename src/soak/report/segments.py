"""report.json's `segments`: one per version of a soak with an `upgrade:` section.

Each segment holds its version, its seconds (from the run's start), its load from the
ledger's windows of those seconds (due, sent, completed, lost, skipped, and p50/p99
from their merged histograms: soak.analysis.latency, the one estimator), the leak
verdicts fitted on its own seconds alone (the new version judged from its own start,
with its own start-up wait: soak.analysis.verdicts.run_verdicts through a reader cut at
the segment's end), the cases of the checklist run when it arrived (a swap's, or its
rollback's: `rollback` true) and what its swap cost
(the queries lost in the seconds from the old version's stop to the new one's ready,
refused included: the ledger's windows of those seconds). The windows are
split by soak.analysis.segments, each in exactly one segment: the segments' counts add
up to the run's (result.json's load_totals).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from soak.analysis.comparison import compare_figures
from soak.analysis.latency import span_histogram, stored_histograms
from soak.analysis.rundata import StoreReader, judged_from_ns
from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.segments import SegmentReader, VersionSpan, span_of, stamp_bounds
from soak.analysis.soakfigures import soak_figures
from soak.analysis.verdicts import run_verdicts
from soak.clock import s_to_ns
from soak.report.audit import COUNTS, LedgerSums


def segment_sums(store: StoreReader, run_id: str, spans: Sequence[VersionSpan]) -> list[LedgerSums]:
    """The ledger's counts per segment, in one read of the run's windows."""
    sums = [LedgerSums() for _ in spans]
    for p in store.points(run_id, "load"):
        if p.tags.get("class") == "all":
            sums[span_of(spans, p.time_ns).index].add(p)
    return sums


def _load(
    sums: LedgerSums, windows: list[tuple[int, str]], bounds: tuple[int | None, int | None]
) -> dict[str, Any]:
    out: dict[str, Any] = {name: int(sums.counts[name]) for name in (*COUNTS, "skipped")}
    out["seconds"] = sums.windows
    hist = span_histogram(windows, *bounds)
    latency = hist.latency_ms() if hist.total else {}
    out["p50_ms"] = latency.get("p50")
    out["p99_ms"] = latency.get("p99")
    return out


def _leaks(
    store: Any,
    run_id: str,
    span: VersionSpan,
    cfg: LeaksConfig,
    warmup_end_ns: int,
    end_ns: int | None,
) -> list[dict[str, Any]]:
    """The verdicts of one version on its own seconds: the first after the run's warm-up,
    a later one from its own start (its start-up is its own)."""
    found = run_verdicts(SegmentReader(store, end_ns), run_id, cfg, _since_ns(span, warmup_end_ns))
    return [dataclasses.asdict(v) for v in found]


def _swap_cost(
    store: StoreReader, run_id: str, span: VersionSpan, swap: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """What the swap that began this segment cost the load: its seconds, from the one the
    old version stopped in to the one the new was ready in, and their windows' counts
    (lost includes the queries the closed port refused). None for the first segment."""
    if swap is None or span.index == 0:
        return None
    ready_s = float(swap.get("ready_s") or 0.0)
    last_ns = span.origin_ns + s_to_ns(float(math.ceil(float(swap["at_s"]) + ready_s)))
    sums = LedgerSums()
    refused = 0.0
    for p in store.points(run_id, "load", span.start_ns):
        if p.tags.get("class") == "all" and span.start_ns < p.time_ns <= last_ns:
            sums.add(p)
            value = p.fields.get("refused", 0)
            refused += float(value) if isinstance(value, int | float) else 0.0
    counts = sums.counts
    return {
        "at_s": float(swap["at_s"]),
        "ready_s": ready_s if swap.get("ready_s") is not None else None,
        "status": swap.get("status"),
        "cause": swap.get("cause", ""),
        "seconds": sums.windows,
        "sent": int(counts["sent"]),
        "lost": int(counts["lost"]),
        "refused": int(refused),
    }


def _since_ns(span: VersionSpan, warmup_end_ns: int) -> int:
    """Where a segment is judged from: the first after the run's warm-up, a later one
    from its own first second (its start-up is its own)."""
    return judged_from_ns(warmup_end_ns, span.origin_ns) if span.index == 0 else span.start_ns


def _compared(
    store: StoreReader,
    run_id: str,
    spans: Sequence[VersionSpan],
    warmup_end_ns: int,
) -> list[list[dict[str, Any]]]:
    """Each segment against the one before it (the first against none), with `soak
    compare`'s statistics over their per-window values: the difference of the figure
    (latency: the quantile of each segment's merged histograms), its bootstrap interval,
    Welch's p-value after Holm's correction, and the verdict."""
    figures = [
        soak_figures(store, run_id, _since_ns(s, warmup_end_ns), 1.0, stamp_bounds(spans, s)[1])
        for s in spans
    ]
    out: list[list[dict[str, Any]]] = [[]]
    for before, after, span in zip(figures, figures[1:], spans[1:], strict=False):
        found = compare_figures(spans[span.index - 1].version, before, span.version, after)
        out.append(found.to_json()["figures"])
    return out


def version_segments(
    store: StoreReader,
    run_id: str,
    spans: Sequence[VersionSpan],
    leaks: LeaksConfig,
    warmup_end_ns: int,
    swaps: Mapping[int, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """report.json's `segments` (empty for a run of one version); `swaps`: the record of
    the swap that brought in each segment's version (swaps.json's), by segment index."""
    if len(spans) < 2:
        return []
    sums = segment_sums(store, run_id, spans)
    windows = stored_histograms(store, run_id, {"class": "all"})
    compared = _compared(store, run_id, spans, warmup_end_ns)
    out = []
    for span, sum_, against in zip(spans, sums, compared, strict=True):
        bounds = stamp_bounds(spans, span)
        swap = (swaps or {}).get(span.index, {})
        out.append(
            {
                "version": span.version,
                "rollback": bool(swap.get("rollback")),  # brought in by a swap's rollback
                "start_s": span.start_s,
                "end_s": span.end_s,
                "load": _load(sum_, windows, bounds),
                "leaks": _leaks(store, run_id, span, leaks, warmup_end_ns, bounds[1]),
                "cases": list(swap.get("cases", [])),
                "swap": _swap_cost(store, run_id, span, swap or None),
                "compared": against,  # with the segment before it
            }
        )
    return out
