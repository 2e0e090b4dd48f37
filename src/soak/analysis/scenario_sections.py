"""The scenario sections the analysis judges by: `leaks:` and `criteria:` (soak.config
composes them into a Scenario)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from soak.units import DurationS, StrictModel, parse_size_bytes

_RATE_RE = re.compile(r"^\s*([^/]+?)\s*/\s*(s|m|h|d)\s*$")
_PER_UNIT_H = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0}


def parse_rate_per_h(value: Any) -> float:
    """Growth thresholds: "5MiB/h" -> bytes per hour, "1/h" -> units per hour, 2.5 -> 2.5/h."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        m = _RATE_RE.match(value)
        if m:
            return parse_size_bytes(m.group(1)) / _PER_UNIT_H[m.group(2)]
    raise ValueError(f"not a rate: {value!r} (use e.g. 5MiB/h, 1/h)")


# A rise from the warm-up's end is judged once it stops or after this many windows.
STARTUP_WINDOWS = 24


class LeaksConfig(StrictModel):
    window_s: DurationS = 600.0  # the minimum of each window removes the GC sawtooth
    min_windows: int = Field(default=6, ge=3)
    # No verdict before the judged windows span this long (None: min_windows windows are
    # enough): start-up growth that outlasts the warm-up is then past before any judgement.
    min_span_s: DurationS | None = None
    # Start-up growth is left out once it stops (judged from its end). Until the windows
    # span this long, a rise from the warm-up's end that has not stopped yet is not judged
    # (start-up growth or a leak from the start: nothing tells them apart); 0: judged at
    # once, a leak from the start found as soon as its trend is. None: STARTUP_WINDOWS
    # windows (4 h at 10-min windows), what the caches and start-ups of the labelled
    # corpus need to stop rising (docs/analysis.md).
    startup_max_s: DurationS | None = None
    p_value: float = Field(default=0.05, gt=0, lt=1)
    # A rise that reaches the target's limit (its container's memory, limits.memory_bytes,
    # else the machine's memory; its fd limit) within this long is `growing` at once,
    # whatever waits (soak.analysis.reach).
    horizon_s: DurationS = Field(default=6 * 3600.0, gt=0)
    interval_s: DurationS = 60.0  # how often verdicts are computed
    # field name (of process/runtime) -> growth threshold per hour
    thresholds: dict[str, float] = Field(
        default_factory=lambda: {
            "rss_anon_bytes": 5 * 1024**2,
            "heap_inuse_bytes": 5 * 1024**2,
            "fds": 1.0,
            "goroutines": 10.0,
            "threads": 1.0,
        }
    )

    # field name -> the level it is expected to grow to (a cache's size; "512MiB" or a
    # count): growth below it is `levelling`, with when it gets there.
    caps: dict[str, float] = Field(default_factory=dict)

    @property
    def startup_wait_s(self) -> float:
        """How long a rise from the warm-up's end may go on before it is judged."""
        if self.startup_max_s is None:
            return STARTUP_WINDOWS * self.window_s
        return self.startup_max_s

    @field_validator("caps", mode="before")
    @classmethod
    def _sizes(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: float(parse_size_bytes(v)) for k, v in value.items()}
        return value

    @field_validator("thresholds", mode="before")
    @classmethod
    def _rates(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: parse_rate_per_h(v) for k, v in value.items()}
        return value


class CriteriaConfig(StrictModel):
    window_s: DurationS = 300.0  # sliding windows, besides the whole run
    lost_ratio_max: float | None = 0.001
    wrong_answers_max: int | None = 0
    p99_ms_max: dict[str, float] = Field(default_factory=dict)  # class (or "all") -> ms
    # Ticks in which the machine was busier than this share of all CPUs (the `host`
    # sampler's cpu_busy_ratio) are left out of the latency criteria: not judged.
    host_busy_max: float | None = Field(default=None, gt=0, le=1)
    restarts_max: int | None = 0
    leaks_ok: bool = True  # no verdict `growing` at the end
    api_latency_ms_max: dict[str, float] = Field(default_factory=dict)  # endpoint -> ms
    querylog_dropped_max: float | None = None
    # A run with a criterion not judged (too few leak windows, the leak start-up wait, no
    # samples) ends `not_judged` and exits 1; `pass` lets it pass (an exploratory run),
    # the criteria not judged still named.
    not_judged: Literal["fail", "pass"] = "fail"
