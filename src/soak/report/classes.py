"""The per-class table (sent, completed, lost, latency, rcodes, wrong answers) and the
dig-probe success counts, each read from the store in one pass over its points.

The per-class table counts the same windows as the criteria (after the warm-up), so its
`all` row's sent, lost and p99 are the criteria's: latency is read from the windows'
stored histograms merged (soak.analysis.latency), never from their percentiles. Sums
and histograms only: a week of windows is never held in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from soak.analysis.rundata import StoreReader
from soak.histogram import LatencyHistogram
from soak.names import AGENT_TAG, LAT_HIST_FIELD

COUNTS = ("sent", "completed", "lost", "abandoned", "wrong_answers")
RCODE_PREFIX = "rcode_"


@dataclass
class _Class:
    counts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0.0))
    rcodes: dict[str, float] = field(default_factory=dict)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def add(self, fields: dict[str, Any]) -> None:
        for name in COUNTS:
            self.counts[name] += _float(fields.get(name))
        for name, value in fields.items():
            if name.startswith(RCODE_PREFIX):
                rcode = name[len(RCODE_PREFIX) :].upper()
                self.rcodes[rcode] = self.rcodes.get(rcode, 0.0) + _float(value)
        hist = fields.get(LAT_HIST_FIELD)
        if isinstance(hist, str):
            self.latency.add(LatencyHistogram.decode(hist))

    def row(self, name: str) -> dict[str, Any]:
        return {
            "class": name,
            **self.counts,
            "p50_ms": self.latency.quantile_ms(0.5),
            "p99_ms": self.latency.quantile_ms(0.99),
            "rcodes": {k: v for k, v in sorted(self.rcodes.items()) if v},
        }


def class_table(store: StoreReader, run_id: str, since_ns: int) -> list[dict[str, Any]]:
    """One row per load class from `since_ns` on (the `all` class first)."""
    classes: dict[str, _Class] = {}
    for p in store.points(run_id, "load", since_ns):
        classes.setdefault(p.tags.get("class", ""), _Class()).add(p.fields)
    order = sorted(classes, key=lambda c: (c != "all", c))
    return [classes[c].row(c) for c in order]


def agent_table(store: StoreReader, run_id: str, since_ns: int) -> list[dict[str, Any]]:
    """Where load agents ran: one row per agent (its `all` class) from `since_ns` on, with
    its share of what all agents sent; empty otherwise."""
    agents: dict[str, _Class] = {}
    for p in store.points(run_id, "load", since_ns, agents=True):
        if p.tags.get("class") == "all":
            agents.setdefault(p.tags[AGENT_TAG], _Class()).add(p.fields)
    total_sent = sum(a.counts["sent"] for a in agents.values())
    rows = []
    for name in sorted(agents, key=lambda a: (len(a), a)):  # 0, 1, ... 10
        row = agents[name].row(name)
        del row["class"]
        share = row["sent"] / total_sent if total_sent else None
        rows.append({"agent": name, **row, "share": share})
    return rows


def probe_table(store: StoreReader, run_id: str) -> list[dict[str, Any]]:
    """Per dig probe: how many answered as expected out of how many were sent, and the
    slowest answer."""
    probes: dict[str, dict[str, Any]] = {}
    for p in store.points(run_id, "dig"):
        row = probes.setdefault(
            p.tags.get("probe", ""), {"ok": 0, "total": 0, "max_latency_ms": None}
        )
        row["total"] += 1
        row["ok"] += 1 if p.fields.get("ok") in (True, 1, 1.0) else 0
        latency = _float(p.fields.get("latency_ms"))
        if "latency_ms" in p.fields and latency > (row["max_latency_ms"] or 0.0):
            row["max_latency_ms"] = latency
    return [{"probe": name, **probes[name]} for name in sorted(probes)]


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _float(v: Any) -> float:
    return float(v) if _is_num(v) else 0.0
