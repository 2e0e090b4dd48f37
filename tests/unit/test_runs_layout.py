"""The data directory's layout: the names a service, `soak report --data-dir`, `soak compare`
and `soak bench` find files by, and the run statuses as the store keeps them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soak.config import Scenario
from soak.runs.layout import (
    DataDir,
    TargetFiles,
    read_result,
    report_path,
    upgrade_owner_file,
    upgrade_owner_files,
    upgrade_run_dir,
    with_embedded_store,
)
from soak.runs.runid import new_run_id, run_id_tail
from soak.runs.state import ACTIVE, RunStatus, StateStore
from soak.sinks.destinations import InfluxV1SinkConfig, SqliteSinkConfig


def scenario(sinks: list[dict[str, Any]] | None = None) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "layout",
            "target": {"runtime": "process", "argv": ["/bin/true"]},
            "phases": [{"name": "steady", "duration_s": 60}],
            "sinks": sinks or [],
        }
    )


def test_the_files_of_a_data_directory(tmp_path: Path) -> None:
    data = DataDir(tmp_path)
    assert data.state_db == tmp_path / "state.db"
    assert data.points_db == tmp_path / "points.db"
    assert data.token == tmp_path / "token"
    assert data.reserve == tmp_path / "reserve.bin"
    assert data.bench == tmp_path / "bench"
    assert data.run_dir("r1") == tmp_path / "runs" / "r1"
    assert report_path(data.run_dir("r1"), "md") == tmp_path / "runs" / "r1" / "report.md"


def test_default_root_is_soak_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SOAK_HOME", str(tmp_path))
    assert DataDir.default().root == tmp_path
    assert DataDir.default(tmp_path / "other").root == tmp_path / "other"


@pytest.mark.parametrize(
    ("sinks", "where"),
    [
        (None, "DATA/points.db"),
        ([{"kind": "sqlite"}], "DATA/points.db"),
        ([{"kind": "sqlite", "path": "own.db"}], "RUN/own.db"),
        ([{"kind": "sqlite", "path": "/abs/p.db"}], "/abs/p.db"),
    ],
)
def test_points_path(tmp_path: Path, sinks: list[dict[str, Any]] | None, where: str) -> None:
    data, run_dir = DataDir(tmp_path / "d"), tmp_path / "d" / "runs" / "r"
    expected = where.replace("DATA", str(data.root)).replace("RUN", str(run_dir))
    assert data.points_path(scenario(sinks), run_dir) == Path(expected)


def test_the_embedded_store_is_always_there() -> None:
    influx = InfluxV1SinkConfig(kind="influx_v1", url="http://127.0.0.1:8086", db="d")
    assert [c.kind for c in with_embedded_store([influx])] == ["influx_v1", "sqlite"]
    own = SqliteSinkConfig(kind="sqlite", path="x.db")
    assert with_embedded_store([own]) == [own]


def test_read_result(tmp_path: Path) -> None:
    assert read_result(tmp_path) is None
    (tmp_path / "result.json").write_text("[1, 2]")
    assert read_result(tmp_path) is None  # not a result
    (tmp_path / "result.json").write_text(json.dumps({"status": "passed"}))
    assert read_result(tmp_path) == {"status": "passed"}


def test_statuses_are_stored_as_their_names(tmp_path: Path) -> None:
    store = StateStore(DataDir(tmp_path).state_db)
    store.create_run("r1", scenario(), tmp_path / "runs" / "r1")
    record = store.get_run("r1")
    assert record is not None and record.status is RunStatus.PENDING and record.active
    store.update_run("r1", status=RunStatus.FAILED)
    assert [r.id for r in store.list_runs(ACTIVE)] == []
    assert [r.status for r in store.list_runs((RunStatus.FAILED,))] == ["failed"]
    with pytest.raises(ValueError):
        store.update_run("r1", status="finished")  # not a status
    store.close()


def test_every_kind_of_run_has_one_id_format() -> None:
    """A soak, a bench, an upgrade and a standalone load: one slug-stamp-token id."""
    ids = [new_run_id(name, now_s=0) for name in ("My Soak!", "bench-pdns", "v4.8 to v4.9", "")]
    prefixes = ["my-soak-", "bench-pdns-", "v4-8-to-v4-9-", "run-"]
    for run_id, prefix in zip(ids, prefixes, strict=True):
        assert run_id.startswith(prefix + "19700101-000000-"), run_id
        assert run_id_tail(run_id).startswith("19700101-000000-")
    with pytest.raises(ValueError):
        run_id_tail("load-1234")


def test_the_data_directory_names_the_files_of_targets_and_upgrades(tmp_path: Path) -> None:
    files = TargetFiles(tmp_path / "run")
    assert files.log("pdns auth") == tmp_path / "run" / "pdns-auth.log"
    assert files.data("pdns") == tmp_path / "run" / "pdns-data"
    run_id = new_run_id("upgrade plan", now_s=0)
    run_dir = upgrade_run_dir(tmp_path, run_id)
    assert run_dir.name == "soak-upgrade-" + run_id_tail(run_id)
    upgrade_owner_file(run_dir).parent.mkdir()
    upgrade_owner_file(run_dir).write_text("host:1\n")
    assert upgrade_owner_files(tmp_path) == [upgrade_owner_file(run_dir)]
