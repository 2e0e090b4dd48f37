"""What the server says it holds: growth its own accounting explains, and growth it
does not.

A server that reports its cache (unbound's mem.cache.*, pdns-recursor's cache-bytes or
cache-entries, refdns's refdns_cache_entries, mapped by the `prom` sampler or the
`server` sampler to `cache_bytes` / `cache_entries`) tells a filling cache from a leak:
memory that rises while the cache it reports rises is explained (a cache fills: it is
bounded by its cap, `levelling`); memory that rises while the cache it reports stays
flat is not, and is judged at once, with no wait for start-up growth to stop. Pure:
window minima in, a finding out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from soak.analysis.trendfit import TrendFit

# Fields of a server's own accounting, in the order they are preferred (bytes compare
# with memory directly; entries only say whether the cache still fills).
ACCOUNTING_FIELDS = ("cache_bytes", "cache_entries")
# Memory resources the accounting can explain.
EXPLAINABLE = ("rss_anon_bytes", "rss_bytes", "pss_bytes", "heap_inuse_bytes", "heap_alloc_bytes")
# The cache still fills when its newest windows rose by more than this share of its level.
FILLING_MIN_SHARE = 0.01
# Windows of the newest part asked whether the cache still fills.
RECENT_WINDOWS = 3
# Memory may cost up to this many times the bytes a cache reports (allocator and index
# overhead): a rise faster than that is more than the cache.
OVERHEAD_MAX = 3.0
# A cache entry (a message, an RRset, its index) costs at most this much memory: a rise
# of more bytes per entry the cache gained is more than the cache (a leak beside it).
BYTES_PER_ENTRY_MAX = 16 * 1024


@dataclass(frozen=True, slots=True)
class Accounting:
    field: str
    first: float  # the first judged window's minimum
    last: float  # the newest window's
    filling: bool  # still rising in its newest windows
    slope_per_s: float  # over the judged windows (Theil-Sen)

    def words(self) -> str:
        return f"the server's own {self.field} {_num(self.first)} -> {_num(self.last)}"


def accounting(field: str, minima: Sequence[tuple[float, float]], p_value_max: float) -> Accounting:
    """The accounting series' course over the judged windows."""
    values = [v for _, v in minima]
    first, last = values[0], values[-1]
    recent = values[-RECENT_WINDOWS:]
    level = max(abs(last), 1.0)
    rose_recently = (recent[-1] - recent[0]) / level > FILLING_MIN_SHARE
    t = TrendFit(minima).trend(p_value_max)
    return Accounting(field, first, last, rose_recently, t.slope_per_s)


def explains(acc: Accounting, resource: str, resource_slope_per_s: float) -> bool:
    """Does the server's own accounting explain a memory rise at this slope? Only while its
    cache still fills, and only up to OVERHEAD_MAX times the bytes it reports gaining, or
    BYTES_PER_ENTRY_MAX for each entry it gains."""
    if resource not in EXPLAINABLE or not acc.filling:
        return False
    if acc.field == "cache_bytes":
        return resource_slope_per_s <= OVERHEAD_MAX * max(acc.slope_per_s, 0.0)
    return resource_slope_per_s <= BYTES_PER_ENTRY_MAX * max(acc.slope_per_s, 0.0)


def unexplained(acc: Accounting, resource: str) -> bool:
    """The server's accounting stays flat: a memory rise is none of its cache's doing."""
    return (
        resource in EXPLAINABLE
        and not acc.filling
        and acc.last - acc.first <= (FILLING_MIN_SHARE * max(abs(acc.last), 1.0))
    )


def _num(value: float) -> str:
    return f"{value:,.0f}"
