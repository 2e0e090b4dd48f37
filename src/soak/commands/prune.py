"""`soak prune --older-than 30d`: remove old runs' points from the embedded store.

A run is old when its newest sample is older than the given age; a run the
state store lists as pending or running is never removed, however old its
samples. Only the points go (SqliteStore.delete_run): the run's record in
state.db and its directory (reports, logs) stay, so `soak list` still shows it,
and a `pruned` event on it says when its points went (`soak compare` names it).

A destructive command says what it is about to remove first, in words ("older
than 1 minute: 10 runs, 42.0 MiB of points"); `--dry-run` says only that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click

from soak.clock import ns_to_s, s_to_ns
from soak.errors import InputError
from soak.sinks.sqlite import SqliteStore
from soak.units import parse_duration_s
from soak.words import counted, duration_words

MiB = 1024**2


@dataclass(frozen=True)
class OldRun:
    run_id: str
    newest_ns: int  # its newest sample
    samples: int


def active_runs(state_db: Path) -> set[str]:
    """Ids of the runs state.db lists as pending or running (none without a state.db)."""
    from soak.runs.state import ACTIVE, StateStore

    if not state_db.exists():
        return set()
    state = StateStore(state_db)
    try:
        return {r.id for r in state.list_runs(ACTIVE)}
    finally:
        state.close()


def old_runs(
    store: SqliteStore, older_than_s: float, keep: set[str], now_ns: int
) -> tuple[list[OldRun], int]:
    """The runs whose newest sample is older than `older_than_s`, oldest first; not `keep`.
    With them, the samples of every run in the store: one count over the samples table
    gives both (a scan of the whole file, so none when no run is old; then 0)."""
    before_ns = now_ns - s_to_ns(older_than_s)
    old = sorted((last_ns, soak) for soak, last_ns in store.last_sample_ns().items())
    chosen = [(last_ns, soak) for last_ns, soak in old if last_ns < before_ns and soak not in keep]
    counts = store.sample_counts() if chosen else {}
    runs = [OldRun(soak, last_ns, counts.get(soak, 0)) for last_ns, soak in chosen]
    return runs, sum(counts.values())


def share_bytes(store: SqliteStore, runs: list[OldRun], all_samples: int) -> float:
    """About how much of the file the runs' samples fill: their share of all samples."""
    if not all_samples:
        return 0.0
    return store.used_bytes() * sum(r.samples for r in runs) / all_samples


def record_pruned(state_db: Path, runs: list[OldRun], now_ns: int) -> None:
    """A `pruned` event on each run state.db knows (a store of another directory's runs
    has none here)."""
    from soak.runs.state import PRUNED_EVENT, StateStore

    if not runs or not state_db.exists():
        return
    state = StateStore(state_db)
    try:
        for run in runs:
            if state.get_run(run.run_id) is not None:
                message = f"points removed by soak prune ({run.samples:,} samples)"
                state.add_event(run.run_id, now_ns, PRUNED_EVENT, message, float(run.samples))
    finally:
        state.close()


@click.command("prune")
@click.option("--older-than", "older_than", required=True, help="An age such as 30d or 12h.")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The service's data directory (default $SOAK_HOME or ~/.local/share/soak).",
)
@click.option(
    "--store",
    "store_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A point store other than the data directory's points.db.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def prune_cmd(
    older_than: str, data_dir: Path | None, store_path: Path | None, dry_run: bool
) -> None:
    """Remove the points of runs whose newest sample is older than --older-than."""
    from soak.runs.layout import DataDir

    try:
        older_than_s = parse_duration_s(older_than)
    except ValueError as exc:
        raise InputError(f"--older-than: {exc}") from exc
    if older_than_s <= 0:
        raise InputError(f"--older-than: must be more than 0, got {older_than!r}")
    layout = DataDir.default(data_dir)
    path = store_path if store_path is not None else layout.points_db
    if not path.exists():
        raise InputError(f"no point store at {path}")
    keep = active_runs(layout.state_db)
    now_ns = time.time_ns()
    store = SqliteStore(path)
    try:
        runs, all_samples = old_runs(store, older_than_s, keep, now_ns)
        nbytes = share_bytes(store, runs, all_samples)
        click.echo(_plan_line(runs, older_than_s, nbytes, path, keep, dry_run))
        for run in runs:
            newest = datetime.fromtimestamp(ns_to_s(run.newest_ns), UTC).isoformat(
                timespec="seconds"
            )
            said = "would remove" if dry_run else "removing"
            click.echo(f"  {said} {run.run_id}: {run.samples:,} samples, newest {newest}")
            if not dry_run:
                store.delete_run(run.run_id)
        free = store.free_bytes()
    finally:
        store.close()
    if dry_run:
        return
    record_pruned(layout.state_db, runs, now_ns)
    click.echo(
        f"{counted(len(runs), 'run')} removed from {path}; {free / MiB:.1f} MiB free inside it,"
        " reused by new points (the file does not shrink)"
    )


def _plan_line(
    runs: list[OldRun], older_than_s: float, nbytes: float, path: Path, keep: set[str], dry: bool
) -> str:
    """ "older than 1 minute: 10 runs, 42.0 MiB of points (12,345 samples) from points.db"."""
    what = f"older than {duration_words(older_than_s)}"
    if not runs:
        return f"{what}: no runs in {path}; nothing to remove"
    kept = f"; {counted(len(keep), 'active run')} kept whatever their age" if keep else ""
    verb = "would remove" if dry else "removing"
    samples = sum(r.samples for r in runs)
    return (
        f"{verb} the points of the runs {what}: {counted(len(runs), 'run')}, about"
        f" {nbytes / MiB:,.1f} MiB ({samples:,} samples) from {path}{kept}"
    )
