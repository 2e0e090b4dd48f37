"""Leak verdicts of one run from its stored series: which series, after the warm-up.

Glue between the point store and the pure leak analysis: a resource named in
`leaks.thresholds` is a field of the `process` or the `runtime` measurement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

from soak.analysis.accounting import (
    ACCOUNTING_FIELDS,
    Accounting,
    accounting,
    explains,
    unexplained,
)
from soak.analysis.leaks import LeakFits, LeakVerdict
from soak.analysis.levelling import amount, span_text
from soak.analysis.reach import SHORT_WINDOWS_PER_WINDOW, Reach, reaching, short_window_s
from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.shape import Rise, is_count, keeps_rate, staircase
from soak.analysis.trendfit import TrendFit
from soak.clock import ns_to_s

# Where resource fields live (docs/architecture.md "Time series"); any other name is looked
# up in both.
RESOURCE_MEASUREMENTS = ("process", "runtime")

Value = float | str


class SeriesReader(Protocol):
    def series(
        self, soak: str, measurement: str, field: str, tags: dict[str, str] | None = None
    ) -> list[tuple[dict[str, str], list[tuple[int, Value]]]]: ...

    def window_minima(
        self, soak: str, measurement: str, field: str, since_ns: int, window_s: float
    ) -> tuple[tuple[float, float], ...] | None: ...


def resource_series(
    store: SeriesReader, soak_id: str, resource: str, since_ns: int
) -> tuple[list[float], list[float]] | None:
    """(times_s, values) of a resource from `since_ns` on; None when it was never sampled."""
    for measurement in RESOURCE_MEASUREMENTS:
        found = store.series(soak_id, measurement, resource)
        if not found:
            continue
        times_s: list[float] = []
        values: list[float] = []
        for _tags, samples in found[:1]:  # one series per resource (no extra tags)
            for time_ns, value in samples:
                if time_ns >= since_ns and isinstance(value, int | float):
                    times_s.append(ns_to_s(time_ns))
                    values.append(float(value))
        return times_s, values
    return None


def resource_minima(
    store: SeriesReader, soak_id: str, resource: str, since_ns: int, window_s: float
) -> tuple[tuple[float, float], ...] | None:
    """The window minima of a resource from `since_ns` on; None when it was never sampled."""
    for measurement in RESOURCE_MEASUREMENTS:
        minima = store.window_minima(soak_id, measurement, resource, since_ns, window_s)
        if minima is not None:
            return minima
    return None


def run_verdicts(
    store: SeriesReader,
    soak_id: str,
    cfg: LeaksConfig,
    since_ns: int,
    fits: LeakFits | None = None,
    limits: Mapping[str, float] | None = None,
    sample_interval_s: float = 1.0,
) -> list[LeakVerdict]:
    """A verdict for every resource with a threshold that the run sampled at all.

    Periodic passes give the same `fits` each time: a pass then costs a new
    window's points, not the run's (soak.analysis.leaks.LeakFit). `limits`: each
    resource's limit (memory bytes, fds), for growth that reaches it soon
    (soak.analysis.reach); the server's own accounting, where sampled, says what a
    memory rise is (soak.analysis.accounting).
    """
    fits = fits if fits is not None else LeakFits()
    acc = _accounting(store, soak_id, cfg, since_ns)
    verdicts = []
    for resource, threshold in cfg.thresholds.items():
        minima = resource_minima(store, soak_id, resource, since_ns, cfg.window_s)
        if minima is None:
            continue
        fit = fits.fit((soak_id, resource, since_ns, cfg.window_s))
        fit.update(minima)  # the store's own tuple: the same object while nothing closed
        asked = {
            "resource": resource,
            "threshold_per_hour": threshold,
            "min_windows": cfg.min_windows,
            "min_span_s": cfg.min_span_s or 0.0,
            "p_value_max": cfg.p_value,
        }
        v = fit.verdict(**asked, startup_max_s=cfg.startup_wait_s)  # type: ignore[arg-type]
        if acc is not None and v.verdict in ("growing", "insufficient"):
            at_once = fit.verdict(**asked, startup_max_s=0.0)  # type: ignore[arg-type]
            v = with_accounting(v, at_once, acc)
        short_s = short_window_s(cfg.window_s, sample_interval_s)
        if v.verdict == "insufficient" and v.why in ("startup", "windows", "power"):
            rise = _shape(store, soak_id, cfg, since_ns, resource, minima, acc, v, short_s)
            if rise is not None:
                at_once = fit.verdict(**asked, startup_max_s=0.0)  # type: ignore[arg-type]
                v = by_shape(v, at_once, rise, acc)
        limit = (limits or {}).get(resource)
        if limit and v.verdict != "growing":
            short = resource_minima(store, soak_id, resource, since_ns, short_s)
            reach = reaching(short or (), limit, cfg.horizon_s, cfg.p_value)
            if reach is not None and not (
                acc is not None and explains(acc, resource, reach.slope_per_s)
            ):
                v = at_limit(v, reach)
        cap = cfg.caps.get(resource)
        verdicts.append(toward_cap(v, minima[-1][1], cap) if cap and minima else v)
    return verdicts


def _shape(
    store: SeriesReader,
    soak_id: str,
    cfg: LeaksConfig,
    since_ns: int,
    resource: str,
    minima: tuple[tuple[float, float], ...],
    acc: Accounting | None,
    v: LeakVerdict,
    short_s: float,
) -> Rise | None:
    """A rise from the warm-up's end that its shape shows to be a leak's
    (soak.analysis.shape): a count's staircase that never falls back; memory the server's
    flat accounting does not explain, keeping its rate over the short windows (start-up
    growth slows down, a leak does not)."""
    threshold_per_s = v.threshold_per_hour / 3600.0
    if is_count(resource, minima):
        return staircase(minima, threshold_per_s)
    if acc is not None and unexplained(acc, resource):
        short = resource_minima(store, soak_id, resource, since_ns, short_s) or ()
        if len(short) < 2 * SHORT_WINDOWS_PER_WINDOW:
            return None
        t = TrendFit(short).trend(cfg.p_value)
        if t.s <= 0 or t.p_value >= cfg.p_value:
            return None
        return keeps_rate(short, threshold_per_s, cfg.p_value)
    # Memory with no accounting waits: a cache fills at a steady pace for an hour or two
    # (unbound's and pdns-recursor's did, their accounting aside: docs/analysis.md).
    return None


def by_shape(
    v: LeakVerdict, at_once: LeakVerdict, rise: Rise, acc: Accounting | None
) -> LeakVerdict:
    """`growing` from its shape: the verdict with no wait for start-up growth when it is
    one, else (too few leak windows for it yet) the shape's own slope."""
    said = f"judged at once: {rise.words()}"
    if acc is not None:
        said += f"; {acc.words()}, flat"
    if at_once.verdict == "growing":
        note = f"{said}; {at_once.note}" if at_once.note else said
        return dataclasses.replace(at_once, note=note, why="")
    return dataclasses.replace(
        v, verdict="growing", slope_per_hour=rise.slope_per_s * 3600.0, note=said, why=""
    )


def _accounting(
    store: SeriesReader, soak_id: str, cfg: LeaksConfig, since_ns: int
) -> Accounting | None:
    """The server's own accounting over the judged windows, where the run samples one."""
    for field in ACCOUNTING_FIELDS:
        minima = resource_minima(store, soak_id, field, since_ns, cfg.window_s)
        if minima and len(minima) >= 2:
            return accounting(field, minima, cfg.p_value)
    return None


def with_accounting(v: LeakVerdict, at_once: LeakVerdict, acc: Accounting) -> LeakVerdict:
    """A memory verdict given what the server says it holds: a rise its still-filling cache
    explains is `levelling`; one while its cache stays flat is judged at once (`at_once`:
    the verdict with no wait for start-up growth)."""
    if at_once.verdict == "growing" and explains(acc, v.resource, at_once.slope_per_hour / 3600):
        note = f"explained: {acc.words()}, still filling (a cache fills toward its cap)"
        return dataclasses.replace(at_once, verdict="levelling", note=note, why="")
    if v.why != "startup" or at_once.why:
        return v
    if unexplained(acc, v.resource):
        said = f"judged at once: {acc.words()}, flat: the rise is not its cache"
    elif acc.filling:
        said = f"judged at once: {acc.words()}, still filling"
    else:
        return v
    note = f"{said}; {at_once.note}" if at_once.note else said
    return dataclasses.replace(at_once, note=note)


def at_limit(v: LeakVerdict, reach: Reach) -> LeakVerdict:
    """`growing` at once: at its pace the resource reaches its limit within the horizon."""
    limit = amount(v.resource, reach.limit)
    note = f"reaches its limit {limit} in {span_text(reach.to_limit_s / 3600)} at this pace"
    return dataclasses.replace(
        v, verdict="growing", slope_per_hour=reach.slope_per_s * 3600.0, note=note, why=""
    )


def toward_cap(v: LeakVerdict, current: float, cap: float) -> LeakVerdict:
    """A `growing` verdict of a resource still under its declared cap (`leaks.caps`: a
    cache's size, say) is `levelling`, with when the cap is reached at this slope; at or
    above the cap it stays `growing` (the growth is then more than was declared)."""
    if v.verdict != "growing" or current >= cap or v.slope_per_hour <= 0:
        return v
    hours = (cap - current) / v.slope_per_hour
    cap_text = amount(v.resource, cap)
    note = f"rising toward its declared cap {cap_text}: reaches it in {span_text(hours)}"
    return dataclasses.replace(v, verdict="levelling", note=note)
