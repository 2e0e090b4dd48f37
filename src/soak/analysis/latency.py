"""Latency over a span of a run: the quantile of the merged histograms of its windows.

The one estimator of every latency figure of a run (the phases, classes and agents
tables, the latency criteria over the run and over sliding windows, result.json,
`soak status`, the report's headline, `soak compare`): each closed window of the ledger
stores its latency histogram per class (soak.names.LAT_HIST_FIELD, soak.histogram's text
form); a span's figures are read from the sum of the histograms of the windows in it,
never from the windows' percentiles. Windows are (end time, text) pairs: a window's
point is stamped at the end of its second, so a span (start, end] holds the windows
stamped inside it. Memory is bounded by what is merged, never by the number of windows.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import pairwise

from soak.analysis.rundata import StoreReader
from soak.histogram import LatencyHistogram
from soak.names import LAT_HIST_FIELD, LATENCY_MEASUREMENT
from soak.points import FieldValue, Point

Stamped = tuple[int, str]  # (window end ns, its histogram's text form)
# A sliding window's quantile is read about this many times per run (the sums still move
# window by window), more often when windows are short.
MAX_READS = 2000


def stored_histograms(
    store: StoreReader, run_id: str, tags: dict[str, str] | None = None
) -> list[Stamped]:
    """The run's stored window histograms of one tag set (e.g. {"class": "all"}; an
    agent's with {"agent": "0", "class": "all"}), time-ordered."""
    found = store.series(run_id, "load", LAT_HIST_FIELD, tags)
    return sorted((t, v) for _, samples in found for t, v in samples if isinstance(v, str))


def span_histogram(
    windows: Iterable[Stamped], start_ns: int | None = None, end_ns: int | None = None
) -> LatencyHistogram:
    """The windows stamped in (start, end] merged (an open side when None)."""
    out = LatencyHistogram()
    for t, text in windows:
        if (start_ns is None or t > start_ns) and (end_ns is None or t <= end_ns):
            out.add(LatencyHistogram.decode(text))
    return out


def span_latency_ms(
    windows: Iterable[Stamped], start_ns: int | None = None, end_ns: int | None = None
) -> dict[str, float | None]:
    """min, avg, p50, p95, p99, p999, max in ms over (start, end] (None without queries)."""
    return span_histogram(windows, start_ns, end_ns).latency_ms()


class Spans:
    """Several spans' histograms summed in one pass over the windows (the phases)."""

    def __init__(self, spans: Sequence[tuple[int, int]], *, first_inclusive: bool = True) -> None:
        """`spans`: (start, end] each; the first also holds a window stamped at its
        start when `first_inclusive` (the run's first phase)."""
        self.spans = list(spans)
        self.first_inclusive = first_inclusive
        self.histograms = [LatencyHistogram() for _ in self.spans]

    def add(self, windows: Iterable[Stamped]) -> None:
        for t, text in windows:
            hist: LatencyHistogram | None = None
            for i, (start_ns, end_ns) in enumerate(self.spans):
                inside = start_ns < t <= end_ns or (
                    i == 0 and self.first_inclusive and t == start_ns
                )
                if inside:
                    hist = hist or LatencyHistogram.decode(text)
                    self.histograms[i].add(hist)


def phase_histograms(
    store: StoreReader,
    run_id: str,
    spans: Sequence[tuple[int, int]],
    tags: dict[str, str] | None = None,
) -> list[LatencyHistogram]:
    """Each phase's windows merged (the first phase's also holds a window stamped at its
    start): the figures of the report's Phases table and of the `latency` points."""
    summed = Spans(spans)
    summed.add(stored_histograms(store, run_id, tags))
    return summed.histograms


def latency_points(
    store: StoreReader, run_id: str, phases: Sequence[tuple[str, int, int]]
) -> list[Point]:
    """One `latency` point per phase (name, start, end) and class, stamped at the phase's
    end: the quantiles of its merged windows, as the report reads them (Spans, as in
    phase_histograms), for the sinks and the dashboards, which cannot merge histograms."""
    by_class: dict[str, list[Stamped]] = {}
    for tags, samples in store.series(run_id, "load", LAT_HIST_FIELD):
        stamped = by_class.setdefault(tags.get("class", ""), [])
        stamped += [(t, v) for t, v in samples if isinstance(v, str)]
    points = []
    for cls, windows in sorted(by_class.items()):
        summed = Spans([(start_ns, end_ns) for _, start_ns, end_ns in phases])
        summed.add(sorted(windows))
        for (name, _, end_ns), hist in zip(phases, summed.histograms, strict=True):
            if not hist.total:
                continue
            figures = hist.latency_ms()
            fields: dict[str, FieldValue] = {
                f"lat_{k}_ms": v for k, v in figures.items() if v is not None
            }
            fields["queries"] = float(hist.total)
            tags = {"class": cls, "phase": name}
            points.append(Point(LATENCY_MEASUREMENT, fields, end_ns, tags))
    return points


def window_quantiles(
    windows: Sequence[Stamped], q: float, window_ns: int
) -> tuple[float | None, tuple[float, int] | None]:
    """(the q-quantile in ms over all the windows, (the worst complete sliding window's,
    its end)) over time-ordered windows.

    Sliding windows end at a stored window and reach back window_ns; complete when they
    reach back to the first window's own second. Read about MAX_READS times, often enough
    that a burst shorter than 3/4 of a sliding window is wholly inside one at some read.
    """
    run, win = LatencyHistogram(), LatencyHistogram()
    inside: deque[tuple[int, LatencyHistogram]] = deque()
    times = [t for t, _ in windows]
    gaps = sorted(b - a for a, b in pairwise(times))
    step_ns = gaps[len(gaps) // 2] if gaps else 0
    per_window = window_ns // step_ns if step_ns > 0 else 1
    read_every = max(1, min(math.ceil(len(windows) / MAX_READS), per_window // 4))
    worst: tuple[float, int] | None = None
    for i, (t, text) in enumerate(windows):
        hist = LatencyHistogram.decode(text)
        run.add(hist)
        win.add(hist)
        inside.append((t, hist))
        while inside and inside[0][0] <= t - window_ns:
            win.subtract(inside.popleft()[1])
        complete = t - window_ns >= times[0] - step_ns
        if complete and (i % read_every == 0 or i == len(windows) - 1):
            value = win.quantile_ms(q)
            if value is not None and (worst is None or value > worst[0]):
                worst = (value, t)
    return run.quantile_ms(q), worst
