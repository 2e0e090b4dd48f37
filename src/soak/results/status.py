"""A run's status as one JSON-able dict: `GET /runs/{id}`, `soak status`, the live view.

A live run (in this process) gives its latest tick and load totals; a run that
is not (finished, or run in the foreground by another process) is described
from its record, its events and its result file; a foreground run whose command
is gone is `abandoned` from that moment (soak.runs.supervise.as_seen).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from soak.clock import ns_to_s
from soak.points import FieldValue
from soak.runs import timeline
from soak.runs.layout import REPORTS, read_result
from soak.runs.live import LiveFigures
from soak.runs.state import RunRecord, StateStore
from soak.runs.supervise import as_seen


def _iso(time_ns: int | None) -> str | None:
    if time_ns is None:
        return None
    return datetime.fromtimestamp(ns_to_s(time_ns), tz=UTC).isoformat(timespec="seconds")


def run_status(
    record: RunRecord,
    live: Callable[[], LiveFigures] | None,
    state: StateStore,
    *,
    brief: bool = False,
    points_db: Path | None = None,
    with_size: bool = False,
) -> dict[str, Any]:
    """`live`: the figures of a run held in this process, read after its events;
    `points_db`: where to read the latest samples of a run not live in this process;
    `with_size`: the run's bytes in that store (a count of its samples: for `soak status`,
    not for a view refreshed every second)."""
    events = [] if brief else state.events(record.id, limit=50)
    if not brief:
        # The events first, then the record: a run writes its record (restart count, the
        # new PID) before the event that announces it, so every event shown here has its
        # record in what is read next. The caller's record may predate the events.
        record = state.get_run(record.id) or record
    record = as_seen(record)  # a foreground run whose command is gone: `abandoned`
    scenario = record.scenario
    now_ns = time.time_ns()
    duration_s = scenario.duration_s
    status: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "status": record.status,
        "phase": record.phase,
        "message": record.message,
        "created": _iso(record.created_ns),
        "started": _iso(record.started_ns),
        "ended": _iso(record.ended_ns),
        "duration_s": duration_s,
        "elapsed_s": None,
        "remaining_s": None,
        "restarts": record.restarts,
        "target": scenario.target.name,
        "foreground": record.foreground,
        "target_pid": ((record.target_state or {}).get("target") or {}).get("pid"),
        # points an ended run's sinks have not taken yet (runs.owed replays them)
        "owed": {o.sink: o.points for o in state.owed(record.id)},
    }
    if record.origin_ns is not None:
        until_ns = record.ended_ns if record.ended_ns is not None else now_ns
        elapsed_s = max(0.0, ns_to_s(until_ns - record.origin_ns))
        status["elapsed_s"] = round(elapsed_s, 1)
        # An ended run has nothing remaining, however early it ended (stopped, failed).
        if record.ended_ns is None:
            status["remaining_s"] = round(max(0.0, duration_s - elapsed_s), 1)
        replay = scenario.load.replay if scenario.load is not None else None
        if replay is not None:  # its plan's rate, not the phases' (live figures have it)
            if replay.rate_qps is not None:
                status["rate_target_qps"] = replay.rate_qps
        elif record.active:
            phases = timeline.Timeline.of(scenario, record.origin_ns)
            status["rate_target_qps"] = phases.rate_at(now_ns)
    if live is not None:
        status.update(_live(live()))
    elif not brief and points_db is not None and points_db.exists():
        status["latest"] = stored_latest(points_db, record.id)
        if record.ended_ns is None and scenario.load is not None:  # an ended run: its result
            status.update(_lost(stored_totals(points_db, record.id)))
    if with_size and points_db is not None and points_db.exists():
        status.update(stored_size(points_db, record.id))
    result = read_result(record.run_dir)
    if result is not None:
        status.setdefault("verdicts", result.get("verdicts", []))
        status["criteria"] = result.get("criteria", [])
        status["passed"] = result.get("passed")
        if "load_totals" not in status and result.get("load_totals"):
            status.update(_lost(result["load_totals"]))
        if result.get("capture"):  # `capture:`: the file a later run replays
            status["capture"] = result["capture"]
    if brief:
        return status
    status["events"] = [
        {"time": _iso(e.time_ns), "kind": e.kind, "message": e.message, "value": e.value}
        for e in events
    ]
    status["reports"] = {
        fmt: str(record.run_dir / name)
        for fmt, name in REPORTS.items()
        if (record.run_dir / name).exists()
    }
    return status


# What the status view shows of a run it does not hold: (measurement, tags) -> fields.
LATEST_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("process", ""): ("rss_bytes", "rss_anon_bytes", "rss_file_bytes", "fds", "threads"),
    ("runtime", ""): ("goroutines", "heap_inuse_bytes"),
    ("load", "all"): ("rate_achieved", "rate_target", "lat_p99_ms", "lost"),
}


def stored_latest(points_db: Path, run_id: str) -> dict[str, dict[str, FieldValue]]:
    """The newest value of each field the view shows, read from the point store."""
    from soak.sinks.sqlite import SqliteStore

    store = SqliteStore(points_db)
    latest: dict[str, dict[str, FieldValue]] = {}
    try:
        for (measurement, cls), names in LATEST_FIELDS.items():
            key = f"{measurement},class={cls}" if cls else measurement
            for name in names:
                tags = {"class": cls} if cls else None
                found = store.series(run_id, measurement, name, tags)
                if found and found[0][1]:
                    latest.setdefault(key, {})[name] = found[0][1][-1][1]
    finally:
        store.close()
    return latest


def stored_size(points_db: Path, run_id: str) -> dict[str, Any]:
    """The run's points in the embedded store so far: bytes (its share of the file, as
    the store tells it) and samples; the disk a run costs, while it runs."""
    from soak.sinks.sqlite import SqliteStore

    store = SqliteStore(points_db)
    try:
        size_bytes, samples = store.run_bytes(run_id)
    finally:
        store.close()
    return {"store_bytes": size_bytes, "store_samples": samples, "store_path": str(points_db)}


def stored_totals(points_db: Path, run_id: str) -> dict[str, Any]:
    """The load's counts so far: the ledger's sums over its stored windows, as result.json's
    `load_totals` will be (report.audit.ledger_totals); all 0 before the first window."""
    from soak.report.audit import ledger_sums
    from soak.sinks.sqlite import SqliteStore

    store = SqliteStore(points_db)
    try:
        sums = ledger_sums(store, run_id)
    finally:
        store.close()
    return {name: int(value) for name, value in sums.counts.items()}


def _live(live: LiveFigures) -> dict[str, Any]:
    out: dict[str, Any] = {"latest": dict(live.latest), "restarts": live.restarts}
    if live.target_pid is not None:
        out["target_pid"] = live.target_pid
    if live.rate_target_qps is not None:
        out["rate_target_qps"] = live.rate_target_qps
    load_all = live.latest.get("load,class=all", {})
    if load_all:
        out["rate_achieved_qps"] = load_all.get("rate_achieved")
        out["p99_ms"] = load_all.get("lat_p99_ms")
    if live.load_totals:
        out.update(_lost(live.load_totals))
    out["verdicts"] = [
        {
            "resource": v.resource,
            "verdict": v.verdict,
            "slope_per_hour": v.slope_per_hour,
            "p_value": v.p_value,
            "windows": v.windows,
        }
        for v in live.verdicts
    ]
    return out


def _lost(totals: dict[str, Any]) -> dict[str, Any]:
    sent = float(totals.get("sent", 0) or 0)
    lost = float(totals.get("lost", 0) or 0)
    latency = totals.get("latency_ms") or {}
    return {
        "load_totals": {k: v for k, v in totals.items() if isinstance(v, int | float)},
        "lost": lost,
        "lost_ratio": lost / sent if sent else 0.0,
        "p99_whole_run_ms": latency.get("p99"),
    }
