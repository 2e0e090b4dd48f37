"""Shared config types: strict models, durations and byte sizes.

Pure parsing, no I/O. Durations accept a number of seconds or "500ms", "30s",
"2m", "24h", "7d"; sizes accept bytes or "64KiB", "5MiB", "1GB"; rates accept
queries per second or "1k", "2.5k", "1M", "2000 q/s", "50k qps".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PrivateAttr

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_DURATION_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_UNIT: dict[str, float] = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}

# k and M only: an `m` would read as milli as often as mega.
_RATE_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([kKM]?)\s*(?:q/s|qps)?\s*$")
_RATE_UNIT = {"": 1.0, "k": 1e3, "m": 1e6}


# Upper bounds: a year-long soak is the longest anyone means; a value past them is a
# typo (a unit forgotten, `.inf`), and would overflow the nanosecond clocks downstream.
MAX_DURATION_S = 366 * 86400.0
MAX_SIZE_BYTES = 1024**5  # 1 PiB
MAX_RATE_QPS = 1e12  # far above any engine: the pre-flight weighs a rate against the workers


class StrictModel(BaseModel):
    """Every YAML model: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class FileModel(StrictModel):
    """A document read from a file (a scenario, an upgrade plan): relative paths in it
    (query files, templates, archives) are relative to that file's directory."""

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    def resolve_path(self, path: str | Path) -> Path:
        p = Path(path)
        return p if p.is_absolute() else self._base_dir / p


@dataclass(frozen=True)
class _Quantity:
    """A number with an optional unit: its checks and its error messages."""

    what: str  # "duration", "size"
    pattern: re.Pattern[str]  # amount, unit
    units: dict[str, float]  # lower-case unit -> how many base units it is
    default_unit: str
    examples: str
    most: float
    over_most: str

    def parse(self, value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"not a {self.what}: {value!r}")
        if isinstance(value, int | float):
            amount = float(value)
        elif isinstance(value, str):
            m = self.pattern.match(value)
            if not m:
                raise ValueError(f"not a {self.what}: {value!r} (use e.g. {self.examples})")
            amount = float(m.group(1)) * self.units[(m.group(2) or self.default_unit).lower()]
        else:
            raise ValueError(f"not a {self.what}: {value!r}")
        if not math.isfinite(amount):
            raise ValueError(f"not a {self.what}: {value!r}")
        if amount < 0:
            raise ValueError(f"{self.what} must not be negative: {value!r}")
        if amount > self.most:
            raise ValueError(f"{self.what} {value!r} {self.over_most}")
        return amount


_DURATION = _Quantity(
    "duration", _DURATION_RE, _DURATION_UNIT_S, "s", "30s, 2m, 24h, 7d",
    MAX_DURATION_S, "is longer than the most soak takes (366d)",
)  # fmt: skip
_SIZE = _Quantity(
    "size", _SIZE_RE, _SIZE_UNIT, "B", "512KiB, 5MiB, 1GB",
    MAX_SIZE_BYTES, "is larger than the most soak takes (1PiB)",
)  # fmt: skip


_RATE = _Quantity(
    "rate", _RATE_RE, _RATE_UNIT, "", "2000, 1k, 2.5k, 1M, 2000 q/s, max",
    MAX_RATE_QPS, "is more than any load engine sends",
)  # fmt: skip


def parse_duration_s(value: Any) -> float:
    """Seconds from a number or a string such as "90s", "2m", "24h"."""
    return _DURATION.parse(value)


def parse_size_bytes(value: Any) -> int:
    """Bytes from a number or a string such as "5MiB", "64KiB", "1GB"."""
    return int(_SIZE.parse(value))


def parse_rate_qps(value: Any) -> float:
    """Queries per second from a number or a string such as "1k", "2000 q/s", "1.5M qps"."""
    return _RATE.parse(value)


DurationS = Annotated[float, BeforeValidator(parse_duration_s)]
SizeBytes = Annotated[int, BeforeValidator(parse_size_bytes)]
RateQps = Annotated[float, BeforeValidator(parse_rate_qps)]
