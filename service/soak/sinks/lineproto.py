"""InfluxDB line protocol: pure encoding of Points (shared by the v1 and v2 sinks).

Numbers are always written as floats and booleans as 1.0/0.0: InfluxDB refuses
a field whose type changes between writes, and a sampler may give `3` one tick
and `3.5` the next. Non-finite numbers are left out (line protocol has no NaN).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from soak.points import Point

_MEASUREMENT_ESC = str.maketrans({",": r"\,", " ": r"\ ", "\n": r"\n"})
_KEY_ESC = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ ", "\n": r"\n"})


def _escape_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def encode_point(p: Point) -> str | None:
    """One line, or None when the point has no field left to write."""
    fields = []
    for name, value in p.fields.items():
        if isinstance(value, str):
            text = _escape_str(value)
        else:
            number = float(value)
            if not math.isfinite(number):
                continue
            text = repr(number)
        fields.append(f"{name.translate(_KEY_ESC)}={text}")
    if not fields:
        return None
    head = p.measurement.translate(_MEASUREMENT_ESC)
    tags = "".join(
        f",{k.translate(_KEY_ESC)}={v.translate(_KEY_ESC)}"
        for k, v in sorted(p.tags.items())
        if v != ""  # line protocol has no empty tag values
    )
    return f"{head}{tags} {','.join(fields)} {p.time_ns}"


def encode_lines(points: Iterable[Point]) -> Iterator[str]:
    for p in points:
        line = encode_point(p)
        if line is not None:
            yield line
