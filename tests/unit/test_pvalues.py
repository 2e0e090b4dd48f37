"""Student's t of a least-squares slope and of two means (soak.analysis.pvalues)."""

from __future__ import annotations

import random

import pytest

from soak.analysis.pvalues import slope_falls_p_value, t_two_sided_p_value


def test_t_two_sided_at_known_quantiles() -> None:
    # Student's t tables: t 2.228 at 10 degrees of freedom is p 0.05 two-sided, 3.169 is 0.01.
    assert t_two_sided_p_value(2.228, 10) == pytest.approx(0.05, abs=2e-4)
    assert t_two_sided_p_value(-3.169, 10) == pytest.approx(0.01, abs=1e-4)
    assert t_two_sided_p_value(0.0, 5) == 1.0


def test_a_falling_slope_is_told_from_noise_and_a_rising_one_never() -> None:
    rng = random.Random(7)
    falling = [(float(x), 10.0 - 0.5 * x + rng.gauss(0, 1)) for x in range(20)]
    rising = [(x, -y) for x, y in falling]
    assert slope_falls_p_value(falling) < 0.001
    assert slope_falls_p_value(rising) > 0.999
    assert slope_falls_p_value(falling[:2]) == 1.0  # too few to say
    assert slope_falls_p_value([(float(x), 3.0 - x) for x in range(5)]) == 0.0  # exact
    flat = [(float(x), rng.gauss(0, 1)) for x in range(200)]
    seeds = [slope_falls_p_value([(x, rng.gauss(0, 1)) for x, _ in flat]) for _ in range(400)]
    assert 0.02 < sum(p < 0.05 for p in seeds) / len(seeds) < 0.09  # about 5% by chance
