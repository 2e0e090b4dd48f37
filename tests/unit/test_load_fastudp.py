"""The compiled UDP loop is built by the install, and its latency buckets."""

from __future__ import annotations

import pytest

from soak.load import udp_fast


def test_the_extension_is_built_by_the_install() -> None:
    # `pip install -e .` (make setup) compiles it; without it workers fall back silently.
    assert udp_fast.available()


@pytest.mark.parametrize(
    ("us", "reported"),
    [
        (0, 0),
        (1, 1),
        (2047, 2047),
        (2048, 2048),
        (2049, 2048),
        (4099, 4096),
        (1_999_999, 1_999_872),
    ],
)
def test_latency_buckets_are_exact_below_2048_us_then_within_0_1_percent(
    us: int, reported: int
) -> None:
    from soak.load._fastudp import bucket_value

    assert bucket_value(us) == reported
    assert 0 <= us - reported <= us / 1024
