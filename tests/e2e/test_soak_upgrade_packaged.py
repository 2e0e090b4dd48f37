"""One soak across a packaged upgrade, shortened with --duration:
scenarios/unbound-soak-1.17-to-1.26.yaml (unbound 1.17's Debian package image swapped in
place for 1.26's under load: a new container from the new image on the old one's volume
and host port) and scenarios/pdns-auth-soak-4.4-to-4.7.yaml (pdns-server 4.4.1 filled
with zones through its API, the schema migrated on the volume, 4.7.3 on it, then the
swap's rollback to 4.4.1 on the migrated database). Their checks pass, the segments add
up to the run, the audit holds, and nothing of the run is left in docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.runs.layout import DataDir
from tests.e2e.soakrun import ROOT, last_json, run_soak
from tests.support.ledger import assert_figures_agree
from tests.support.skips import docker_skip_reason
from tests.support.upgrades import docker_leftovers

pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.upgrades]

SCENARIO = ROOT / "scenarios" / "unbound-soak-1.17-to-1.26.yaml"
IMAGES = ["soak-test/unbound:1.17", "soak-test/unbound:1.26"]
PDNS = ROOT / "scenarios" / "pdns-auth-soak-4.4-to-4.7.yaml"
PDNS_IMAGES = ["soak-test/pdns-auth:4.4", "soak-test/pdns-auth:4.7"]
# Half a minute, 1-s ticks; the swap (a container's start, about 2 s) is a tenth of it:
# its lost queries and its slow answers are not what this test judges.
QUICK = [
    "--set", "samplers.interval_s=1",
    "--set", "criteria.not_judged=pass",
    "--set", "criteria.lost_ratio_max=0.2",
    "--set", "criteria.p99_ms_max={}",
]  # fmt: skip


def images(names: list[str]) -> None:
    if (reason := docker_skip_reason(names, "scripts/build-test-images.sh upgrades")) is not None:
        pytest.skip(reason)


def test_unbound_1_17_swapped_for_1_26_in_place_under_load(tmp_path: Path) -> None:
    images(IMAGES)
    proc = run_soak(
        "start", str(SCENARIO), "--foreground", "--duration", "30s", *QUICK,
        "--data-dir", str(tmp_path / "data"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = last_json(proc.stdout)
    assert status["status"] == "passed", status["message"]
    run_dir = DataDir(tmp_path / "data").run_dir(status["id"])
    report = json.loads((run_dir / "report.json").read_text())
    old, new = report["segments"]
    assert (old["version"], new["version"]) == ("1.17", "1.26")
    assert [c["status"] for c in new["cases"]] == ["pass"] * 4
    assert new["swap"]["status"] == "pass" and new["swap"]["ready_s"] > 0
    ledger = assert_figures_agree(tmp_path / "data", status["id"])
    assert old["load"]["sent"] + new["load"]["sent"] == ledger["sent"]
    assert old["load"]["sent"] > 0 and new["load"]["completed"] > 0
    assert docker_leftovers(status["id"]) == ([], [])


def test_pdns_4_4_migrated_and_swapped_for_4_7_under_load_then_rolled_back(
    tmp_path: Path,
) -> None:
    """pdns-server 4.4.1's gsqlite3 data (two zones, a TSIG key, made through its API)
    migrated by the new image's shipped schema migration in a one-shot container on the
    volume, 4.7.3 started on it under load (its checks: the data carried over, the API's
    writes that the old schema answers with HTTP 500), then 4.4.1 again on the migrated
    database (the rollback's checks). 60 s: each swap costs a few seconds."""
    images(PDNS_IMAGES)
    proc = run_soak(
        "start", str(PDNS), "--foreground", "--duration", "60s", *QUICK,
        "--set", "criteria.lost_ratio_max=0.3",
        "--data-dir", str(tmp_path / "data"), "--json",
    )  # fmt: skip
    status = last_json(proc.stdout)
    assert proc.returncode == 0, (status.get("message"), proc.stderr[-3000:])
    assert status["status"] == "passed", status["message"]
    run_dir = DataDir(tmp_path / "data").run_dir(status["id"])
    report = json.loads((run_dir / "report.json").read_text())
    result = json.loads((run_dir / "result.json").read_text())
    old, new, back = report["segments"]
    assert [(s["version"], s["rollback"]) for s in (old, new, back)] == [
        ("4.4.1", False), ("4.7.3", False), ("4.4.1", True),
    ]  # fmt: skip
    assert [c["status"] for c in new["cases"]] == ["pass"] * 12, new["cases"]
    assert [c["status"] for c in back["cases"]] == ["pass"] * 6, back["cases"]
    assert new["swap"]["status"] == "pass" and back["swap"]["status"] == "pass"
    ledger = assert_figures_agree(tmp_path / "data", status["id"])
    for count in ("due", "sent", "completed", "lost"):
        assert sum(s["load"][count] for s in (old, new, back)) == ledger[count]
        assert ledger[count] == result["load_totals"][count]
    assert all(s["load"]["completed"] > 0 for s in (old, new, back))
    assert "migrate: " in " ".join(e["message"] for e in status["events"] if e["kind"] == "swap")
    for junit in ("swap-0-junit.xml", "swap-0-rollback-junit.xml"):
        assert 'failures="0"' in (run_dir / junit).read_text()
    assert docker_leftovers(status["id"]) == ([], [])
