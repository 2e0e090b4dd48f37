"""Latency percentiles over many ticks from each tick's percentiles: a mixture quantile.

The load stats give, per tick and class, min/p50/p95/p99/p99.9/max and the
number of completed queries, not mergeable histograms. The mean of per-tick
p99s overstates a window's p99 when a tick holds few queries (at 60 queries
a tick, the tick's p99 is its slowest query). Instead each tick's latency
distribution is rebuilt as a piecewise-linear CDF through its percentiles,
weighted by its completed queries, and spread over fixed log-spaced buckets
(6% wide); a window's quantile is read from the sum of its ticks' buckets.
Memory is bounded by the window: ticks enter and leave a running sum. The ticks of a
class are read from its series in a RunData (latency_ticks).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from soak.analysis.rundata import ClassSeries

# (field suffix in `load`, cumulative share at that latency)
KNOTS = (("min", 0.0), ("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))

_LO_MS = 0.001  # 1 µs; below is bucket 0
_PER_DECADE = 40  # buckets per factor 10: 6% wide
_DECADES = 8  # up to 100 s
_N = _PER_DECADE * _DECADES + 1
_LOG_R = math.log(10) / _PER_DECADE
# Window quantiles are read about this many times per run (the sums still move tick by
# tick), more often when windows are short.
MAX_READS = 2000


@dataclass(frozen=True, slots=True)
class Tick:
    time_ns: int
    weight: float  # completed queries
    knots: tuple[tuple[float, float], ...]  # (latency ms, cumulative share), increasing


def edge(k: int) -> float:
    """Lower edge of bucket k (bucket 0 starts at 0)."""
    return 0.0 if k <= 0 else _LO_MS * math.exp((k - 1) * _LOG_R)


_EDGES = [edge(k) for k in range(_N + 1)]
_WIDTHS = [_EDGES[k + 1] - _EDGES[k] for k in range(_N)]


def bucket(x_ms: float) -> int:
    if x_ms < _LO_MS:
        return 0
    return min(_N - 1, 1 + int(math.log(x_ms / _LO_MS) / _LOG_R))


def make_knots(values: dict[str, float]) -> tuple[tuple[float, float], ...]:
    """A tick's CDF knots from the percentiles it has (`p99` alone is enough)."""
    knots: list[tuple[float, float]] = []
    for name, share in KNOTS:
        x = values.get(name)
        if x is None or not math.isfinite(x) or x < 0:
            continue
        if knots and x < knots[-1][0]:
            x = knots[-1][0]  # percentiles never fall; rounding may make them look so
        knots.append((x, share))
    if not knots:
        return ()
    if knots[0][1] > 0:
        knots.insert(0, (0.0, 0.0))
    if knots[-1][1] < 1:
        knots.append((knots[-1][0], 1.0))  # no max: the rest sits at the last percentile
    return tuple(knots)


@dataclass(frozen=True, slots=True)
class Contribution:
    """A tick in bucket space, in a few numbers whatever the buckets it spans: masses for
    the buckets where a segment ends, and a density (mass per ms, kept as a difference
    array) for the buckets a segment covers whole."""

    direct: tuple[tuple[int, float], ...]
    density: tuple[tuple[int, float], ...]


def contribution(tick: Tick) -> Contribution:
    direct: list[tuple[int, float]] = []
    density: list[tuple[int, float]] = []
    for (x0, f0), (x1, f1) in pairwise(tick.knots):
        mass = (f1 - f0) * tick.weight
        if mass <= 0:
            continue
        b0, b1 = bucket(x0), bucket(x1)
        if b0 == b1 or x1 <= x0:
            direct.append((b1, mass))
            continue
        per_ms = mass / (x1 - x0)
        direct.append((b0, per_ms * (_EDGES[b0 + 1] - x0)))
        direct.append((b1, per_ms * (x1 - _EDGES[b1])))
        if b1 > b0 + 1:
            density += [(b0 + 1, per_ms), (b1, -per_ms)]
    return Contribution(tuple(direct), tuple(density))


class Buckets:
    """A running sum of contributions; ticks are added and taken away."""

    def __init__(self) -> None:
        self.direct = [0.0] * _N
        self.density = [0.0] * (_N + 1)

    def add(self, c: Contribution, sign: float = 1.0) -> None:
        for k, m in c.direct:
            self.direct[k] += sign * m
        for k, d in c.density:
            self.density[k] += sign * d

    def masses(self) -> list[float]:
        out = []
        per_ms = 0.0
        for k in range(_N):
            per_ms += self.density[k]
            out.append(max(0.0, self.direct[k] + per_ms * _WIDTHS[k]))
        return out


def tick_masses(tick: Tick) -> dict[int, float]:
    """The tick's queries spread over buckets, uniform between consecutive knots."""
    b = Buckets()
    b.add(contribution(tick))
    return {k: m for k, m in enumerate(b.masses()) if m > 0}


def quantile(sums: Sequence[float], q: float) -> float | None:
    """The q-quantile of bucket sums, interpolated inside the bucket; None when empty."""
    total = sum(sums)
    if total <= 0:
        return None
    target = q * total
    acc = 0.0
    for k, m in enumerate(sums):
        if m > 0 and acc + m >= target:
            return _EDGES[k] + _WIDTHS[k] * (target - acc) / m
        acc += m
    return _EDGES[_N]


def window_quantiles(
    ticks: Sequence[Tick], q: float, window_ns: int
) -> tuple[float | None, tuple[float, int] | None]:
    """(the run's q-quantile, (the worst complete window's, its end)) over time-ordered ticks.

    Windows end at ticks and reach back window_ns; complete when they reach
    back to the first tick's own interval. Read about MAX_READS times.
    """
    run, win = Buckets(), Buckets()
    inside: deque[tuple[int, Contribution]] = deque()
    times = [t.time_ns for t in ticks]
    gaps = sorted(b - a for a, b in pairwise(times))
    step_ns = gaps[len(gaps) // 2] if gaps else 0
    # Read often enough that a burst shorter than 3/4 of a window is wholly
    # inside the window at some read.
    window_ticks = window_ns // step_ns if step_ns > 0 else 1
    read_every = max(1, min(math.ceil(len(ticks) / MAX_READS), window_ticks // 4))
    worst: tuple[float, int] | None = None
    for i, tick in enumerate(ticks):
        c = contribution(tick)
        run.add(c)
        win.add(c)
        inside.append((tick.time_ns, c))
        while inside and inside[0][0] <= tick.time_ns - window_ns:
            win.add(inside.popleft()[1], -1.0)
        complete = tick.time_ns - window_ns >= times[0] - step_ns
        if complete and (i % read_every == 0 or i == len(ticks) - 1):
            value = quantile(win.masses(), q)
            if value is not None and (worst is None or value > worst[0]):
                worst = (value, tick.time_ns)
    return quantile(run.masses(), q), worst


def latency_ticks(cs: ClassSeries) -> list[Tick]:
    """Each tick's percentiles and completed count (1 when not recorded); empty ticks dropped."""
    return list(iter_latency_ticks(cs))


def iter_latency_ticks(cs: ClassSeries) -> Iterator[Tick]:
    """latency_ticks one at a time, in the order of the p99 series."""
    by_name = {
        "min": dict(cs.min_ms),
        "p50": dict(cs.p50_ms),
        "p95": dict(cs.p95_ms),
        "p999": dict(cs.p999_ms),
        "max": dict(cs.max_ms),
    }
    completed = dict(cs.completed)
    for t, p99 in cs.p99_ms:
        weight = completed.get(t, 1.0)
        values = {name: series[t] for name, series in by_name.items() if t in series}
        knots = make_knots({**values, "p99": p99})
        if weight > 0 and knots:
            yield Tick(t, weight, knots)
