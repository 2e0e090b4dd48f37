"""What a run held in this process knows beyond its record, for its status
(soak.results.status reads it every second while the run goes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from soak.analysis.leaks import LeakVerdict
from soak.points import FieldValue


@dataclass
class LiveFigures:
    """What a run held in this process knows beyond its record: read after the events,
    its restart count and PID are at least as new as any `restarted` event shown (it
    sets both before it records the event)."""

    latest: dict[str, dict[str, FieldValue]]
    restarts: int
    target_pid: int | None = None
    verdicts: list[LeakVerdict] = field(default_factory=list)
    load_totals: dict[str, Any] = field(default_factory=dict)  # {} once the load has stopped
    # The rate the load is asked where the phases' rate is not it: a replay's plan's.
    rate_target_qps: float | None = None
