"""A soak across an upgrade resumed by a new service at any point (besides the points
tests/e2e/test_soak_upgrade_refdns.py covers: during the migration, after the swap):
before the swap, the resumed run swaps as planned; during the swap's checks, the run
ends `failed`, not soaked on half-swapped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.runs.layout import DataDir
from tests.e2e.soakrun import (
    ended,
    ends_passed,
    kinds,
    processes_under,
    ran_for,
    resumed,
    service,
    service_place,
    status,
    submitted,
    swap_interrupted,
    wait_for,
)
from tests.e2e.test_soak_upgrade_refdns import QUICK, SCENARIO, no_strays  # noqa: F401
from tests.support.ledger import assert_figures_agree
from tests.support.procs import cmdline
from tests.support.refdns import refdns_binary

pytestmark = pytest.mark.e2e


@pytest.mark.usefixtures("no_strays")
def test_a_run_resumed_before_its_swap_swaps_as_planned(tmp_path: Path) -> None:
    """A service SIGKILLed before the swap: the next one resumes the run on the first
    version, swaps at the planned moment (its checks pass, as in one service's run) and
    the segments add up to the ledger. 160 s: the swap at 40 s, the seconds the service
    is away due and skipped (the generator criterion wants 90% of the schedule sent)."""
    refdns_binary()
    data, port, url = service_place(tmp_path)
    with service(data, port) as serve:
        run_id = submitted(
            url,
            str(SCENARIO), "--duration", "160s", *QUICK,
        )  # fmt: skip
        before = ran_for(port, run_id, 10.0)
        assert "swap" not in kinds(before)
        serve.kill()
        serve.wait(10)
    with service(data, port):
        back = resumed(port, run_id)
        assert "-format=1" in cmdline(back["target_pid"])  # the first version still
        final = ends_passed(port, run_id, 240.0)
    swaps = [e["message"] for e in final["events"] if e["kind"] == "swap"]
    assert swaps[-1] == "swap 0: format-2: 7 of 7 checks passed", swaps
    report = json.loads((DataDir(data).run_dir(run_id) / "report.json").read_text())
    old, new = report["segments"]
    assert (old["version"], new["version"]) == ("format-1", "format-2")
    # The seconds the service was away are due and skipped: the ledger still agrees.
    ledger = assert_figures_agree(data, run_id, kept_up=False)
    for count in ("due", "sent", "skipped", "completed", "lost"):
        assert old["load"][count] + new["load"][count] == ledger[count]
    assert processes_under(data) == []


@pytest.mark.usefixtures("no_strays")
def test_a_service_killed_during_the_swaps_checks_ends_the_run_not_half_swapped(
    tmp_path: Path,
) -> None:
    """SIGKILL of `soak serve` while the swap's checks run (the new version ready, its
    last check a 6-s command): the next service ends the run `failed`, saying so, the
    swap's record `interrupted`, nothing of the run left running."""
    refdns_binary()
    data, port, url = service_place(tmp_path)
    slow_check = "upgrade.swaps.0.checks.6={name: slow, kind: command, argv: [sleep, '6'],"
    slow_check += " timeout_s: 10s}"
    with service(data, port) as serve:
        run_id = submitted(
            url,
            str(SCENARIO), "--duration", "40s", *QUICK, "--set", slow_check,
        )  # fmt: skip
        wait_for(
            lambda: any("format-2 ready" in e["message"] for e in status(port, run_id)["events"]),
            60.0,
            "the new version is ready, its checks under way",
        )
        serve.kill()
        serve.wait(10)
    with service(data, port):
        final = ended(port, run_id, 60.0)
    swap_interrupted(
        final, data, run_id, "the service stopped during swap 0 (format-1 -> format-2)"
    )
