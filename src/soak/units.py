"""Shared config types: strict models, durations and byte sizes.

Pure parsing, no I/O. Durations accept a number of seconds or "500ms", "30s",
"2m", "24h", "7d"; sizes accept bytes or "64KiB", "5MiB", "1GB".
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PrivateAttr

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_DURATION_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_UNIT = {
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


# Upper bounds: a year-long soak is the longest anyone means; a value past them is a
# typo (a unit forgotten, `.inf`), and would overflow the nanosecond clocks downstream.
MAX_DURATION_S = 366 * 86400.0
MAX_SIZE_BYTES = 1024**5  # 1 PiB


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


def parse_duration_s(value: Any) -> float:
    """Seconds from a number or a string such as "90s", "2m", "24h"."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION_RE.match(value)
        if not m:
            raise ValueError(f"not a duration: {value!r} (use e.g. 30s, 2m, 24h, 7d)")
        seconds = float(m.group(1)) * _DURATION_UNIT_S[m.group(2) or "s"]
    else:
        raise ValueError(f"not a duration: {value!r}")
    if not math.isfinite(seconds):
        raise ValueError(f"not a duration: {value!r}")
    if seconds < 0:
        raise ValueError(f"duration must not be negative: {value!r}")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"duration {value!r} is longer than the most soak takes (366d)")
    return seconds


def parse_size_bytes(value: Any) -> int:
    """Bytes from a number or a string such as "5MiB", "64KiB", "1GB"."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int | float):
        size = float(value)
    elif isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m:
            raise ValueError(f"not a size: {value!r} (use e.g. 512KiB, 5MiB, 1GB)")
        size = float(m.group(1)) * _SIZE_UNIT[(m.group(2) or "B").lower()]
    else:
        raise ValueError(f"not a size: {value!r}")
    if not math.isfinite(size):
        raise ValueError(f"not a size: {value!r}")
    if size < 0:
        raise ValueError(f"size must not be negative: {value!r}")
    if size > MAX_SIZE_BYTES:
        raise ValueError(f"size {value!r} is larger than the most soak takes (1PiB)")
    return int(size)


DurationS = Annotated[float, BeforeValidator(parse_duration_s)]
SizeBytes = Annotated[int, BeforeValidator(parse_size_bytes)]
