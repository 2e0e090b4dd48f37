"""Agents' results merged: counts summed, latency histograms added, never percentiles averaged.

Each agent reports its run's totals with its latency histogram (hdrh, whole
microseconds, in hdrh's compressed base64 form); the merged percentiles are read
from the sum of those histograms, so the merged p99 is the p99 of every query of
every agent. `sent == completed + lost + abandoned` is checked per agent and for
the sum: a run that has drained satisfies it, so a mismatch is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from hdrh.histogram import HdrHistogram

from soak.load.stats import PERCENTILES
from soak.points import Point

SIGNIFICANT_DIGITS = 3  # as soak.load.stats.ClassStats


def encode_histogram(hist: HdrHistogram) -> str:
    encoded = hist.encode()
    return encoded.decode() if isinstance(encoded, bytes) else str(encoded)


def decode_histogram(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text.encode())


@dataclass
class AgentTotals:
    """One agent's whole-run counts and its latency histogram (µs)."""

    agent: int
    sent: int
    completed: int
    lost: int
    abandoned: int
    late: int
    rate_target_qps: float
    duration_s: float
    hist: HdrHistogram
    generator_bound: bool = False
    rcodes: dict[str, int] = field(default_factory=dict)

    def accounting_error(self) -> str | None:
        done = self.completed + self.lost + self.abandoned
        if self.sent == done:
            return None
        return (
            f"agent {self.agent}: sent {self.sent} != completed {self.completed} + lost "
            f"{self.lost} + abandoned {self.abandoned}"
        )

    def to_json_dict(self) -> dict[str, Any]:
        """Every field, the histogram last and encoded."""
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "hist"}
        return {**plain, "hist": encode_histogram(self.hist)}

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> AgentTotals:
        return cls(
            agent=int(data["agent"]),
            sent=int(data["sent"]),
            completed=int(data["completed"]),
            lost=int(data["lost"]),
            abandoned=int(data.get("abandoned", 0)),
            late=int(data.get("late", 0)),
            rate_target_qps=float(data["rate_target_qps"]),
            duration_s=float(data["duration_s"]),
            hist=decode_histogram(str(data["hist"])),
            generator_bound=bool(data.get("generator_bound", False)),
            rcodes={str(k): int(v) for k, v in dict(data.get("rcodes", {})).items()},
        )


def latency_ms(hist: HdrHistogram) -> dict[str, float | None]:
    """min, p50, p95, p99, p999, max in ms from a histogram (None without samples)."""
    keys = ["min", *(k for k, _ in PERCENTILES), "max"]
    if hist.get_total_count() == 0:
        return dict.fromkeys(keys, None)
    out: dict[str, float | None] = {"min": hist.get_min_value() / 1000}
    for key, pct in PERCENTILES:
        out[key] = hist.get_value_at_percentile(pct) / 1000
    out["max"] = hist.get_max_value() / 1000
    return out


@dataclass
class MergedResult:
    """The agents together: sums, the summed histogram, and each agent as it reported."""

    agents: list[AgentTotals]
    sent: int
    completed: int
    lost: int
    abandoned: int
    late: int
    rate_target_qps: float
    hist: HdrHistogram
    accounting_errors: list[str]
    rcodes: dict[str, int]

    @property
    def latency_ms(self) -> dict[str, float | None]:
        return latency_ms(self.hist)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "agents": len(self.agents),
            "sent": self.sent,
            "completed": self.completed,
            "lost": self.lost,
            "abandoned": self.abandoned,
            "late": self.late,
            "rate_target_qps": self.rate_target_qps,
            "rcodes": self.rcodes,
            "latency_ms": self.latency_ms,
            "accounting_errors": self.accounting_errors,
            "per_agent": [
                {
                    "agent": a.agent,
                    "sent": a.sent,
                    "completed": a.completed,
                    "lost": a.lost,
                    "abandoned": a.abandoned,
                    "rate_target_qps": a.rate_target_qps,
                    "generator_bound": a.generator_bound,
                    "latency_ms": latency_ms(a.hist),
                }
                for a in self.agents
            ],
        }


def merge_agents(agents: list[AgentTotals]) -> MergedResult:
    """Sum the agents' counts and histograms (pure; the inputs are not changed)."""
    highest = max((a.hist.highest_trackable_value for a in agents), default=2)
    hist = HdrHistogram(1, max(highest, 2), SIGNIFICANT_DIGITS)
    rcodes: dict[str, int] = {}
    for a in agents:
        hist.add(a.hist)
        for name, n in a.rcodes.items():
            rcodes[name] = rcodes.get(name, 0) + n
    errors = [e for e in (a.accounting_error() for a in agents) if e is not None]
    sent = sum(a.sent for a in agents)
    completed = sum(a.completed for a in agents)
    lost = sum(a.lost for a in agents)
    abandoned = sum(a.abandoned for a in agents)
    if sent != completed + lost + abandoned:
        errors.append(
            f"all agents: sent {sent} != completed {completed} + lost {lost} + "
            f"abandoned {abandoned}"
        )
    return MergedResult(
        agents=sorted(agents, key=lambda a: a.agent),
        sent=sent,
        completed=completed,
        lost=lost,
        abandoned=abandoned,
        late=sum(a.late for a in agents),
        rate_target_qps=sum(a.rate_target_qps for a in agents),
        hist=hist,
        accounting_errors=errors,
        rcodes=dict(sorted(rcodes.items())),
    )


def tag_agent(points: list[Point], agent: int) -> list[Point]:
    """Per-second load points of one agent, with its `agent` tag (DESIGN: Time series)."""
    return [p.with_tags({"agent": str(agent)}) for p in points]
