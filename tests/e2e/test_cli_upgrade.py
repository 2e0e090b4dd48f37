"""`soak upgrade` end to end: the real command, the real pdns_server, exit codes, JUnit, JSON."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from soak.sinks.sqlite import SqliteStore

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "scenarios" / "pdns-auth-upgrade.yaml"
API_KEY = "soak-old-api-key-4.3.1"  # what the archive script stores

needs_pdns = pytest.mark.skipif(
    shutil.which("pdns_server") is None
    or not Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql").exists(),
    reason="pdns-server with the gsqlite3 backend is not installed",
)


def soak(*args: str | Path, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-m", "soak.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=REPO,
        check=False,
    )


def upgrade(archive: Path, work: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """`soak upgrade` of the shipped plan on the archive's data, in `work`."""
    return soak("upgrade", PLAN, "--set", f"data.archive={archive}", *args, "--work-dir", work)


def junit_counts(path: Path) -> tuple[int, int, int]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return (
        int(suite.get("tests", -1)),
        int(suite.get("failures", -1)),
        int(suite.get("skipped", -1)),
    )


def table_counts(stdout: str) -> tuple[int, int, int, int]:
    m = re.search(r"^(\d+) of (\d+) checks pass \((\d+) failed, (\d+) skipped\)$", stdout, re.M)
    assert m, stdout
    passed, total, failed, skipped = map(int, m.groups())
    return passed, total, failed, skipped


@needs_pdns
def test_passing_plan_exit_0_with_junit_and_json(archive: Path, tmp_path: Path, work: Path) -> None:
    junit, result_json = tmp_path / "junit.xml", tmp_path / "result.json"
    points_db = tmp_path / "points.db"
    sinks = f"sinks=[{{kind: sqlite, path: {points_db}}}]"
    proc = upgrade(archive, work, "--set", sinks, "--junit", junit, "--json", result_json)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert table_counts(proc.stdout) == (18, 18, 0, 0)
    assert junit_counts(junit) == (18, 0, 0)
    data = json.loads(result_json.read_text())
    assert (data["passed"], data["total"], data["exit_code"]) == (18, 18, 0)
    assert data["matrix"] is False and len(data["runs"]) == 1
    assert data["runs"][0]["new_ready_s"] < 10
    # every step says when it began and how long it took (the stop too)
    steps = data["runs"][0]["steps"]
    assert [s["start_s"] for s in steps] == sorted(s["start_s"] for s in steps)
    stops = [s for s in steps if s["phase"] == "old" and s["text"].startswith("stopped in ")]
    assert len(stops) == 1 and stops[0]["duration_ms"] > 0
    # the results as points, as the upgrade dashboard reads them
    store = SqliteStore(points_db)
    run_id = data["runs"][0]["run_id"]
    checks = list(store.points(run_id, "upgrade_check"))
    assert len(checks) == 18 and all(p.fields["ok"] == 1 for p in checks)
    assert {p.tags["plan"] for p in checks} == {"pdns-auth-upgrade"}
    events = list(store.points(run_id, "event"))
    ready = [p for p in events if p.tags["kind"] == "ready"]
    assert sorted(p.tags["version"] for p in ready) == [
        "4.7 on the 4.3.1 schema",
        "4.7 on the migrated schema",
    ]
    # each step an event of the run, as a soak's are (kind: its phase; value: its seconds)
    step_events = [p for p in events if p.tags["kind"] != "ready"]
    assert sorted((p.tags["kind"], p.fields["message"]) for p in step_events) == sorted(
        (s["phase"], s["text"]) for s in steps
    )
    store.close()
    # every step shown as it happened, in order
    phases = [line.split()[0] for line in proc.stdout.splitlines()[1:] if line.strip()]
    # Before its first step, a run sweeps what killed runs left (a `cleanup` line each,
    # on a machine shared with other tests): this run's steps start at `data`.
    assert "data" in phases, proc.stdout
    phases = phases[phases.index("data") :]
    order = ["data", "old", "populate", "snapshot", "migrate", "new", "check", "cleanup"]
    assert [p for p in dict.fromkeys(phases) if p in order] == order, proc.stdout
    # the API key from the old data is a secret: never printed nor written
    for text in (proc.stdout, proc.stderr, junit.read_text(), result_json.read_text()):
        assert API_KEY not in text
    assert list(work.iterdir()) == []  # nothing left without --keep


@needs_pdns
def test_without_migration_exit_1_and_junit_counts_like_the_table(
    archive: Path, tmp_path: Path, work: Path
) -> None:
    junit = tmp_path / "junit.xml"
    proc = upgrade(archive, work, "--set", "migrate=null", "--junit", junit)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    passed, total, failed, skipped = table_counts(proc.stdout)
    assert (passed, total, failed, skipped) == (12, 18, 3, 3)
    assert junit_counts(junit) == (total, failed, skipped)
    root = ET.parse(junit).getroot()
    failures = {
        case.get("name"): case.find("failure")
        for case in root.iter("testcase")
        if case.find("failure") is not None
    }
    post = failures["new zone POSTed"]
    assert post is not None
    assert post.get("message") == "expected status 201; got status 500: Internal Server Error"
    skipped_cases = [c.get("name") for c in root.iter("testcase") if c.find("skipped") is not None]
    assert skipped_cases == ["records unchanged (API)", "record PATCHed", "PATCHed record resolves"]
    assert "soak: 12 of 18 checks pass (3 failed, 3 skipped)" in proc.stderr


def write_plan(tmp_path: Path, checks: list[object]) -> Path:
    plan = {
        "name": "bad",
        "old": {"runtime": "process", "argv": ["pdns_server"], "ports": {"dns": {}}},
        "new": {"runtime": "process", "argv": ["pdns_server"], "ports": {"dns": {}}},
        "checks": checks,
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ([{"name": "x", "kind": "vibes"}], r"checks\.0: Input tag 'vibes'"),
        ([{"include": "checks/none.yaml"}], r"checklist file .*none\.yaml not found"),
        (
            [{"name": "x", "kind": "log", "pattern": "E", "needs": ["ghost"]}],
            r"checks\.0\.needs: 'ghost' names no check",
        ),
    ],
)
def test_bad_plan_exit_2_before_anything_starts(
    tmp_path: Path, work: Path, checks: list[object], message: str
) -> None:
    proc = soak("upgrade", write_plan(tmp_path, checks), "--work-dir", work, timeout_s=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.search(message, proc.stderr), proc.stderr
    assert proc.stdout == ""  # no step shown: nothing started
    assert list(work.iterdir()) == []
    validate = soak("validate", write_plan(tmp_path, checks), timeout_s=60)
    assert validate.returncode == 2 and re.search(message, validate.stderr)


@needs_pdns
def test_a_new_version_that_cannot_start_on_the_old_data_exits_1_with_its_log(
    archive: Path, tmp_path: Path, work: Path
) -> None:
    junit = tmp_path / "junit.xml"
    failing = 'new.argv=["sh", "-c", "echo fatal: schema version 9 unknown >&2; exit 3"]'
    proc = upgrade(archive, work, "--set", failing, "--junit", junit)
    # The upgrade failing is the gate's answer (1), not a plan that cannot run (2).
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "new version" in proc.stdout and "fatal: schema version 9 unknown" in proc.stdout
    assert "1 failed, 18 skipped" in proc.stderr
    assert junit_counts(junit) == (19, 1, 18)  # the start failure, then every case skipped
    first = ET.parse(junit).getroot().find("testsuite/testcase")
    assert first is not None and first.get("name") == "new version starts"
    failure = first.find("failure")
    assert failure is not None and "\nfatal: schema version 9 unknown" in (failure.text or "")
    # the log lines once, in the body; the message is the reason alone
    assert "fatal" not in failure.get("message", "")
    assert (failure.text or "").count("fatal: schema version 9 unknown") == 1
    # the run directory went; the failed run's logs stay beside it, the API key masked
    (logs,) = work.iterdir()
    assert logs.name.startswith("soak-upgrade-logs-")
    texts = {str(p.relative_to(logs)): p.read_text() for p in logs.rglob("*") if p.is_file()}
    assert "fatal: schema version 9 unknown" in texts["new/pdns-auth.log"], texts
    assert all(API_KEY not in text for text in texts.values())


def test_validate_accepts_the_shipped_plan(archive: Path) -> None:
    proc = soak("validate", PLAN, timeout_s=60)
    if not (REPO / "fixtures" / "pdns-auth-4.3.1.tar.gz").exists():
        assert proc.returncode == 2 and "data.archive" in proc.stderr
    else:
        assert proc.returncode == 0 and "upgrade plan 'pdns-auth-upgrade' is valid" in proc.stdout


def matrix_plan(tmp_path: Path) -> Path:
    """A matrix of two old versions (process plans: `true` stands for the server); the
    second entry's binary is not there."""
    side = {"runtime": "process", "argv": ["{{server}}"], "ports": {"dns": {}}}
    plan = {
        "name": "mx",
        "vars": {"server": "true"},
        "matrix": {"old": {"a": {"vars.server": "true"}, "b": {"vars.server": "no-such-server"}}},
        "old": side,
        "new": {**side, "argv": ["true"]},
        "checks": [{"name": "ready", "kind": "ready_within", "within_s": 10}],
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def test_validate_checks_every_matrix_entry_and_names_it(tmp_path: Path) -> None:
    plan = matrix_plan(tmp_path)
    proc = soak("validate", plan, timeout_s=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "mx[old b]: " in proc.stderr and "no-such-server" in proc.stderr
    assert "mx[old a]" not in proc.stderr  # the good entry is not blamed
    # --old and --set as CI would run it: only entry a, or b's binary set right
    ok = soak("validate", plan, "--old", "a", timeout_s=60)
    assert ok.returncode == 0 and "1 matrix entry valid: 'mx[old a]'" in ok.stdout, ok.stderr
    fixed = soak("validate", plan, "--set", "vars.server=sh", timeout_s=60)  # after entries
    both = "2 matrix entries valid: 'mx[old a]', 'mx[old b]'"
    assert fixed.returncode == 0 and both in fixed.stdout, fixed.stderr
    # `soak upgrade` refuses it the same way, with a JUnit that names the entry
    junit = tmp_path / "junit.xml"
    up = soak("upgrade", plan, "--junit", junit, timeout_s=60)
    assert up.returncode == 2 and up.stdout == ""
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().iter("testsuite")}
    assert (suites["mx[old b]"].get("errors"), suites["mx[old a]"].get("errors")) == ("1", "0")
    assert suites["mx[old a]"].get("skipped") == "1"
