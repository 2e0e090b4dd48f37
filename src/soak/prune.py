"""`soak prune --older-than 30d`: remove old runs' points from the embedded store.

A run is old when its newest sample is older than the given age; a run the
state store lists as pending or running is never removed, however old its
samples. Only the points go (SqliteStore.delete_run): the run's record in
state.db and its directory (reports, logs) stay, so `soak list` still shows it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import click

from soak.errors import InputError
from soak.sinks.sqlite import SqliteStore
from soak.units import parse_duration_s

MiB = 1024**2


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


def prune_store(
    store: SqliteStore, older_than_s: float, keep: set[str], now_ns: int
) -> list[tuple[str, int, int]]:
    """(run id, newest sample ns, samples removed) of each run removed, oldest first."""
    before_ns = now_ns - round(older_than_s * 1e9)
    old = sorted(
        ((last_ns, soak) for soak, last_ns in store.last_sample_ns().items()),
    )
    return [
        (soak, last_ns, store.delete_run(soak))
        for last_ns, soak in old
        if last_ns < before_ns and soak not in keep
    ]


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
def prune_cmd(older_than: str, data_dir: Path | None, store_path: Path | None) -> None:
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
    store = SqliteStore(path)
    try:
        removed = prune_store(store, older_than_s, keep, time.time_ns())
        free = store.free_bytes()
    finally:
        store.close()
    for soak, last_ns, samples in removed:
        last = datetime.fromtimestamp(last_ns / 1e9, UTC).isoformat(timespec="seconds")
        click.echo(f"removed {soak}: {samples} samples, newest {last}")
    click.echo(
        f"{len(removed)} run(s) removed from {path}; {free / MiB:.1f} MiB free inside it,"
        " reused by new points (the file does not shrink)"
    )
