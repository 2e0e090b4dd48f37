"""Leak verdicts of one run from its stored series: which series, after the warm-up.

Glue between the point store and the pure leak analysis: a resource named in
`leaks.thresholds` is a field of the `process` or the `runtime` measurement.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from soak.analysis.leaks import LeakFits, LeakVerdict
from soak.analysis.levelling import amount, span_text
from soak.analysis.scenario_sections import LeaksConfig
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
) -> list[LeakVerdict]:
    """A verdict for every resource with a threshold that the run sampled at all.

    Periodic passes give the same `fits` each time: a pass then costs a new
    window's points, not the run's (soak.analysis.leaks.LeakFit).
    """
    fits = fits if fits is not None else LeakFits()
    verdicts = []
    for resource, threshold in cfg.thresholds.items():
        minima = resource_minima(store, soak_id, resource, since_ns, cfg.window_s)
        if minima is None:
            continue
        fit = fits.fit((soak_id, resource, since_ns, cfg.window_s))
        fit.update(minima)  # the store's own tuple: the same object while nothing closed
        v = fit.verdict(
            resource=resource,
            threshold_per_hour=threshold,
            min_windows=cfg.min_windows,
            min_span_s=cfg.min_span_s or 0.0,
            startup_max_s=cfg.startup_wait_s,
            p_value_max=cfg.p_value,
        )
        cap = cfg.caps.get(resource)
        verdicts.append(toward_cap(v, minima[-1][1], cap) if cap and minima else v)
    return verdicts


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
