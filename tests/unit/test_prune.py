"""`soak prune --older-than`: old runs' points leave the embedded store, running runs stay."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from soak.cli import main
from soak.clock import NS_PER_S
from soak.config import Scenario
from soak.points import Point
from soak.runs.state import StateStore
from soak.sinks.sqlite import SqliteStore

S = NS_PER_S
DAY_NS = 86_400 * S


def write_run(store: SqliteStore, run_id: str, last_ns: int, ticks: int = 100) -> None:
    tags = {"soak": run_id, "scenario": "s", "target": "t", "version": "1"}
    store.write(
        [
            p
            for i in range(ticks)
            for p in (
                Point("process", {"rss_anon_bytes": 1e8 + i, "fds": 40}, last_ns - i * S, tags),
                Point("load", {"sent": 10, "lost": 0}, last_ns - i * S, {**tags, "class": "all"}),
            )
        ]
    )


def record(state: StateStore, run_id: str, status: str) -> None:
    sc = Scenario.model_validate(
        {
            "name": run_id,
            "target": {"runtime": "process", "argv": ["/bin/true"]},
            "phases": [{"name": "steady", "duration_s": "2m", "rate_qps": 10}],
        }
    )
    state.create_run(run_id, sc, Path("/nowhere") / run_id)
    state.update_run(run_id, status=status)


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


def test_old_runs_go_running_and_recent_runs_stay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now_ns = time.time_ns()
    store = SqliteStore(tmp_path / "points.db")
    write_run(store, "old", now_ns - 40 * DAY_NS)
    write_run(store, "old-but-running", now_ns - 45 * DAY_NS)
    write_run(store, "recent", now_ns - 2 * DAY_NS)
    state = StateStore(tmp_path / "state.db")
    record(state, "old", "passed")
    record(state, "old-but-running", "running")
    state.close()

    assert run_cli(["prune", "--older-than", "30d", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("removing the points of the runs older than 30 days: 1 run, about ")
    assert "(400 samples)" in first and first.endswith("; 1 active run kept whatever their age")
    assert "  removing old: 400 samples, newest " in out and "1 run removed" in out
    assert sorted(store.last_sample_ns()) == ["old-but-running", "recent"]
    assert store.series("old", "process", "fds") == []
    assert len(store.series("recent", "process", "fds")[0][1]) == 100
    assert store.window_minima("old", "process", "fds", 0, 600.0) is None
    store.close()

    reopened = SqliteStore(tmp_path / "points.db")  # what a new writer sees
    write_run(reopened, "old", now_ns, ticks=1)  # a run id written again gets a new series
    assert reopened.series("old", "process", "fds")[0][1] == [(now_ns, 40.0)]


def test_nothing_old_removes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = SqliteStore(tmp_path / "points.db")
    write_run(store, "recent", time.time_ns())
    assert run_cli(["prune", "--older-than", "12h", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"older than 12 hours: no runs in {tmp_path / 'points.db'}; nothing")
    assert "0 runs removed" in out
    assert list(store.last_sample_ns()) == ["recent"]


@pytest.mark.parametrize("age", ["x", "-3d", "0", "30 parsecs"])
def test_bad_age_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], age: str
) -> None:
    SqliteStore(tmp_path / "points.db").close()
    assert run_cli(["prune", "--older-than", age, "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("soak: --older-than") and err.count("\n") == 1


def test_no_store_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["prune", "--older-than", "30d", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_dry_run_says_in_words_what_would_go_and_removes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`1m` is a minute, not a month: the words say so before anything goes."""
    now_ns = time.time_ns()
    store = SqliteStore(tmp_path / "points.db")
    for i in range(10):
        write_run(store, f"run-{i}", now_ns - (2 + i) * 60 * S)
    write_run(store, "now", now_ns)
    state = StateStore(tmp_path / "state.db")
    for i in range(10):
        record(state, f"run-{i}", "passed")
    state.close()
    argv = ["prune", "--older-than", "1m", "--data-dir", str(tmp_path)]
    assert run_cli([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("would remove the points of the runs older than 1 minute: 10 runs,")
    assert " MiB (4,000 samples) from " in out[0]
    assert len(out) == 11 and all(ln.startswith("  would remove run-") for ln in out[1:])
    assert len(store.last_sample_ns()) == 11  # nothing removed

    assert run_cli(argv) == 0
    assert sorted(store.last_sample_ns()) == ["now"]
    state = StateStore(tmp_path / "state.db")
    (pruned,) = [e for e in state.events("run-3") if e.kind == "pruned"]
    assert pruned.message == "points removed by soak prune (400 samples)"
    state.close()
    store.close()
