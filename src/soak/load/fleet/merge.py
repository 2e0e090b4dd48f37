"""Agents' results merged: counts summed, latency histograms added, never percentiles averaged.

Each agent reports its run's totals with its latency histogram (soak.histogram, whole
microseconds, in its text form); the merged percentiles are read
from the sum of those histograms, so the merged p99 is the p99 of every query of
every agent. `sent == completed + lost + abandoned` is checked per agent and for
the sum: a run that has drained satisfies it, so a mismatch is reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from soak.histogram import LatencyHistogram, merged
from soak.load.stats import LoadResult
from soak.points import Point

COUNTED = ("sent", "completed", "lost", "abandoned", "late")


@dataclass(kw_only=True)
class QueryCounts:
    """What a load sent and what became of it, and the rate it was asked for."""

    sent: int
    completed: int
    lost: int
    abandoned: int
    late: int
    rate_target_qps: float

    def counts_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(QueryCounts)}


@dataclass
class AgentTotals(QueryCounts):
    """One agent's whole-run counts and its latency histogram (µs)."""

    agent: int
    duration_s: float
    hist: LatencyHistogram
    generator_bound: bool = False
    rcodes: dict[str, int] = field(default_factory=dict)
    # its engine's socket counts (soak.load.stats.SocketCounts.as_dict), None from an
    # agent that kept none
    engine_counters: dict[str, int] | None = None

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
        return {**plain, "hist": self.hist.encode()}

    @classmethod
    def from_result(
        cls, agent: int, result: LoadResult, hist: LatencyHistogram, *, rate_target_qps: float,
        duration_s: float,
    ) -> AgentTotals:  # fmt: skip
        """An agent's totals from its LoadRunner's result and whole-run histogram."""
        return cls(
            agent=agent,
            **{name: getattr(result, name) for name in COUNTED},
            rate_target_qps=rate_target_qps,
            duration_s=duration_s,
            hist=hist,
            generator_bound=result.generator_bound,
            rcodes=result.rcodes,
            engine_counters=result.engine_counters,
        )

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> AgentTotals:
        counts = {name: int(data[name]) for name in ("sent", "completed", "lost")}
        counts |= {name: int(data.get(name, 0)) for name in ("abandoned", "late")}  # may be absent
        return cls(
            agent=int(data["agent"]),
            **counts,
            rate_target_qps=float(data["rate_target_qps"]),
            duration_s=float(data["duration_s"]),
            hist=LatencyHistogram.decode(str(data["hist"])),
            generator_bound=bool(data.get("generator_bound", False)),
            rcodes={str(k): int(v) for k, v in dict(data.get("rcodes", {})).items()},
            engine_counters=_counters(data.get("engine_counters")),
        )


def _counters(data: Any) -> dict[str, int] | None:
    return None if not isinstance(data, dict) else {str(k): int(v) for k, v in data.items()}


def latency_ms(hist: LatencyHistogram) -> dict[str, float | None]:
    """min, avg, p50, p95, p99, p999, max in ms from a histogram (None without samples)."""
    return hist.latency_ms()


@dataclass
class MergedResult(QueryCounts):
    """The agents together: sums, the summed histogram, and each agent as it reported."""

    agents: list[AgentTotals]
    hist: LatencyHistogram
    accounting_errors: list[str]
    rcodes: dict[str, int]

    @property
    def latency_ms(self) -> dict[str, float | None]:
        return latency_ms(self.hist)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "agents": len(self.agents),
            **self.counts_json(),
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
    hist = merged(a.hist for a in agents)
    rcodes: dict[str, int] = {}
    for a in agents:
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
    """Per-second load points of one agent, with its `agent` tag (docs/architecture.md,
    "Time series")."""
    return [p.with_tags({"agent": str(agent)}) for p in points]


# Fields of a `load` window that add up across agents and seconds; rcode_* too.
ADDITIVE_FIELDS = frozenset(
    {
        "due",
        "skipped",
        "refused",
        "sent",
        "completed",
        "lost",
        "late",
        "wrong_answers",
        "abandoned",
        "connections_opened",
        "connection_errors",
        "tls_resumed",
        "connections_hung_up",
    }
)


@dataclass
class AgentWindow:
    """One agent's second of load as it reports it to the coordinator: its `load` fields
    per class (and `all`), each class's latency histogram (µs, encoded) and its length."""

    agent: int
    stamp_ns: int  # the window's end: the run's start_at + k seconds, the same on every agent
    window_s: float
    fields: dict[str, dict[str, float]]
    hists: dict[str, str]

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> AgentWindow:
        return cls(
            agent=int(data["agent"]),
            stamp_ns=int(data["stamp_ns"]),
            window_s=float(data["window_s"]),
            fields={
                str(c): {str(k): float(v) for k, v in dict(f).items()}
                for c, f in dict(data["fields"]).items()
            },
            hists={str(c): str(h) for c, h in dict(data.get("hists", {})).items()},
        )


def sum_windows(
    windows: list[AgentWindow], span_s: float, rate_target_qps: dict[str, float] | None = None
) -> dict[str, dict[str, float]]:
    """Agents' windows summed into one window of span_s seconds, per class (pure).

    Counts add; rate_achieved is the summed `sent` over span_s; the latency fields
    are read from the added histograms (min and max exact, the mean weighted by
    each window's count), never averaged from percentiles. rate_target is the
    asked rate when given (the coordinator's: an agent that is lost does not lower
    it), else the windows' own, time-weighted. Other fields (handshake times) keep
    the largest value: the worst agent's.
    """
    out: dict[str, dict[str, float]] = {}
    for cls in sorted({c for w in windows for c in w.fields}):
        parts = [(w, w.fields[cls]) for w in windows if cls in w.fields]
        summed: dict[str, float] = {}
        for _, fields_ in parts:
            for key, value in fields_.items():
                if key in ADDITIVE_FIELDS or key.startswith("rcode_"):
                    summed[key] = summed.get(key, 0.0) + value
                elif not key.startswith(("lat_", "rate_")):
                    summed[key] = max(summed.get(key, value), value)
        summed["rate_achieved"] = summed.get("sent", 0.0) / span_s if span_s > 0 else 0.0
        if rate_target_qps is not None:
            summed["rate_target"] = rate_target_qps.get(cls, 0.0)
        else:
            asked = sum(f.get("rate_target", 0.0) * w.window_s for w, f in parts)
            summed["rate_target"] = asked / span_s if span_s > 0 else 0.0
        summed.update(_latency_fields([(w.hists.get(cls), f) for w, f in parts]))
        out[cls] = summed
    return out


def _latency_fields(parts: list[tuple[str | None, dict[str, float]]]) -> dict[str, float]:
    """lat_*_ms of windows together, from their added histograms."""
    hist = merged(LatencyHistogram.decode(e) for e, _ in parts if e is not None)
    return {f"lat_{k}_ms": v for k, v in hist.latency_ms().items() if v is not None}


def summed_hists(windows: list[AgentWindow]) -> dict[str, str]:
    """Agents' windows' latency histograms added, per class (and `all`), encoded."""
    out: dict[str, LatencyHistogram] = {}
    for w in windows:
        for cls, encoded in w.hists.items():
            out.setdefault(cls, LatencyHistogram()).add(LatencyHistogram.decode(encoded))
    return {cls: h.encode() for cls, h in out.items() if h.total}
