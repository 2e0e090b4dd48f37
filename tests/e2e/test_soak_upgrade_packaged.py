"""One soak across a packaged upgrade: scenarios/unbound-soak-1.17-to-1.26.yaml shortened
with --duration. unbound 1.17 (its Debian package's image) is swapped in place for 1.26
under load: a new container from the new image on the old one's volume and host port.
Its checks pass, the segments add up to the run, and nothing of the run is left in
docker."""

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
# Half a minute, 1-s ticks; the swap (a container's start, about 2 s) is a tenth of it:
# its lost queries and its slow answers are not what this test judges.
QUICK = [
    "--set", "samplers.interval_s=1",
    "--set", "criteria.not_judged=pass",
    "--set", "criteria.lost_ratio_max=0.2",
    "--set", "criteria.p99_ms_max={}",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _images() -> None:
    if (reason := docker_skip_reason(IMAGES, "scripts/build-test-images.sh upgrades")) is not None:
        pytest.skip(reason)


def test_unbound_1_17_swapped_for_1_26_in_place_under_load(tmp_path: Path) -> None:
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
