"""Small statistics for benchmark figures, pure and seeded: medians, spread, a bootstrap
confidence interval of a relative difference, and the Mann-Whitney U test."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


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
