"""The run state store: records survive a reopen (what a service restart relies on)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from soak.config import Scenario
from soak.errors import InputError
from soak.runs.runid import new_run_id
from soak.runs.state import StateStore
from soak.service import auth


def scenario() -> Scenario:
    sc = Scenario.model_validate(
        {
            "name": "My Soak!",
            "target": {"runtime": "process", "argv": ["/bin/true"], "on_exit": "restart"},
            "phases": [{"name": "steady", "duration_s": "2m", "rate_qps": 10}],
            "leaks": {"thresholds": {"rss_anon_bytes": "1MiB/h"}},
        }
    )
    sc._base_dir = Path("/somewhere/scenarios")
    return sc


def test_run_id_is_a_slug() -> None:
    run_id = new_run_id("My Soak!", now_s=0)
    assert run_id.startswith("my-soak-19700101-000000-")


def test_record_round_trip_across_reopen(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    rec = store.create_run("r1", scenario(), tmp_path / "runs" / "r1")
    assert rec.status == "pending" and rec.active
    store.update_run(
        "r1",
        status="running",
        origin_ns=5,
        last_tick_ns=9,
        restarts=2,
        target_state={"target": {"pid": 123}},
        phase="steady",
    )
    store.add_event("r1", 7, "exited", "target killed by signal 9", 9.0)
    store.add_event("r1", 8, "restarted", "target restarted (1)", 1.0)
    store.close()

    store = StateStore(tmp_path / "state.db")
    rec2 = store.get_run("r1")
    assert rec2 is not None
    assert (rec2.status, rec2.origin_ns, rec2.last_tick_ns, rec2.restarts) == ("running", 5, 9, 2)
    assert rec2.target_state == {"target": {"pid": 123}}
    assert rec2.scenario.base_dir == Path("/somewhere/scenarios")
    assert rec2.scenario.leaks.thresholds["rss_anon_bytes"] == 1024**2
    assert rec2.scenario.target.on_exit == "restart"
    assert [e.kind for e in store.events("r1")] == ["exited", "restarted"]
    assert [e.kind for e in store.events("r1", limit=1)] == ["restarted"]
    assert [r.id for r in store.list_runs(("running",))] == ["r1"]
    assert store.list_runs(("passed",)) == []
    assert store.get_run("nope") is None


def test_update_refuses_unknown_columns(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    store.create_run("r1", scenario(), tmp_path / "r1")
    with pytest.raises(ValueError):
        store.update_run("r1", scenario="x")


def test_token_file_is_private_and_stable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(auth.TOKEN_ENV, raising=False)
    with pytest.raises(InputError):
        auth.client_token(tmp_path)
    token = auth.server_token(tmp_path)
    mode = stat.S_IMODE((tmp_path / "token").stat().st_mode)
    assert mode == 0o600
    assert auth.server_token(tmp_path) == token == auth.client_token(tmp_path)
    assert auth.token_matches(f"Bearer {token}", token)
    assert not auth.token_matches(f"Bearer {token}x", token)
    assert not auth.token_matches(None, token)
    assert not auth.token_matches(token, token)
    monkeypatch.setenv(auth.TOKEN_ENV, "from-env")
    assert auth.server_token(tmp_path) == "from-env" == auth.client_token(tmp_path)


def test_status_shows_the_record_of_every_event_it_shows(tmp_path: Path) -> None:
    """A status built from a record read before a restart still shows the restart's PID:
    the events are read first, then the record the run wrote before its event."""
    from soak.results.status import run_status

    store = StateStore(tmp_path / "state.db")
    store.create_run("r1", scenario(), tmp_path / "runs" / "r1")
    store.update_run("r1", status="running", target_state={"target": {"pid": 100}})
    stale = store.get_run("r1")
    assert stale is not None
    # The restart lands between the caller's read and the status: record, then event.
    store.update_run("r1", restarts=1, target_state={"target": {"pid": 200}})
    store.add_event("r1", 1, "restarted", "target restarted (1)", 1.0)
    status = run_status(stale, None, store)
    assert [e["kind"] for e in status["events"]] == ["restarted"]
    assert (status["restarts"], status["target_pid"]) == (1, 200)
    store.close()


def test_status_of_a_run_held_elsewhere_counts_lost_from_its_ledger(tmp_path: Path) -> None:
    """`soak status` of a foreground run (held by another process) mid-run: lost is the
    ledger's sum so far, the figure the run's live line and its result give; not `-`."""
    from soak.points import Point
    from soak.results.status import run_status
    from soak.service.live import summary_rows
    from soak.sinks.sqlite import SqliteStore

    load = {"rate_qps": 10, "mix": [{"name": "a", "queries": ["a.test A"]}]}
    sc = Scenario.model_validate({**scenario().model_dump(exclude_unset=True), "load": load})
    store = StateStore(tmp_path / "state.db")
    store.create_run("r1", sc, tmp_path / "runs" / "r1")
    store.update_run("r1", status="running", origin_ns=10**18)
    points = SqliteStore(tmp_path / "points.db")
    counts = {"due": 10, "sent": 10, "completed": 10, "lost": 0, "skipped": 0, "abandoned": 0}
    tags = {"soak": "r1", "class": "all"}
    points.write([Point("load", dict(counts), 10**18 + i * 10**9, tags) for i in range(3)])
    points.close()
    record = store.get_run("r1")
    assert record is not None
    status = run_status(record, None, store, points_db=tmp_path / "points.db")
    store.close()
    assert status["load_totals"]["sent"] == 30
    assert dict(summary_rows(status))["lost"] == "0 (0.0000%)"
