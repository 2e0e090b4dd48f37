"""Small statistics for benchmark figures, pure and seeded: medians, spread, a bootstrap
confidence interval of a relative difference, and the Mann-Whitney U test."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from soak.analysis.pvalues import t_two_sided_p_value


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of nothing")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


@dataclass(frozen=True)
class Summary:
    """A series of runs as the sdns seed reports it: median, best, and the spread."""

    median: float
    best: float
    low: float
    high: float
    spread_pct: float  # (high - low) / median, in percent: the whole range, not +-half
    n: int


def summarise(values: Sequence[float], *, higher_is_better: bool = True) -> Summary:
    if not values:
        raise ValueError("no runs to summarise")
    med = median(values)
    low, high = min(values), max(values)
    spread = 100.0 * (high - low) / med if med else 0.0
    return Summary(med, high if higher_is_better else low, low, high, spread, len(values))


def rel_diff_pct(a: float, b: float) -> float:
    """(b - a) / a in percent; 0 when both are 0, +-inf when only a is."""
    if a == 0:
        return 0.0 if b == 0 else math.copysign(math.inf, b)
    return 100.0 * (b - a) / abs(a)


def bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 12,
) -> tuple[float, float]:
    """A percentile-bootstrap interval of rel_diff_pct(median(a), median(b)).

    Each side is resampled with replacement on its own (the samples are window
    or run values, not pairs). Seeded, so one comparison always gives one answer.
    """
    if not a or not b:
        raise ValueError("bootstrap needs values on both sides")
    rng = random.Random(seed)
    diffs = []
    for _ in range(resamples):
        ra = median(rng.choices(a, k=len(a)))
        rb = median(rng.choices(b, k=len(b)))
        diffs.append(rel_diff_pct(ra, rb))
    diffs.sort()
    tail = (1 - confidence) / 2
    lo = diffs[math.floor(tail * (resamples - 1))]
    hi = diffs[math.ceil((1 - tail) * (resamples - 1))]
    return lo, hi


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """U of `a` and the two-sided p-value (normal approximation, ties corrected).

    With fewer than about 8 values a side the approximation is rough; the
    bootstrap interval is the figure that decides verdicts.
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs values on both sides")
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[k] = rank
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, pooled, strict=True) if side == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    mean = n1 * n2 / 2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u1, 1.0
    z = (abs(u1 - mean) - 0.5) / math.sqrt(var)  # continuity correction
    p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return u1, min(1.0, p)


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean; None with fewer than two values or mean 0."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    if mean == 0:
        return None
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / abs(mean)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, at most 1); None stays None.

    A figure is significant at level alpha after the correction when its adjusted
    p-value is below alpha: the family-wise error over all the figures compared
    stays at alpha.
    """
    indexed = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's t (B's mean minus A's, unequal variances) and its two-sided p-value.

    Unlike a rank test it can reach a small p with three values a side when the
    difference is large against the spread; one outlier widens the spread and
    raises p. Two or more values a side.
    """
    n1, n2 = len(a), len(b)
    if n1 < 2 or n2 < 2:
        raise ValueError("Welch's t-test needs two or more values a side")
    m1, m2 = sum(a) / n1, sum(b) / n2
    v1 = sum((x - m1) ** 2 for x in a) / (n1 - 1)
    v2 = sum((x - m2) ** 2 for x in b) / (n2 - 1)
    se2 = v1 / n1 + v2 / n2
    if se2 == 0:
        return (0.0, 1.0) if m1 == m2 else (math.copysign(math.inf, m2 - m1), 0.0)
    t = (m2 - m1) / math.sqrt(se2)
    df = se2**2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    return t, t_two_sided_p_value(t, df)
