"""The targets of a stored run, and the end of a run nobody drives any more.

Both are built from the run's record alone (its scenario, run directory and saved
target state), so the service can stop what a dead foreground command started.
"""

from __future__ import annotations

from pathlib import Path

from soak.errors import SoakError
from soak.runs.context import RunContext
from soak.runs.events import RunEvents
from soak.runs.layout import TargetFiles
from soak.runs.owed import hand_over_spools, run_sinks
from soak.runs.state import RunRecord, RunStatus
from soak.runs.supervise import abandoned_at_ns
from soak.runs.swaps import target_now
from soak.targets.group import OnEvent, TargetGroup


def target_group(record: RunRecord, on_event: OnEvent, data_dir: Path) -> TargetGroup:
    """A service's run outlives a service restart (it is resumed); a foreground run's
    processes die with its command."""
    sc = record.scenario
    return TargetGroup(
        target_now(sc, record.run_dir),  # the version the run's swaps have left running
        sc.services,
        sc.setup,
        files=TargetFiles(record.run_dir),
        run_id=record.id,
        base_dir=sc.base_dir,
        allow_targets=tuple(sc.allow_targets),
        on_event=on_event,
        resumable_in=None if record.foreground else data_dir,
        load_connections=sc.load.server_connections() if sc.load is not None else None,
    )


def reap(record: RunRecord, ctx: RunContext, reason: str) -> None:
    """A run nobody drives any more (its foreground command died): stop what it had
    started, from its saved state, and mark it `abandoned`."""

    # Its sinks are not opened again: its events go to its record (status, report).
    events = RunEvents(record.id, {}, record=ctx.state.record_event, write=lambda points: None)

    def event(kind: str, message: str, value: float = 0.0) -> None:
        events.add(kind, message, value)

    targets = target_group(record, event, ctx.data_dir.root)
    try:
        targets.attach(record.target_state or {})
    except SoakError as exc:
        event("error", f"re-attaching to stop: {exc}")
    targets.stop()
    # What its sinks had not taken when its command died is owed, as at any run's end.
    sinks = run_sinks(record.id, record.scenario, record.run_dir, ctx.data_dir, None)
    sinks.close()
    for message, points in hand_over_spools(record.id, sinks, ctx.state, ctx.metrics):
        event("spool_owed", message, float(points))
    event("stop", f"run abandoned: {reason}")
    ctx.state.update_run(
        record.id,
        status=RunStatus.ABANDONED,
        message=f"abandoned: {reason}",
        ended_ns=abandoned_at_ns(record),
    )
