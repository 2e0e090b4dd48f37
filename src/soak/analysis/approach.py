"""A rise that approaches a plateau: an exponential approach fitted against a line.

Pure functions on the window minima (soak.analysis.rises asks only where a pass would
say `growing`). A memory that settles (a heap growing to what its load holds, a cache
whose misses thin out as it fills) rises like y = plateau - amplitude * e^(-t / tau):
fast, then slower and slower. A leak rises like a line. The two are told apart by their
fits over the windows since the judged start, each tau of a log grid (a twentieth of the
span to about 23 spans: a slower approach is a line over the span) giving the plateau and
the amplitude by least squares:

- the approach must fit better than a line with confidence: an F test of the one
  parameter it adds, at p_value_max x TAIL_CONFIDENCE_FACTOR (calling a leak `levelling`
  silences it; on 500 seeded noisy lines of 6 to 60 windows, 0 to 4 passed);
- two lines with a corner must not fit better (an F test at p_value_max): start-up
  growth that ends in a slower leak is concave too, but a corner, not a curve;
- an approach to a line (y = a + trend t - amplitude e^(-t / tau): a transient on top of
  a leak) must not fit better with its trend over the threshold.

The slowing is then the curve's: its plateau, its slope now and when that falls under the
threshold (soak.analysis.levelling.Settling says it). The decelerating check of thirds
(soak.analysis.levelling.decelerating) needs 12 windows of a curve and a last third
flat with confidence; this needs 6 and a curve that the noise cannot have drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from soak.analysis.changepoint import line_sse, two_lines_sse
from soak.analysis.levelling import TAIL_CONFIDENCE_FACTOR, Settling
from soak.analysis.pvalues import f_test_p_value, slope_falls_p_value

Pair = tuple[float, float]

MIN_POINTS = 6  # 3 parameters and 3 degrees of freedom left
# tau in spans of the points: TAU_FIRST x TAU_STEP^k, k < TAU_STEPS (0.05 to about 23).
TAU_FIRST = 0.05
TAU_STEP = 1.08
TAU_STEPS = 80
# A rise still this many times faster than the threshold is `growing` however it bends:
# its plateau lies more than ln 8 (2.1) time constants ahead, further than the fit's
# evidence reaches, and an alert at such a pace is worth keeping. refdns-settle in the
# corpus (tests/fixtures/leaks) is called `levelling` at 3.6 x and under; a leak at 36 x
# whose pace wavers (tests/unit/test_changepoint.py) slowed by chance over 7-8 windows
# with p < 0.005 at 16 and 23 x.
SLOPE_MAX_THRESHOLDS = 8.0


@dataclass(frozen=True, slots=True)
class _Fit:
    sse: float
    tau: float  # in spans of the points
    plateau: float
    amplitude: float  # the rise still to come at the first point: > 0 for a concave rise


def _centred(xs: Sequence[float]) -> list[float]:
    mean = sum(xs) / len(xs)
    return [x - mean for x in xs]


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _approach(us: Sequence[float], ys: Sequence[float]) -> _Fit | None:
    """The best y = plateau - amplitude e^(-u / tau) over the grid (u in spans, from 0)."""
    y = _centred(ys)
    syy, mean_y = _dot(y, y), sum(ys) / len(ys)
    best: _Fit | None = None
    for k in range(TAU_STEPS):
        tau = TAU_FIRST * TAU_STEP**k
        raw = [math.exp(-u / tau) for u in us]
        e = _centred(raw)
        see = _dot(e, e)
        if see <= 0:
            continue
        sey = _dot(e, y)
        coef = sey / see
        sse = max(0.0, syy - sey * coef)
        if best is None or sse < best.sse:
            plateau = mean_y - coef * sum(raw) / len(raw)
            best = _Fit(sse, tau, plateau, -coef)
    return best


def _approach_to_a_line(us: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(squared error, trend per span) of the best y = a + trend u + c e^(-u / tau)."""
    u, y = _centred(us), _centred(ys)
    suu, suy, syy = _dot(u, u), _dot(u, y), _dot(y, y)
    best = (math.inf, 0.0)
    for k in range(TAU_STEPS):
        e = _centred([math.exp(-x / (TAU_FIRST * TAU_STEP**k)) for x in us])
        see, sue, sey = _dot(e, e), _dot(u, e), _dot(e, y)
        det = suu * see - sue * sue
        if det <= 1e-12 * suu * see:
            continue  # e is a line over the span: no third parameter
        trend = (suy * see - sey * sue) / det
        c = (sey * suu - suy * sue) / det
        sse = max(0.0, syy - trend * suy - c * sey)
        if sse < best[0]:
            best = (sse, trend)
    return best


def _increments_fall_p_value(points: Sequence[Pair]) -> float:
    """One-sided p that the rise per second from each point to the next falls with time
    (the least-squares slope of those rates, Student's t): a leak whose pace wavers (a
    busy machine) is a random walk, whose wanders a curve fitted to the levels takes for
    slowing (the F test assumes independent noise); its rates are independent, and do
    not fall. With noise on the levels instead, the rates' noise is negatively
    correlated and the test errs on the safe side."""
    rates = [
        ((t0 + t1) / 2, (v1 - v0) / (t1 - t0)) for (t0, v0), (t1, v1) in pairwise(points) if t1 > t0
    ]
    return slope_falls_p_value(rates)


def approaching(
    points: Sequence[Pair], threshold_per_hour: float, p_value_max: float
) -> Settling | None:
    """The projected plateau of a rise of (s, value) points that approaches one (see the
    module's rules), or None: a line, a corner, a transient on a leak, too few points."""
    n = len(points)
    if n < MIN_POINTS:
        return None
    t0, span_s = points[0][0], points[-1][0] - points[0][0]
    if span_s <= 0:
        return None
    us = [(t - t0) / span_s for t, _ in points]
    ys = [v for _, v in points]
    fit = _approach(us, ys)
    if fit is None or fit.amplitude <= 0 or fit.tau >= TAU_FIRST * TAU_STEP ** (TAU_STEPS - 1):
        return None  # convex, or so slow an approach that it is a line here
    confident = p_value_max * TAIL_CONFIDENCE_FACTOR
    if f_test_p_value(line_sse(points), fit.sse, n, 3) >= confident:
        return None
    if _increments_fall_p_value(points) >= confident:
        return None  # a wavering pace, not a slowing one
    if f_test_p_value(fit.sse, two_lines_sse(points), n, 4) < p_value_max:
        return None  # a corner fits better
    sse_trend, trend_per_span = _approach_to_a_line(us, ys)
    threshold_per_s = threshold_per_hour / 3600.0
    if trend_per_span / span_s > threshold_per_s and (
        f_test_p_value(fit.sse, sse_trend, n, 4) < p_value_max
    ):
        return None  # a transient on top of a rise over the threshold
    slope_now_per_s = fit.amplitude / fit.tau * math.exp(-1.0 / fit.tau) / span_s
    if slope_now_per_s > SLOPE_MAX_THRESHOLDS * threshold_per_s:
        return None
    under_s = (
        fit.tau * span_s * math.log(slope_now_per_s / threshold_per_s)
        if slope_now_per_s > threshold_per_s > 0
        else 0.0
    )
    return Settling(fit.plateau, ys[-1], slope_now_per_s, under_s / 3600.0)
