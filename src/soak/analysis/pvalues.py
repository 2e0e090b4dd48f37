"""p-values of the tests the analysis and the benchmarks make: Student's t (of a
least-squares slope, of two means) and the F test of one added parameter, through the
regularized incomplete beta function. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on the other side
        return 1.0 - betainc(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-12:
            break
    return front * result / a


def f_test_p_value(sse_fewer: float, sse_more: float, n: int, params_more: int) -> float:
    """p of an F test that a model with one parameter more (params_more in all) fits n
    points better than one without it only by chance: F(1, n - params_more)."""
    df = n - params_more
    if df <= 0 or sse_more >= sse_fewer:
        return 1.0
    if sse_more <= 0:
        return 0.0
    f = (sse_fewer - sse_more) / (sse_more / df)
    return betainc(df / 2, 0.5, df / (df + f))


def t_two_sided_p_value(t: float, df: float) -> float:
    """Two-sided p of Student's t with `df` degrees of freedom."""
    return min(1.0, betainc(df / 2, 0.5, df / (df + t * t)))


def slope_falls_p_value(points: Sequence[tuple[float, float]]) -> float:
    """One-sided p that the least-squares slope of y on x is below zero only by chance
    (Student's t of the slope, n - 2 degrees of freedom); 1 with fewer than 3 points."""
    n = len(points)
    if n < 3:
        return 1.0
    mid_x = sum(x for x, _ in points) / n
    mean = sum(y for _, y in points) / n
    sxx = sum((x - mid_x) ** 2 for x, _ in points)
    if sxx <= 0:
        return 1.0
    slope = sum((x - mid_x) * (y - mean) for x, y in points) / sxx
    sse = sum((y - mean - slope * (x - mid_x)) ** 2 for x, y in points)
    df = n - 2
    if sse <= 0:
        return 0.0 if slope < 0 else 1.0
    t = slope / math.sqrt(sse / df / sxx)
    two_sided = t_two_sided_p_value(t, df)
    return two_sided / 2 if t < 0 else 1.0 - two_sided / 2


def mann_kendall_smallest_p(n: int) -> float:
    """The smallest two-sided p-value Mann-Kendall can give on n points (every pair in
    order, no ties; normal approximation with the continuity correction, as the test)."""
    if n < 2:
        return 1.0
    s_max = n * (n - 1) / 2
    var_s = n * (n - 1) * (2 * n + 5) / 18.0
    return min(1.0, math.erfc((s_max - 1) / math.sqrt(var_s) / math.sqrt(2.0)))


def mann_kendall_points_needed(p_value_max: float) -> int:
    """The fewest points on which Mann-Kendall can reach p < p_value_max (5 at 0.05):
    fewer can show no trend at all, so they can give no verdict, not even `ok`."""
    n = 2
    while mann_kendall_smallest_p(n) >= p_value_max:
        n += 1
    return n
