"""The latency histogram of the load engine and of the ledger's windows: sparse, mergeable,
with a compact text form stored beside each window's counts.

Values are whole microseconds. The buckets are HdrHistogram's at two significant digits
(lowest 1 µs): every value below 256 µs has a bucket of its own; above, each power of two
holds 128 buckets, so a bucket is at most 1/128 of its values wide. A percentile is the
highest value of the bucket in which the cumulative count first reaches the percentile's
share (as hdrh reads it, but the share not rounded half up: so the quantile of a merge
lies within its parts'), so a reported quantile lies at most 0.79% above the true one
(the ceil(q x n)-th value) and never below it; min, max and the mean are exact (kept beside
the buckets). Only the buckets that hold queries are kept (a dict), so adding two
histograms costs their occupied buckets, not the whole range.

Text form (`encode`): `min max sum n I;` then the n occupied buckets packed: their index
steps (each from the previous one) as little-endian uint16, then their counts as uint32
(`Q` in the head instead of `I`: uint64, for counts above 2**32), zlib-compressed and
base64-encoded, e.g. `"87 4120 213456 3 I;eJxj..."`; an empty
histogram is "". Decoding is whole-array work (no loop per bucket in Python), since a
report decodes every window of a run. docs/architecture.md ("The ledger") names the field
that carries it, `lat_hist`.
"""

from __future__ import annotations

import base64
import binascii
import math
import sys
import zlib
from array import array
from collections.abc import Iterable, Mapping
from fractions import Fraction
from itertools import accumulate, pairwise

_HALF_MAGNITUDE = 7  # 128 buckets per power of two
_HALF = 1 << _HALF_MAGNITUDE
_EXACT_BITS = _HALF_MAGNITUDE + 1  # below 2**8 = 256 µs, one bucket per value
MAX_RELATIVE_ERROR = 1 / _HALF  # a bucket's width over its lowest value, at most
PERCENTILES = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))
LATENCY_KEYS = ("min", "avg", *(k for k, _ in PERCENTILES), "max")
_SWAP = sys.byteorder != "little"  # the packed form is little-endian everywhere
_UINT32_MAX = 2**32 - 1
_COUNT_TYPES = {"I": "I", "Q": "Q"}  # counts as uint32, or uint64 where one needs it


def bucket_of(us: int) -> int:
    """The bucket index of a latency in whole µs (hdrh's counts index)."""
    shift = max(us.bit_length(), _EXACT_BITS) - _EXACT_BITS
    return ((shift + 1) << _HALF_MAGNITUDE) + (us >> shift) - _HALF


def bucket_range(index: int) -> tuple[int, int]:
    """(lowest, highest) µs a bucket holds."""
    shift = (index >> _HALF_MAGNITUDE) - 1
    sub = (index & (_HALF - 1)) + _HALF
    if shift < 0:
        sub, shift = sub - _HALF, 0
    low = sub << shift
    return low, low + (1 << shift) - 1


class LatencyHistogram:
    """Counts per bucket, with the exact min, max and sum of the values recorded."""

    __slots__ = ("counts", "max_us", "min_us", "sum_us", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0
        self.sum_us = 0
        self.min_us = 0  # meaningful only when total > 0
        self.max_us = 0

    def record(self, us: int, n: int = 1) -> None:
        k = bucket_of(us)
        self.counts[k] = self.counts.get(k, 0) + n
        self.sum_us += us * n
        if not self.total or us < self.min_us:
            self.min_us = us
        if us > self.max_us:
            self.max_us = us
        self.total += n

    def record_all(self, lat_us: Mapping[int, int]) -> None:
        """A window's latencies (whole µs -> count)."""
        for us, n in lat_us.items():
            self.record(us, n)

    def add(self, other: LatencyHistogram) -> None:
        if not other.total:
            return
        counts = self.counts
        for k, n in other.counts.items():
            counts[k] = counts.get(k, 0) + n
        if not self.total or other.min_us < self.min_us:
            self.min_us = other.min_us
        self.max_us = max(self.max_us, other.max_us)
        self.total += other.total
        self.sum_us += other.sum_us

    def subtract(self, other: LatencyHistogram) -> None:
        """Take away a histogram added before (a sliding window's oldest second). The
        exact min and max no longer hold afterwards; quantiles and the mean do."""
        counts = self.counts
        for k, n in other.counts.items():
            left = counts.get(k, 0) - n
            if left > 0:
                counts[k] = left
            else:
                counts.pop(k, None)
        self.total -= other.total
        self.sum_us -= other.sum_us

    def clear(self) -> None:
        self.counts = {}
        self.total = self.sum_us = self.min_us = self.max_us = 0

    def value_at_percentile_us(self, percentile: float) -> int | None:
        """The top of the bucket holding the percentile's share of the values (hdrh's
        buckets; its rank not rounded); None when empty."""
        if self.total <= 0:
            return None
        # The first bucket whose cumulative count reaches the share itself, not the share
        # rounded (hdrh rounds half up): a mixture's quantile then lies within its parts'
        # (the count of a merge at a value is the sum of its parts'), which the audit holds
        # every merged figure to. Rounded, an `all` of 1,672 + 557 answers wanted 2,207 for
        # its p99 where its classes wanted 1,655 and 551, and read the next bucket up.
        share = Fraction(str(min(percentile, 100.0))) * self.total / 100
        wanted = max(1, math.ceil(share))
        seen = 0
        for k in sorted(self.counts):
            seen += self.counts[k]
            if seen >= wanted:
                low, high = bucket_range(k)
                return high if percentile else low
        return bucket_range(max(self.counts))[1]

    def quantile_ms(self, q: float) -> float | None:
        """The q-quantile (0..1) in ms; None when empty."""
        us = self.value_at_percentile_us(q * 100.0)
        return None if us is None else us / 1000

    def latency_ms(self) -> dict[str, float | None]:
        """min, avg, p50, p95, p99, p999, max in ms (None without samples)."""
        if self.total <= 0:
            return dict.fromkeys(LATENCY_KEYS, None)
        out: dict[str, float | None] = {
            "min": self.min_us / 1000,
            "avg": round(self.sum_us / self.total / 1000, 6),
        }
        for key, pct in PERCENTILES:
            us = self.value_at_percentile_us(pct)
            out[key] = None if us is None else us / 1000
        out["max"] = self.max_us / 1000
        return out

    def stddev_ms(self) -> float | None:
        """The standard deviation in ms, each bucket's queries at its middle value."""
        if self.total <= 0:
            return None
        mean_us = self.sum_us / self.total
        square_sum = 0.0
        for k, n in self.counts.items():
            low, high = bucket_range(k)
            square_sum += n * ((low + high) / 2 - mean_us) ** 2
        return round((square_sum / self.total) ** 0.5 / 1000, 6)

    def encode(self) -> str:
        if self.total <= 0:
            return ""
        keys = sorted(self.counts)
        steps = array("H", [keys[0], *(b - a for a, b in pairwise(keys))])
        values = [self.counts[k] for k in keys]
        counts = array("I" if max(values) <= _UINT32_MAX else "Q", values)
        if _SWAP:
            steps.byteswap()
            counts.byteswap()
        packed = zlib.compress(steps.tobytes() + counts.tobytes(), 6)
        head = f"{self.min_us} {self.max_us} {self.sum_us} {len(keys)} {counts.typecode}"
        return head + ";" + base64.b64encode(packed).decode()

    @classmethod
    def decode(cls, text: str) -> LatencyHistogram:
        """The histogram `encode` gave; ValueError on text it cannot have given. The
        buckets are unpacked as whole arrays: a report reads every window of a run."""
        out = cls()
        if not text:
            return out
        try:
            head, _, packed = text.partition(";")
            *numbers, typecode = head.split(" ")
            out.min_us, out.max_us, out.sum_us, n = map(int, numbers)
            raw = zlib.decompress(base64.b64decode(packed, validate=True))
            steps, counts = array("H"), array(_COUNT_TYPES[typecode])
            steps.frombytes(raw[: 2 * n])
            counts.frombytes(raw[2 * n :])
        except (ValueError, KeyError, binascii.Error, zlib.error) as exc:
            raise ValueError(f"not a latency histogram: {text[:40]!r} ({exc})") from None
        if _SWAP:
            steps.byteswap()
            counts.byteswap()
        if len(steps) != n or len(counts) != n or n == 0:
            raise ValueError(f"not a latency histogram: {text[:40]!r}")
        out.counts = dict(zip(accumulate(steps), counts, strict=True))
        out.total = sum(counts)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        return self.encode() == other.encode()

    __hash__ = None  # type: ignore[assignment]


def merged(histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
    out = LatencyHistogram()
    for h in histograms:
        out.add(h)
    return out
