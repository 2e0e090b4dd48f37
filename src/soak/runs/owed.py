"""Spools that outlive their run: what an ended run's sinks did not take, replayed until
they do.

A run that ends with points in a sink's spool hands it over (`RunParts.close_sinks`: a
row in the state store's `owed_spools`, a `spool_owed` event, the
`soak_spool_owed_points` gauge). Whoever holds the data directory next (the service, or
a foreground command) drives an `OwedSpools`: every `drain()` replays each owed spool
whose retry interval has passed, in order, from where it stopped; an emptied spool is
removed with its row, and a `spool_drained` event says so. Nothing is removed while it
holds a point.

One process replays a spool at a time (`Spool.try_lock`), and never one a live run is
writing to (a `spool.dir` several runs share): that run replays it itself.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from soak.config import Scenario
from soak.runs.layout import DataDir, spool_dir, with_embedded_store
from soak.runs.state import ACTIVE, OwedSpool, StateStore
from soak.sinks import SinkSet, build_sinks, spool_dir_of
from soak.sinks.metrics import ServiceMetrics
from soak.sinks.spooling import SpoolingSink

log = logging.getLogger(__name__)

FAULT_RETRY_S = 60.0


def run_sinks(
    run_id: str,
    scenario: Scenario,
    run_dir: Path,
    data_dir: DataDir,
    metrics: ServiceMetrics | None,
) -> SinkSet:
    """A run's sinks as its scenario names them, each with its spool (the same files
    whoever builds them: the run, or the service replaying what an ended run owes)."""
    return build_sinks(
        with_embedded_store(scenario.sinks),
        scenario.spool,
        default_sqlite_path=data_dir.points_db,
        run_dir=run_dir,
        metrics=metrics,
        default_spool_dir=spool_dir(run_dir),
        run_id=run_id,
    )


def hand_over_spools(
    run_id: str, sinks: SinkSet, state: StateStore, metrics: ServiceMetrics
) -> list[tuple[str, int]]:
    """An ended run's closed sinks: each spool still holding points is recorded as owed;
    (the line that says so, its points) for each, for the run's events."""
    said = []
    for s in sinks.sinks:
        if s.spool.empty:
            continue
        state.set_owed(run_id, s.name, s.spool.path, s.spool.depth)
        metrics.set_owed(run_id, s.name, s.spool.depth)
        message = (
            f"{s.name}: {s.spool.depth} points still spooled at the run's end;"
            " replayed until the sink takes them"
        )
        said.append((message, s.spool.depth))
    return said


class OwedSpools:
    """The owed spools of one data directory, replayed by `drain()` (a scheduler job)."""

    def __init__(self, state: StateStore, data_dir: DataDir, metrics: ServiceMetrics) -> None:
        self.state = state
        self.data_dir = data_dir
        self.metrics = metrics
        # (run id, sink) -> the ended run's sinks, built once, kept while it owes
        self._held: dict[tuple[str, str], tuple[SinkSet, SpoolingSink]] = {}
        # (run id, sink) -> the fault last said, and when to try again
        self._failed: dict[tuple[str, str], tuple[str, float]] = {}

    def drain(self) -> None:
        """One replay attempt for each owed spool whose retry interval has passed."""
        owed_spools = self.state.owed()
        for key in set(self._held) - {(o.run_id, o.sink) for o in owed_spools}:
            self._release(key)  # replayed by another process meanwhile
        in_use = self._live_spool_dirs() if owed_spools else set()
        for owed in owed_spools:
            if owed.path.parent in in_use:
                continue
            key = (owed.run_id, owed.sink)
            if time.monotonic() < self._failed.get(key, ("", 0.0))[1]:
                continue
            try:
                self._drain_one(owed)
            except Exception as exc:  # an event of its run, never a silent stop
                self._fault(key, f"{owed.sink}: replaying its spool: {exc}")
            else:
                self._failed.pop(key, None)

    def close(self) -> None:
        for key in list(self._held):
            self._release(key)

    def _fault(self, key: tuple[str, str], message: str) -> None:
        """A spool that cannot be replayed at all (its sink cannot be built: a password's
        environment variable unset): tried again after FAULT_RETRY_S, said once."""
        said, _ = self._failed.get(key, ("", 0.0))
        self._failed[key] = (message, time.monotonic() + FAULT_RETRY_S)
        if message != said:
            log.warning("run %s: %s", key[0], message)
            self._event(key[0], "error", message)

    def _drain_one(self, owed: OwedSpool) -> None:
        spooling = self._hold(owed)
        if spooling is None:
            return
        before = spooling.counters["replayed"]
        spooling.replay_due()
        for e in spooling.take_events():
            if e.kind != "sink_recovered":  # said below, as `spool_drained`
                self._event(owed.run_id, e.kind, f"{owed.sink}: {e.message}", e.value)
        if spooling.counters["replayed"] == before and not spooling.spool.empty:
            return
        if spooling.spool.empty:
            replayed = spooling.counters["replayed"]
            spooling.spool.remove()  # while locked: no other process finds it empty
            self._release((owed.run_id, owed.sink))
            self.state.clear_owed(owed.run_id, owed.sink)
            self.metrics.set_owed(owed.run_id, owed.sink, 0)
            message = f"{owed.sink}: the points spooled at the run's end were replayed"
            self._event(owed.run_id, "spool_drained", message, float(replayed))
            return
        self.state.set_owed(owed.run_id, owed.sink, owed.path, spooling.spool.depth)
        self.metrics.set_owed(owed.run_id, owed.sink, spooling.spool.depth)

    def _hold(self, owed: OwedSpool) -> SpoolingSink | None:
        """The sink of an owed spool, built from its run's scenario and locked; None while
        another process replays it, or when it is gone (its row goes too)."""
        key = (owed.run_id, owed.sink)
        if key in self._held:
            return self._held[key][1]
        record = self.state.get_run(owed.run_id)
        if record is None or not owed.path.exists():
            self.state.clear_owed(owed.run_id, owed.sink)
            self.metrics.set_owed(owed.run_id, owed.sink, 0)
            return None
        sinks = run_sinks(record.id, record.scenario, record.run_dir, self.data_dir, None)
        found = [s for s in sinks.sinks if s.name == owed.sink and s.spool.path == owed.path]
        if not found or not found[0].spool.try_lock():
            _close_sinks(sinks)
            return None
        found[0].spool.reload()  # as the last holder (another process) left it
        self.metrics.set_owed(owed.run_id, owed.sink, found[0].spool.depth)
        self._held[key] = (sinks, found[0])
        return found[0]

    def _release(self, key: tuple[str, str]) -> None:
        sinks, spooling = self._held.pop(key)
        spooling.spool.unlock()
        _close_sinks(sinks)

    def _live_spool_dirs(self) -> set[Path]:
        """The spool directories of runs still active (pending or running)."""
        return {
            spool_dir_of(r.scenario.spool, r.run_dir, spool_dir(r.run_dir))
            for r in self.state.list_runs(ACTIVE)
        }

    def _event(self, run_id: str, kind: str, message: str, value: float = 0.0) -> None:
        self.state.add_event(run_id, time.time_ns(), kind, message, value)


def _close_sinks(sinks: SinkSet) -> None:
    """The sinks themselves, not their spools: an ended run's spool is not replayed by
    a close (that is `drain`'s), nor its events written anywhere but its record."""
    for s in sinks.sinks:
        s.sink.close()
