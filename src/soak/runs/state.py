"""Runs, their events and their state, in SQLite in the service's data directory.

The service writes here before and after every step that matters for a resume:
the scenario as validated (overrides and --duration applied), the tick origin,
the last tick, the target's state for re-attaching, the status and the phase.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from soak.config import Scenario
from soak.runs.events import EventRecord


class RunStatus(StrEnum):
    """A run is `pending` until its target is ready, `running` until its end, then one
    of the final statuses. `running` runs are resumed when the service starts again.
    `abandoned`: a foreground run whose command died without ending it (SIGKILL, an OOM
    kill): told as soon as its owner is gone (soak.runs.supervise.as_seen), stored when
    the next soak command on the data directory stops what it left (reap)."""

    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    # Completed, no criterion failed, but one could not be judged: no pass (exit 1) unless
    # the scenario says `criteria.not_judged: pass`.
    NOT_JUDGED = "not_judged"
    STOPPED = "stopped"
    ERROR = "error"
    ABANDONED = "abandoned"


ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)

# The event `soak prune` leaves on a run whose points it removed (its record stays).
PRUNED_EVENT = "pruned"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    scenario TEXT NOT NULL,
    base_dir TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    status TEXT NOT NULL,
    phase TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    created_ns INTEGER NOT NULL,
    started_ns INTEGER,
    ended_ns INTEGER,
    origin_ns INTEGER,
    last_tick_ns INTEGER,
    restarts INTEGER NOT NULL DEFAULT 0,
    target_state TEXT,
    foreground INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    time_ns INTEGER NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    value REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS events_run ON events (run_id, time_ns);
CREATE TABLE IF NOT EXISTS owed_spools (
    run_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    path TEXT NOT NULL,
    points INTEGER NOT NULL,
    since_ns INTEGER NOT NULL,
    PRIMARY KEY (run_id, sink)
);
"""

_UPDATABLE = {
    "status",
    "phase",
    "message",
    "started_ns",
    "ended_ns",
    "origin_ns",
    "last_tick_ns",
    "restarts",
    "target_state",
}


@dataclass(frozen=True)
class OwedSpool:
    """The spool of an ended run's sink that still holds points (runs.owed replays it)."""

    run_id: str
    sink: str
    path: Path
    points: int
    since_ns: int  # when the run handed it over


@dataclass
class RunRecord:
    id: str
    name: str
    scenario: Scenario
    run_dir: Path
    status: RunStatus
    phase: str
    message: str
    created_ns: int
    started_ns: int | None
    ended_ns: int | None
    origin_ns: int | None
    last_tick_ns: int | None
    restarts: int
    target_state: dict[str, Any] | None
    foreground: bool

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


def scenario_to_json(scenario: Scenario) -> str:
    return scenario.model_dump_json()


def scenario_from_json(text: str, base_dir: str) -> Scenario:
    scenario = Scenario.model_validate_json(text)
    scenario._base_dir = Path(base_dir)
    return scenario


class StateStore:
    """One SQLite file; one connection guarded by a lock (the API and jobs share it)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Created 0600 before SQLite opens it (its -wal and -shm files take its mode): the
        # state holds every run's scenario.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30.0)
        self._db.row_factory = sqlite3.Row
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            # One commit per tick: durable against a crash of the service, not of the host.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def create_run(
        self, run_id: str, scenario: Scenario, run_dir: Path, *, foreground: bool = False
    ) -> RunRecord:
        with self._lock:
            self._db.execute(
                "INSERT INTO runs (id, name, scenario, base_dir, run_dir, status, created_ns,"
                " foreground) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    scenario.name,
                    scenario_to_json(scenario),
                    str(scenario.base_dir),
                    str(run_dir),
                    RunStatus.PENDING.value,
                    time.time_ns(),
                    int(foreground),
                ),
            )
            self._db.commit()
        record = self.get_run(run_id)
        assert record is not None
        return record

    def update_run(self, run_id: str, **values: Any) -> None:
        unknown = set(values) - _UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        if "status" in values:
            values["status"] = RunStatus(values["status"]).value
        if "target_state" in values and values["target_state"] is not None:
            values["target_state"] = json.dumps(values["target_state"])
        columns = ", ".join(f"{k} = ?" for k in values)
        with self._lock:
            self._db.execute(f"UPDATE runs SET {columns} WHERE id = ?", (*values.values(), run_id))
            self._db.commit()

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _record(row) if row is not None else None

    def list_runs(self, statuses: tuple[RunStatus, ...] | None = None) -> list[RunRecord]:
        query, args = "SELECT * FROM runs", tuple(RunStatus(s).value for s in statuses or ())
        if statuses:
            query += f" WHERE status IN ({', '.join('?' * len(statuses))})"
        with self._lock:
            rows = self._db.execute(query + " ORDER BY created_ns", args).fetchall()
        return [_record(r) for r in rows]

    def record_event(self, event: EventRecord) -> None:
        """An event of a run (`runs.events.RunEvents`: the one path events take)."""
        self.add_event(event.run_id, event.time_ns, event.kind, event.message, event.value)

    def add_event(self, run_id: str, time_ns: int, kind: str, message: str, value: float) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO events (run_id, time_ns, kind, message, value) VALUES (?, ?, ?, ?, ?)",
                (run_id, time_ns, kind, message, value),
            )
            self._db.commit()

    def events(self, run_id: str, limit: int | None = None) -> list[EventRecord]:
        """The run's events in time order; with `limit`, only the latest ones."""
        query = "SELECT * FROM events WHERE run_id = ? ORDER BY time_ns DESC, seq DESC"
        args: tuple[Any, ...] = (run_id,)
        if limit:
            query, args = query + " LIMIT ?", (run_id, limit)
        with self._lock:
            rows = self._db.execute(query, args).fetchall()
        return [
            EventRecord(r["run_id"], r["time_ns"], r["kind"], r["message"], r["value"])
            for r in reversed(rows)
        ]

    def set_owed(self, run_id: str, sink: str, path: Path, points: int) -> None:
        """An ended run's sink owes `points` (kept since the first hand-over)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO owed_spools (run_id, sink, path, points, since_ns)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, sink) DO UPDATE SET"
                " points = excluded.points, path = excluded.path",
                (run_id, sink, str(path), points, time.time_ns()),
            )
            self._db.commit()

    def clear_owed(self, run_id: str, sink: str) -> None:
        with self._lock:
            self._db.execute(
                "DELETE FROM owed_spools WHERE run_id = ? AND sink = ?", (run_id, sink)
            )
            self._db.commit()

    def owed(self, run_id: str | None = None) -> list[OwedSpool]:
        """Every owed spool (of one run), oldest hand-over first."""
        query, args = "SELECT * FROM owed_spools", tuple[str, ...]()
        if run_id is not None:
            query, args = query + " WHERE run_id = ?", (run_id,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY since_ns, sink", args).fetchall()
        return [
            OwedSpool(r["run_id"], r["sink"], Path(r["path"]), r["points"], r["since_ns"])
            for r in rows
        ]


def _record(row: sqlite3.Row) -> RunRecord:
    state = row["target_state"]
    return RunRecord(
        id=row["id"],
        name=row["name"],
        scenario=scenario_from_json(row["scenario"], row["base_dir"]),
        run_dir=Path(row["run_dir"]),
        status=RunStatus(row["status"]),
        phase=row["phase"],
        message=row["message"],
        created_ns=row["created_ns"],
        started_ns=row["started_ns"],
        ended_ns=row["ended_ns"],
        origin_ns=row["origin_ns"],
        last_tick_ns=row["last_tick_ns"],
        restarts=row["restarts"],
        target_state=json.loads(state) if state else None,
        foreground=bool(row["foreground"]),
    )
