"""The optional `bench:` section of a scenario (`soak bench` reads it; soak runs ignore it)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from soak.units import DurationS, RateQps, StrictModel


class KneeConfig(StrictModel):
    """The saturation search: open-loop rates rising by `factor`, then bisection (dnsmark's DSD)."""

    enabled: bool = True
    idle_rate_qps: RateQps = Field(default=200.0, gt=0)  # the latency floor is read here
    start_rate_qps: RateQps = Field(default=2000.0, gt=0)
    factor: float = Field(default=2.0, gt=1.0)
    max_rate_qps: RateQps = Field(default=2_000_000.0, gt=0)
    step_s: DurationS = Field(default=5.0, gt=0)
    settle_s: DurationS = Field(default=1.0, ge=0)  # after a rate change, not measured
    # None: max(3 x floor, floor + 1 ms), dnsmark's automatic SLO on p50.
    slo_p50_ms: float | None = Field(default=None, gt=0)
    # A step fails when fewer than (1 - this) of the offered queries are answered.
    answered_ratio_min: float = Field(default=0.98, gt=0, le=1)
    tolerance: float = Field(default=0.05, gt=0, lt=1)  # bracket width / low edge
    max_steps: int = Field(default=24, ge=2)


class BenchCriteria(StrictModel):
    """Exit 1 when one fails. Keys are class names or `mix`; `all` applies to every class."""

    capacity_qps_min: dict[str, float] = Field(default_factory=dict)  # saturation median
    knee_qps_min: dict[str, float] = Field(default_factory=dict)  # within-SLO rate
    # class -> p99 ms at every fixed rate
    fixed_p99_ms_max: dict[str, float] = Field(default_factory=dict)
    lost_ratio_max: float | None = Field(default=None, ge=0, le=1)  # at fixed rates


class BenchConfig(StrictModel):
    runs: int = Field(default=3, ge=1, le=50)  # measured runs at saturation per class
    duration_s: DurationS = Field(default=20.0, gt=0)  # each measured run
    throwaway_s: DurationS = Field(default=10.0, ge=0)  # one run before them, not counted
    warm: bool = False  # keep the target running between classes instead of starting fresh
    warm_rate_qps: RateQps = Field(default=2000.0, gt=0)  # the warm pass: every name once
    classes: list[str] | None = None  # None: every class of the mix, each alone
    mix: bool = True  # then the whole mix
    rates_qps: list[RateQps] = Field(default_factory=list)  # fixed rates (open loop)
    fixed_duration_s: DurationS = Field(default=10.0, gt=0)
    # Runs of each fixed rate (in turns with B): `soak compare` judges p99 across runs,
    # so with one run a side the p99 is shown but not judged.
    fixed_runs: int = Field(default=1, ge=1, le=20)
    fixed_classes: list[str] | None = None  # None: the same classes as saturation
    # Target counters (names of samplers.prom.map) reported as deltas per fixed rate.
    counters: list[str] = Field(default_factory=list)
    # Cores the target can use (its worker threads); None: min(its threads, its CPUs).
    target_cores: float | None = Field(default=None, gt=0)
    # A limit is "saturated" above this share of its CPUs.
    cpu_saturated_ratio: float = Field(default=0.85, gt=0, le=1)
    knee: KneeConfig = Field(default_factory=KneeConfig)
    # A cap for a shared machine: nothing is offered above it. Saturation runs open loop
    # at the cap instead of flat out, the knee search stops at it; None: no cap.
    max_rate_qps: RateQps | None = Field(default=None, gt=0)
    criteria: BenchCriteria = Field(default_factory=BenchCriteria)

    @model_validator(mode="after")
    def _rates_under_the_cap(self) -> Self:
        cap = self.max_rate_qps
        if cap is not None:
            above = [r for r in self.rates_qps if r > cap]
            if above:
                raise ValueError(
                    f"rates_qps {above[0]:g} is above max_rate_qps {cap:g} (the cap is kept)"
                )
        return self
