"""Scenario models and the YAML loader.

Each area keeps its own section's models beside its code (load/config.py,
targets/config.py, samplers/config.py, sinks/config.py, upgrade/config.py);
this module composes them into a Scenario and turns validation errors into
lines that name the YAML path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from soak.bench.config import BenchConfig
from soak.errors import InputError
from soak.load.config import LoadConfig
from soak.samplers.config import SamplersConfig
from soak.sinks.config import SinkConfig, SpoolConfig
from soak.targets.config import TargetConfig
from soak.units import DurationS, FileModel, SizeBytes, StrictModel, parse_size_bytes

M = TypeVar("M", bound=BaseModel)

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


class Phase(StrictModel):
    name: str
    duration_s: DurationS = Field(gt=0)
    rate_qps: float | None = Field(default=None, ge=0)  # None: load.rate_qps
    warmup: bool = False  # excluded from leak verdicts and criteria


class SetupCall(StrictModel):
    """An HTTP request to the target once it is ready (and after each restart with
    `every_start`), e.g. creating the zone an authoritative server answers."""

    method: str = "POST"
    port: str = "api"  # a named port of the target
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None  # sent as JSON
    status: list[int] = Field(default_factory=lambda: [200, 201, 204])
    every_start: bool = False
    timeout_s: DurationS = 10.0


class LeaksConfig(StrictModel):
    window_s: DurationS = 600.0  # the minimum of each window removes the GC sawtooth
    min_windows: int = Field(default=6, ge=3)
    p_value: float = Field(default=0.05, gt=0, lt=1)
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
    restarts_max: int | None = 0
    leaks_ok: bool = True  # no verdict `growing` at the end
    api_latency_ms_max: dict[str, float] = Field(default_factory=dict)  # endpoint -> ms
    querylog_dropped_max: float | None = None


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
    bench: BenchConfig | None = None  # `soak bench` only

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


def error_lines(exc: ValidationError) -> list[str]:
    """One line per error: `target.ports.dns.host: Input should be ...`."""
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "(top)"
        lines.append(f"{path}: {err['msg']}")
    return lines


def read_yaml(path: Path) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {not_utf8(exc)}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}:{where} not valid YAML: {getattr(exc, 'problem', exc)}") from exc


def not_utf8(exc: UnicodeDecodeError) -> str:
    """`not UTF-8 text (byte 0xff at offset 12)`: where, not Python's codec message."""
    return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """`--set load.rate_qps=500`: assign into nested dicts (and list indexes)."""
    keys = dotted.split(".")
    node: Any = data
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def validate_model(model: type[M], data: Any, source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = error_lines(exc)
        raise InputError(f"{source}: " + f"\n{source}: ".join(lines)) from exc


def load_scenario(path: Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a scenario is a YAML mapping")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set takes key.path=value, got {item!r}")
        set_path(data, key, yaml.safe_load(raw))
    scenario = validate_model(Scenario, data, str(path))
    scenario._base_dir = Path(path).resolve().parent
    return scenario


def is_upgrade_plan(data: Any) -> bool:
    return isinstance(data, dict) and "old" in data and "new" in data
