"""The audit of a run's load figures: every table against the ledger.

The ledger is the run's stored `load` points of class `all` (one per closed
one-second window of the run's grid; where load agents run, their merged
seconds). Every figure a report prints about the load is a sum over it, so
each must equal the ledger's sum over the same seconds: the phases (warm-up
included) add up to the ledger, the classes table's `all` row to the ledger
after the warm-up, the agents table to the same, `result.json`'s
`load_totals` to the whole ledger, and the `generator` criterion is sent over
due (never above 1). Each window keeps `completed + lost + abandoned == sent`
and `sent + skipped == due`. A disagreement is a line of text; the run records
each as an `accounting` event (soak.results.judge) and the report shows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from soak.analysis.latency import span_histogram, stored_histograms
from soak.analysis.rundata import StoreReader
from soak.clock import NS_PER_S, s_to_ns
from soak.points import Point
from soak.report.witnesses import (
    ScheduledPhase,
    Window,
    capture_disagreements,
    engine_disagreements,
    quantile_disagreements,
    schedule_disagreements,
    server_disagreements,
)

COUNTS = ("due", "sent", "completed", "lost")
# What result.json's load_totals takes from the ledger (ledger_totals).
TOTALS = (*COUNTS, "skipped", "late", "abandoned", "wrong_answers")
ACCOUNTING_EVENT = "accounting"


@dataclass
class LedgerSums:
    """The ledger's counts over some seconds."""

    counts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TOTALS, 0.0))
    windows: int = 0
    problems: list[str] = field(default_factory=list)
    all_windows: list[Window] = field(default_factory=list)  # for the witnesses

    def add(self, p: Point) -> None:
        self.windows += 1
        self.all_windows.append(Window(p.time_ns, _count(p, "sent"), _count(p, "completed")))
        for name in TOTALS:
            self.counts[name] += _count(p, name)
        self._check(p)

    def _check(self, p: Point) -> None:
        """A window's own invariants (windows stored before the ledger had no `due`)."""

        def n(name: str) -> float:
            return _count(p, name)

        if "due" not in p.fields:
            return
        ended = n("completed") + n("lost") + n("abandoned")
        if ended != n("sent"):
            self.problems.append(
                f"window at {p.time_ns}: completed + lost + abandoned {ended:g}"
                f" != sent {n('sent'):g}"
            )
        if n("sent") + n("skipped") != n("due"):
            self.problems.append(
                f"window at {p.time_ns}: sent {n('sent'):g} + skipped {n('skipped'):g}"
                f" != due {n('due'):g}"
            )


def server_count(store: StoreReader, run_id: str) -> list[tuple[int, float]]:
    """The server's own count of the queries it received (`runtime` field server_queries)."""
    out = []
    for p in store.points(run_id, "runtime"):
        value = p.fields.get("server_queries")
        if isinstance(value, int | float):
            out.append((p.time_ns, float(value)))
    return out


def _count(p: Point, name: str) -> float:
    """A window's count `name`; 0 where it has none (or not a number)."""
    value = p.fields.get(name, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def ledger_sums(store: StoreReader, run_id: str) -> LedgerSums:
    """The ledger over the whole run."""
    return ledger_split(store, run_id, None)[0]


def ledger_split(
    store: StoreReader, run_id: str, since_ns: int | None
) -> tuple[LedgerSums, LedgerSums | None]:
    """The ledger over the whole run and from `since_ns` on (None without it), in one read
    of the run's load points: a days-long run has a window a second."""
    whole = LedgerSums()
    since = LedgerSums() if since_ns is not None else None
    for p in store.points(run_id, "load"):
        if p.tags.get("class") != "all":
            continue
        whole.add(p)
        if since is not None and since_ns is not None and p.time_ns >= since_ns:
            since.add(p)
    return whole, since


def ledger_totals(store: StoreReader, run_id: str, totals: Mapping[str, Any]) -> dict[str, Any]:
    """result.json's load_totals: the engine's own (restarts) with every count, the
    seconds and the latency taken from the ledger (latency: the quantiles of every
    window's histogram merged, soak.analysis.latency), so that they are its figures by
    construction (a service restart mid-run, say, leaves the engine with only its own
    part)."""
    sums = ledger_sums(store, run_id)
    if sums.windows == 0:
        return dict(totals)
    out = dict(totals)
    hist = span_histogram(stored_histograms(store, run_id, {"class": "all"}))
    if hist.total:
        out["latency_ms"] = {**hist.latency_ms(), "stddev": hist.stddev_ms()}
    for name, value in sums.counts.items():
        if name in COUNTS or value:
            out[name] = int(value)
    if "due" in totals:  # one-second windows (a store of older runs may hold ticks)
        out["seconds"] = sums.windows
    return out


def _differ(what: str, got: Mapping[str, Any], ledger: Mapping[str, float]) -> list[str]:
    out = []
    for name in COUNTS:
        want = ledger[name]
        value = got.get(name)
        if value is None:
            continue  # a table without that figure says nothing about it
        if abs(float(value) - want) > 0.5:
            out.append(f"{what}: {name} {float(value):,.0f} != ledger {want:,.0f}")
    return out


def _summed(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        for name in COUNTS:
            value = row.get(name)
            if isinstance(value, int | float):
                out[name] = out.get(name, 0.0) + float(value)
    return out


def judged_since_ns(report: Mapping[str, Any]) -> int | None:
    """The first window time the classes and agents tables count (after the warm-up),
    from the report's own run section (soak.analysis.rundata.judged_from_ns)."""
    judged_s = report.get("judged_from_s")
    started = report.get("run", {}).get("started")
    if not isinstance(judged_s, int | float) or not isinstance(started, str):
        return None
    started_ns = round(datetime.fromisoformat(started).timestamp()) * NS_PER_S
    since_ns = started_ns + s_to_ns(judged_s)
    return since_ns + 1 if judged_s > 0 else since_ns


def audit(
    store: StoreReader,
    run_id: str,
    report: Mapping[str, Any],
    load_totals: Mapping[str, Any] | None = None,
    schedule: Sequence[ScheduledPhase] = (),
    capture: Mapping[str, Any] | None = None,
) -> list[str]:
    """Every disagreement between the report's load figures (and `load_totals`) and the
    ledger, and between the ledger and its witnesses (soak.report.witnesses: the schedule,
    the server's own count, result.json's `capture` count); empty when they all agree."""
    since_ns = judged_since_ns(report)
    whole, judged = ledger_split(store, run_id, since_ns)
    sent_total = (load_totals or {}).get("sent")
    if whole.windows == 0:
        if isinstance(sent_total, int | float) and sent_total > 0:
            return [f"no ledger windows for a run that sent {sent_total:,.0f} queries"]
        return []  # a run without load
    out = list(whole.problems)
    out += schedule_disagreements(report, schedule)
    out += server_disagreements(whole.all_windows, server_count(store, run_id))
    out += capture_disagreements(whole.all_windows, capture)
    out += quantile_disagreements(report, load_totals)
    out += engine_disagreements(whole.all_windows, load_totals)
    if whole.counts["completed"] > whole.counts["sent"]:
        out.append(f"completed {whole.counts['completed']:,.0f} above sent")
    phases = [row.get("metrics", {}) for row in report.get("phases", [])]
    out += _differ("phases (summed)", _summed(phases), whole.counts)
    classes = {row.get("class"): row for row in report.get("classes", [])}
    if judged is not None and "all" in classes:
        out += _differ("classes `all`", classes["all"], judged.counts)
        parts = [row for name, row in classes.items() if name != "all"]
        if parts:  # the classes' own windows, kept apart from `all`'s: they add up to it
            out += _differ("classes (summed)", _summed(parts), judged.counts)
    agents = report.get("agents") or []
    if judged is not None and agents:  # an agent lost is in no row: its due is not either
        sums = {k: v for k, v in _summed(agents).items() if k != "due"}
        out += _differ("agents (summed)", sums, judged.counts)
    if load_totals:
        out += _differ("result.json load_totals", load_totals, whole.counts)
    for c in report.get("criteria", []):
        value = c.get("value")
        if c.get("name") == "generator" and isinstance(value, int | float) and value > 1.0:
            out.append(f"generator criterion {value:.4f} above 1 (sent over due)")
    return out
