"""The one shape every sampler produces and every sink consumes.

Measurement, tag and field names are fixed in DESIGN.md ("Time series").
Every point carries the tags `soak`, `scenario`, `target`, `version` and the
tick's scheduled time, not the time the sampler happened to finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FieldValue = float | int | str | bool

RUN_TAGS = ("soak", "scenario", "target", "version")


@dataclass(frozen=True, slots=True)
class Point:
    measurement: str
    fields: dict[str, FieldValue]
    time_ns: int
    tags: dict[str, str] = field(default_factory=dict)

    def with_tags(self, tags: dict[str, str]) -> Point:
        """A copy with `tags` added; the point's own tags win over the run's."""
        return Point(self.measurement, self.fields, self.time_ns, {**tags, **self.tags})


def event_point(kind: str, message: str, time_ns: int, value: float = 0.0) -> Point:
    """An `event` point: target exits, restarts, phases, sink outages, alerts."""
    return Point("event", {"message": message, "value": float(value)}, time_ns, {"kind": kind})
