"""The leak pass as it was before the store kept window minima: the reference its
replacement is compared with (tests/unit/test_leak_pass.py, bench/leak_pass.py)."""

from __future__ import annotations

from soak.analysis.leaks import LeakVerdict, leak_verdict
from soak.analysis.verdicts import resource_series
from soak.config import LeaksConfig
from soak.sinks.sqlite import SqliteStore


def full_read_verdicts(
    store: SqliteStore, soak: str, cfg: LeaksConfig, since_ns: int
) -> list[LeakVerdict]:
    """Every sample of every resource read, then the windows and the fit computed."""
    out = []
    for resource, threshold in cfg.thresholds.items():
        series = resource_series(store, soak, resource, since_ns)
        if series is None:
            continue
        out.append(
            leak_verdict(
                *series,
                resource=resource,
                threshold_per_hour=threshold,
                window_s=cfg.window_s,
                min_windows=cfg.min_windows,
                p_value_max=cfg.p_value,
            )
        )
    return out
