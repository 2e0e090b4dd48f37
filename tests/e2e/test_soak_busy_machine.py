"""A soak beside two CPU hogs (`yes > /dev/null`): the report's worst latency window says
the machine was saturated, so a reader can tell a busy machine from a slow server."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.soakrun import DEMO, QUICK, last_json, run_soak
from tests.support.ledger import assert_figures_agree

pytestmark = pytest.mark.e2e


@pytest.fixture
def hogs() -> Iterator[None]:
    procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_latency_window_beside_two_hogs_is_marked_saturated(tmp_path: Path, hogs: None) -> None:
    data = tmp_path / "data"
    proc = run_soak(
        # After the warm-up, a whole 10-s criteria window or more: the hogs run through it.
        "start", str(DEMO), "--foreground", "--duration", "20s", *QUICK,
        "--set", "criteria.leaks_ok=false",
        "--set", "criteria.window_s=10s",
        # A limit no window meets: the worst window is reported, with the machine beside it.
        "--set", "criteria.p99_ms_max={all: 0.001}",
        "--data-dir", str(data), "--json",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    run_id = last_json(proc.stdout)["id"]
    report = json.loads((data / "runs" / run_id / "report.json").read_text())
    windows = [c for c in report["criteria"] if c["name"] == "p99_ms[all]" and c["window"] != "run"]
    assert windows, report["criteria"]
    assert "machine: CPU busy" in windows[0]["message"]
    assert "(saturated" in windows[0]["message"], windows[0]["message"]
    # A machine too busy to keep up skips queries: due, counted, and the figures agree.
    assert_figures_agree(data, run_id, kept_up=False)
