"""What grew: profile diffs, the mapping that grew, a growing verdict's culprit and projection.

Pure functions. A diff compares two parsed Go profiles (soak.pproftext): the
first after the warm-up and the latest. Heap: in-use bytes by function (the
first frame that is not the runtime's) and by full stack; goroutines: count by
stack. RSS by mapping compares the first and the last `memory_map` sample of
each (kind, path).

A `growing` verdict gets a culprit (heap: the top growing function;
goroutines: the top growing stack; RSS: the mapping that grew most) and a
projection: at the verdict's slope, when the resource reaches its limit (a
docker `mem_limit` or the scenario's `limits.memory_bytes` for memory, the fd
limit for fds), as Prometheus' `predict_linear` alerts do; "no limit" when the
resource has none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from soak.pproftext import Profile, Record

# Resources whose culprit is read from a profile or from the mappings.
HEAP_RESOURCES = ("heap_inuse_bytes", "heap_alloc_bytes")
GOROUTINE_RESOURCES = ("goroutines",)
MEMORY_RESOURCES = (
    "rss_bytes",
    "rss_anon_bytes",
    "rss_file_bytes",
    "pss_bytes",
    *HEAP_RESOURCES,
)
FD_RESOURCES = ("fds",)


@dataclass(frozen=True, slots=True)
class Growth:
    name: str  # a function, a stack ("leaf < caller < ..."), or "kind path" of a mapping
    start: float
    end: float
    site: str = ""  # file:line of the leaf frame

    @property
    def delta(self) -> float:
        return self.end - self.start


def stack_label(stack: Sequence[str], depth: int = 4) -> str:
    shown = " < ".join(stack[:depth])
    return shown + (" < ..." if len(stack) > depth else "")


def _diff(
    base: Iterable[Record],
    latest: Iterable[Record],
    key: Callable[[Record], str],
    value: Callable[[Record], int],
    top: int,
) -> list[Growth]:
    sums: dict[str, list[float]] = {}
    sites: dict[str, str] = {}
    for i, records in enumerate((base, latest)):
        for r in records:
            k = key(r)
            sums.setdefault(k, [0.0, 0.0])[i] += value(r)
            sites.setdefault(k, r.site)
    grown = [Growth(k, s, e, sites[k]) for k, (s, e) in sums.items() if e > s]
    return sorted(grown, key=lambda g: (-g.delta, g.name))[:top]


def heap_functions(base: Profile, latest: Profile, top: int = 10) -> list[Growth]:
    """Functions whose in-use bytes grew most (flat: where the allocation was made)."""
    return _diff(base.records, latest.records, lambda r: r.function, lambda r: r.bytes, top)


def heap_stacks(base: Profile, latest: Profile, top: int = 10) -> list[Growth]:
    return _diff(base.records, latest.records, _stack_key, lambda r: r.bytes, top)


def goroutine_stacks(base: Profile, latest: Profile, top: int = 10) -> list[Growth]:
    """Goroutine stacks whose count grew most (a parked goroutine per request: a leak).

    A goroutine without frames (`19 @ 0x473421`: only goexit) is one being created or
    ending as the profile is taken: nowhere to point at, and not a parked one; left out
    rather than shown as an empty row."""
    return _diff(
        [r for r in base.records if r.stack],
        [r for r in latest.records if r.stack],
        _stack_key,
        lambda r: r.count,
        top,
    )


def _stack_key(r: Record) -> str:
    return stack_label(r.stack)


MapSeries = dict[tuple[str, str], list[tuple[int, float]]]  # (kind, path) -> (time_ns, value)


def mapping_growth(series: MapSeries, since_ns: int = 0, top: int = 10) -> list[Growth]:
    """Start -> end of every mapping group over the samples from `since_ns`, largest growth
    first; a group missing at the first (or the last) sample time counts 0 there (a file
    that came into the top N later, or fell out of it)."""
    times = [t for samples in series.values() for t, _ in samples if t >= since_ns]
    if not times:
        return []
    first_ns, last_ns = min(times), max(times)
    out = []
    for (kind, path), samples in series.items():
        part = [(t, v) for t, v in samples if t >= since_ns]
        if not part:
            continue
        start = part[0][1] if part[0][0] == first_ns else 0.0
        end = part[-1][1] if part[-1][0] == last_ns else 0.0
        out.append(Growth(f"{kind} {path}", start, end))
    return sorted(out, key=lambda g: (-g.delta, g.name))[:top]


@dataclass(frozen=True, slots=True)
class Projection:
    limit: float | None
    current: float | None
    hours_to_limit: float | None  # None: no limit, or not growing toward it
    text: str


def project(
    resource: str, current: float | None, slope_per_hour: float, limit: float | None
) -> Projection:
    """When `resource` reaches `limit` at `slope_per_hour` from `current` (predict_linear)."""
    if limit is None or limit <= 0:
        return Projection(None, current, None, "no limit")
    if current is None:
        return Projection(limit, None, None, "no current value")
    if current >= limit:
        return Projection(limit, current, 0.0, "at the limit now")
    if slope_per_hour <= 0:
        return Projection(limit, current, None, "not growing toward the limit")
    hours = (limit - current) / slope_per_hour
    return Projection(limit, current, hours, f"limit in {_duration(hours)}")


def _duration(hours: float) -> str:
    if hours < 1:
        return f"{hours * 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} days"


def limit_for(
    resource: str, memory_limit_bytes: float | None, fd_limit: float | None
) -> float | None:
    if resource in MEMORY_RESOURCES:
        return memory_limit_bytes
    if resource in FD_RESOURCES:
        return fd_limit
    return None


def culprit(
    resource: str,
    *,
    heap: Sequence[Growth] = (),
    goroutines: Sequence[Growth] = (),
    mappings: Sequence[Growth] = (),
) -> str | None:
    """The likely culprit of a growing resource, in words; None when nothing names one."""
    if resource in HEAP_RESOURCES and heap:
        top = heap[0]
        return f"{top.name} ({top.site}): +{_bytes(top.delta)} in use"
    if resource in GOROUTINE_RESOURCES and goroutines:
        top = goroutines[0]
        return f"{top.name} ({top.site}): +{top.delta:,.0f} goroutines"
    if resource in MEMORY_RESOURCES and mappings:
        anon = resource in ("rss_anon_bytes", *HEAP_RESOURCES)
        wanted = [g for g in mappings if not anon or g.name.split(" ", 1)[0] in ("heap", "stack")]
        if wanted and wanted[0].delta > 0:
            return f"mapping {wanted[0].name}: +{_bytes(wanted[0].delta)} RSS"
    return None


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
