"""The one shape every sampler produces and every sink consumes.

Measurement, tag and field names are fixed in docs/architecture.md ("Time series").
Every point carries the tags `soak`, `scenario`, `target`, `version` and the
tick's scheduled time, not the time the sampler happened to finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FieldValue = float | int | str | bool

# `team`: only where the scenario's alerting.labels name one (the dashboards filter by it).
RUN_TAGS = ("soak", "scenario", "target", "version", "team")


@dataclass(frozen=True, slots=True)
class Point:
    measurement: str
    fields: dict[str, FieldValue]
    time_ns: int
    tags: dict[str, str] = field(default_factory=dict)

    def with_tags(self, tags: dict[str, str]) -> Point:
        """A copy with `tags` added; the point's own tags win over the run's."""
        return Point(self.measurement, self.fields, self.time_ns, {**tags, **self.tags})


@dataclass(frozen=True)
class Fault:
    """A fault a part of a run reports (its load restarted, an agent lost); the run
    records it as an `event` point (kind, message, value) at its tick's time."""

    kind: str
    message: str
    value: float


def point_to_json(p: Point) -> dict[str, Any]:
    """A point in the one JSON shape soak writes it in: a sink's spool, an agent's JSON
    lines (with `"kind": "point"` in front) and the sampler agent's /v1/samples."""
    return {"measurement": p.measurement, "tags": p.tags, "fields": p.fields, "time_ns": p.time_ns}


def point_from_json(data: dict[str, Any]) -> Point:
    """A point read back; also a spool line written before the one shape (`m`, `t`, `g`,
    `f`): a run's spool on disk may outlive an upgrade of soak."""
    if "m" in data:
        return Point(data["m"], dict(data["f"]), int(data["t"]), dict(data["g"]))
    return Point(data["measurement"], dict(data["fields"]), int(data["time_ns"]), data["tags"])


def event_point(kind: str, message: str, time_ns: int, value: float = 0.0) -> Point:
    """An `event` point: target exits, restarts, phases, sink outages, alerts."""
    return Point("event", {"message": message, "value": float(value)}, time_ns, {"kind": kind})
