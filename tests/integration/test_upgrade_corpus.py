"""The corpus answer diff against the real pdns_server (process plan): 1000 questions
asked of the old version and of the new; a record changed between the snapshot and the
check (by the migrate step, on the database) is found, and nothing otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.upgrade.report import to_json
from soak.upgrade.result import UpgradeResult
from tests.support.skips import not_installed
from tests.support.upgrades import PDNS_PLAN, run_plan

pytestmark = pytest.mark.integration

if (_SKIP := not_installed("pdns-server and sqlite3", ["pdns_server", "sqlite3"])) is not None:
    pytest.skip(_SKIP, allow_module_level=True)

CORPUS = (
    "snapshot=[{kind: corpus, name: corpus, file: pdns-auth-corpus.queries,"
    " count: 1000, rate_qps: 2000}]"
)
CHECK = "checks=[{name: corpus, kind: corpus, snapshot: corpus, max_differences: 0}]"


def run(archive: Path, work: Path, sql: str) -> UpgradeResult:
    """The plan with the corpus, and `sql` run on the database between old and new."""
    migrate = f"migrate.command=[sqlite3, '{{data_dir}}/pdns.sqlite3', {json.dumps(sql)}]"
    return run_plan(PDNS_PLAN, [f"data.archive={archive}", CORPUS, CHECK, migrate], work)[0]


def test_no_difference_when_nothing_changed(archive: Path, tmp_path: Path) -> None:
    result = run(archive, tmp_path, "SELECT 1;")
    check = result.checks[0]
    assert check.status == "pass", check.message
    assert check.got == "no differences in 1000 answers"
    assert check.details == []


def test_a_planted_record_change_is_found(archive: Path, tmp_path: Path) -> None:
    sql = (
        "UPDATE records SET content='192.0.2.99' WHERE name='www.example.test' AND type='A';"
        "UPDATE records SET ttl=7 WHERE name='www.second.test';"
    )
    result = run(archive, tmp_path, sql)
    check = result.checks[0]
    assert check.status == "fail" and result.exit_code == 1
    details = check.details or []
    by_query = {(d["query"], d["category"]) for d in details}
    # The A record itself and the CNAME that leads to it; the TTL change alone.
    assert by_query == {
        ("www.example.test A", "answers"),
        ("api.example.test A", "answers"),
        ("www.second.test A", "ttl"),
    }
    www = next(d for d in details if d["query"] == "www.example.test A")
    assert www["before"] == "[www.example.test. A 192.0.2.10]"
    assert www["after"] == "[www.example.test. A 192.0.2.99]"
    # Every difference in the JSON; the message counts them by category.
    assert to_json(result)["checks"][0]["differences"] == details
    assert f"{len(details)} of 1000 answers differ (answers " in check.got
    assert ", ttl " in check.got
