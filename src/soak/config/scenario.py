"""The scenario: its own sections (phases, alerting) and the sections of the other
packages composed in (the setup calls are the targets')."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_serializer, field_validator, model_validator

from soak.analysis.scenario_sections import CriteriaConfig, LeaksConfig
from soak.config.bench import BenchConfig
from soak.config.upgrade import UpgradeSection, check_swappable, move_offsets_s
from soak.load.load_config import LoadConfig, rate_json, rate_or_max
from soak.samplers.selection import SamplersConfig
from soak.sinks.destinations import SinkConfig, SpoolConfig
from soak.targets.specs import SetupCall, TargetConfig
from soak.traffic.capture_config import CaptureConfig
from soak.units import DurationS, FileModel, SizeBytes, StrictModel


class Phase(StrictModel):
    name: str
    duration_s: DurationS = Field(gt=0)
    rate_qps: float | None = Field(default=None, ge=0)  # None: load.rate_qps
    warmup: bool = False  # excluded from leak verdicts and criteria

    @field_validator("rate_qps", mode="before")
    @classmethod
    def _rate(cls, value: Any, info: ValidationInfo) -> Any:
        return rate_or_max(value, info)

    @field_serializer("rate_qps", when_used="json")
    def _rate_json(self, value: float | None) -> float | str | None:
        return rate_json(value)


class AlertingConfig(StrictModel):
    webhooks: list[str] = Field(default_factory=list)
    alertmanagers: list[str] = Field(default_factory=list)  # base URLs; /api/v2/alerts
    timeout_s: DurationS = 5.0
    # Firing alerts are sent to Alertmanager again this often, each valid for 4 intervals
    # (as Prometheus does), so a service that dies leaves no alert firing forever.
    resend_interval_s: DurationS = Field(default=60.0, gt=0)
    labels: dict[str, str] = Field(default_factory=dict)  # added to every alert


class LimitsConfig(StrictModel):
    """Limits a growing resource is projected to (besides a docker target's mem_limit)."""

    memory_bytes: SizeBytes | None = None


class Scenario(FileModel):
    name: str
    description: str = ""
    allow_targets: list[str] = Field(default_factory=list)
    target: TargetConfig
    services: list[TargetConfig] = Field(default_factory=list)
    load: LoadConfig | None = None
    phases: list[Phase] = Field(min_length=1)
    setup: list[SetupCall] = Field(default_factory=list)
    samplers: SamplersConfig = Field(default_factory=SamplersConfig)
    sinks: list[SinkConfig] = Field(default_factory=list)
    spool: SpoolConfig = Field(default_factory=SpoolConfig)
    leaks: LeaksConfig = Field(default_factory=LeaksConfig)
    criteria: CriteriaConfig = Field(default_factory=CriteriaConfig)
    alerting: AlertingConfig = Field(default_factory=AlertingConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    capture: CaptureConfig | None = None  # record the target's client queries (dnstap)
    bench: BenchConfig | None = None  # `soak bench` only
    upgrade: UpgradeSection | None = None  # the target swapped in place under load

    @model_validator(mode="after")
    def _swaps(self) -> Scenario:
        if self.upgrade is not None:
            try:
                check_swappable(self.upgrade, self.target.runtime)
                self.move_offsets_s()
            except ValueError as exc:
                raise ValueError(f"upgrade.{exc}") from None
        return self

    def move_offsets_s(self) -> list[tuple[float, float | None]]:
        """Each swap's moment and its rollback's (None without one), seconds from the
        run's start (none without `upgrade:`)."""
        if self.upgrade is None:
            return []
        return move_offsets_s(self.upgrade, [(p.name, p.duration_s) for p in self.phases])

    def swap_offsets_s(self) -> list[float]:
        """Each swap's moment, seconds from the run's start."""
        return [at_s for at_s, _ in self.move_offsets_s()]

    @property
    def memory_limit_bytes(self) -> float | None:
        """limits.memory_bytes, else the docker target's mem_limit, else None."""
        if self.limits.memory_bytes is not None:
            return float(self.limits.memory_bytes)
        mem_limit = getattr(self.target, "mem_limit", None)
        return float(mem_limit) if mem_limit is not None else None

    @property
    def duration_s(self) -> float:
        return sum(p.duration_s for p in self.phases)
