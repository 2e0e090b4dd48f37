"""InfluxDB line protocol: pure encoding of Points (shared by the v1 and v2 sinks).

Numbers are always written as floats and booleans as 1.0/0.0: InfluxDB refuses
a field whose type changes between writes, and a sampler may give `3` one tick
and `3.5` the next. Non-finite numbers are left out (line protocol has no NaN).
A `load` window's latency histogram (soak.names.LAT_HIST_FIELD) is left out too: it is
the embedded store's, for merging; InfluxDB and Grafana get the window's percentiles.

A LineEncoder keeps the escaped form of series keys and field names it has
seen (a run has a few hundred series), which is most of the encoding work;
the caches are bounded and start over when full.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from soak.names import LAT_HIST_FIELD
from soak.points import Point

_MEASUREMENT_ESC = str.maketrans({",": r"\,", " ": r"\ ", "\n": r"\n"})
_KEY_ESC = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ ", "\n": r"\n"})
_MAX_CACHED = 10_000


def _escape_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def series_key(measurement: str, tags: dict[str, str]) -> str:
    """`measurement,tag=value,...` with tags sorted by key (InfluxDB's preferred order)."""
    head = measurement.translate(_MEASUREMENT_ESC)
    return head + "".join(
        f",{k.translate(_KEY_ESC)}={v.translate(_KEY_ESC)}"
        for k, v in sorted(tags.items())
        if v != ""  # line protocol has no empty tag values
    )


class LineEncoder:
    def __init__(self) -> None:
        self._series: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self._fields: dict[str, str] = {}

    def encode(self, p: Point) -> str | None:
        """One line, or None when the point has no field left to write."""
        fields = self._fields
        parts = []
        for name, value in p.fields.items():
            if name == LAT_HIST_FIELD:
                continue
            prefix = fields.get(name)
            if prefix is None:
                if len(fields) > _MAX_CACHED:
                    fields.clear()
                prefix = fields[name] = name.translate(_KEY_ESC) + "="
            if value.__class__ is float:
                if value - value != 0.0:  # inf or nan: no value to write
                    continue
                parts.append(prefix + repr(value))
            elif isinstance(value, str):
                parts.append(prefix + _escape_str(value))
            else:
                number = float(value)
                if not math.isfinite(number):
                    continue
                parts.append(prefix + repr(number))
        if not parts:
            return None
        key = (p.measurement, tuple(p.tags.items()))
        head = self._series.get(key)
        if head is None:
            if len(self._series) > _MAX_CACHED:
                self._series.clear()
            head = self._series[key] = series_key(p.measurement, p.tags)
        return f"{head} {','.join(parts)} {p.time_ns}"

    def lines(self, points: Iterable[Point]) -> Iterator[str]:
        for p in points:
            line = self.encode(p)
            if line is not None:
                yield line


def encode_point(p: Point) -> str | None:
    return LineEncoder().encode(p)


def encode_lines(points: Iterable[Point]) -> Iterator[str]:
    return LineEncoder().lines(points)
