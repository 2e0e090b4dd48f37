"""Not judged is not passed: a leaking refdns in a short run never exits 0.

refdns with `-shape=leak -shape-kib-per-s=2048` holds 2 MiB more anonymous memory every
second from its start (8 GiB/h). A run of a minute at the default start-up wait (24 leak
windows) cannot tell that rise from start-up growth: its leak criterion is `not judged`,
for that reason, and the run ends NOT JUDGED with exit 1 (or `growing`, exit 1, where the
detector can already tell). `criteria.not_judged: pass` lets such a run pass (exit 0),
the criteria not judged still named; its report fetched during the warm-up says RUNNING.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from soak.commands.status import local_status
from tests.e2e.soakrun import last_json, run_soak
from tests.e2e.test_soak_refdns import SCENARIO, SHORT
from tests.support.refdns import refdns_binary
from tests.support.soaks import started
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

# target.argv 7 (-querylog-trim-interval) and 9 (-leak=false) of scenarios/refdns-demo.yaml
LEAKING = [
    "--set", "target.argv.7=-shape-kib-per-s=2048",
    "--set", "target.argv.9=-shape=leak",
    "--set", "leaks.thresholds={rss_anon_bytes: 20MiB/h}",
    # The leak's memory traffic costs queries and query-log rows on two busy cores:
    # not what this test is about.
    "--set", "load.rate_qps=200",
    "--set", "criteria.lost_ratio_max=null",
    "--set", "criteria.querylog_dropped_max=null",
]  # fmt: skip


def foreground(data: Path, *sets: str) -> subprocess.Popen[str]:
    """`soak start --foreground` of the leaking refdns, its plain result lines on stdout."""
    return started(SCENARIO, data, *SHORT, *LEAKING, *sets)


def the_run(data: Path) -> dict[str, Any]:
    """The only run of `data` as `soak status RUN --json` gives it (and its exit code, and
    its `soak list` entry); {} before it is recorded."""
    listed = run_soak("list", "--json", "--data-dir", str(data))
    runs = json.loads(listed.stdout) if listed.returncode == 0 else []
    if not runs:
        return {}
    (run,) = runs
    got = run_soak("status", run["id"], "--json", "--data-dir", str(data))
    status: dict[str, Any] = last_json(got.stdout)
    status["exit"], status["listed"] = got.returncode, run
    return status


def test_a_leaking_refdns_in_a_short_run_never_passes(tmp_path: Path) -> None:
    refdns_binary()
    data = tmp_path / "data"
    proc = foreground(
        data,
        "--set", "leaks.startup_max_s=null",  # the default wait: 24 windows, 2 min here
        "--set", "phases.0.duration_s=10s",
        "--set", "phases.1.duration_s=40s",
    )  # fmt: skip
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, (out[-2000:], err[-3000:])
    result_line = next(ln for ln in out.splitlines() if ln.startswith("result: "))
    st = the_run(data)
    (leak,) = [c for c in st["criteria"] if c["name"] == "leak[rss_anon_bytes]"]
    verdicts = {v["resource"]: v["verdict"] for v in st["verdicts"]}
    verdict = verdicts["rss_anon_bytes"]
    assert st["exit"] == 1 and st["passed"] is False
    growing = [r for r, v in verdicts.items() if v == "growing"]
    if growing:  # found by evidence (its limit, its flat cache): failed, naming the leak
        assert st["status"] == "failed", st["message"]
        assert any(f"leak[{r}]" in result_line for r in growing), result_line
        return
    # Not judged, for its true reason: the start-up wait, not too little data.
    assert (leak["judged"], verdict) == (False, "insufficient"), leak
    assert "start-up wait" in leak["why"] and "too little data" not in st["message"]
    failed = [c["name"] for c in st["criteria"] if c["judged"] and not c["ok"]]
    assert failed == [], st["message"]
    assert st["status"] == "not_judged"
    assert result_line.startswith("result: not_judged: NOT JUDGED: "), result_line
    assert "leak[rss_anon_bytes] (the leak start-up wait" in result_line
    assert st["listed"]["status"] == "not_judged"
    assert st["listed"]["message"].startswith("NOT JUDGED: ")
    assert json.loads((data / "runs" / st["id"] / "result.json").read_text())["status"] == (
        "not_judged"
    )
    headline = Path(st["reports"]["md"]).read_text().split("\n")[2]
    assert headline.startswith("**NOT JUDGED — "), headline


def test_not_judged_pass_passes_and_names_them_and_a_warm_up_report_says_running(
    tmp_path: Path,
) -> None:
    refdns_binary()
    data = tmp_path / "data"
    proc = foreground(
        data,
        "--set", "criteria.not_judged=pass",
        "--set", "leaks.min_windows=50",  # never reached: every leak criterion waits
        "--set", "leaks.horizon_s=1s",  # and the limit is never near enough to judge at once
        "--set", "phases.0.duration_s=60s",  # long enough for a command to read it
        "--set", "phases.1.duration_s=20s",
    )  # fmt: skip
    try:
        # Read in this process (what `soak status --data-dir` reads): a busy machine takes
        # seconds to start a command.
        in_warmup = wait_for(
            lambda: (
                data.joinpath("state.db").exists()
                and (runs := local_status(data, None))
                and runs[0]["status"] == "running"
                and runs[0]["phase"] == "warmup"
                and runs[0]
            ),
            120.0,
            "the run is in its warm-up",
        )
        report = run_soak("report", in_warmup["id"], "--format", "md", "--data-dir", str(data))
        assert report.returncode == 0, report.stderr
        assert "**RUNNING after " in report.stdout, report.stdout[:600]
        assert "— so far: " in report.stdout
        assert "FAILED" not in report.stdout
        assert "| not judged yet |" in report.stdout
    finally:
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, (out[-2000:], err[-3000:])
    st = the_run(data)
    assert (st["status"], st["exit"], st["passed"]) == ("passed", 0, True)
    assert st["message"].startswith("passed by criteria.not_judged: pass; "), st["message"]
    # Named, with why: too few windows (or none complete, on a machine that missed ticks).
    named = re.compile(r"1 not judged: leak\[rss_anon_bytes\] \((too few windows|no samples)")
    assert named.search(st["message"]), st["message"]
    result_line = next(ln for ln in out.splitlines() if ln.startswith("result: "))
    assert result_line.startswith("result: passed: passed by criteria.not_judged: pass; ")
    assert named.search(result_line), result_line
