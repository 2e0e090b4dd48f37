"""`soak start --foreground` end to end against real servers (pdns-recursor, dnsmasq)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from soak.clock import NS_PER_S
from soak.sinks.sqlite import SqliteStore
from tests.e2e.soakrun import (
    DEMO,
    QUICK,
    demo_in_foreground,
    processes_under,
    run_soak,
    service,
    soak_passes,
    status,
    wait_for,
)
from tests.support.ledger import assert_figures_agree
from tests.support.servers import free_port

pytestmark = pytest.mark.e2e


# 30 s at 1-s ticks: a 2.5-s warm-up, then five 5-s leak windows (QUICK needs three for
# a verdict of every resource).
DEMO_RUN_S = 30


def test_demo_scenario_soak_samples_verdicts_report(tmp_path: Path) -> None:
    data = tmp_path / "data"
    status = soak_passes(
        DEMO, data, f"{DEMO_RUN_S}s", *QUICK,
        # In 30 s the recursor's caches are still filling, so its memory grows for real;
        # leak criteria are judged on a target built to leak (test_soak_alerts).
        "--set", "criteria.leaks_ok=false",
        # Latency limits are for a quiet machine; the tests share two busy cores.
        "--set", "criteria.p99_ms_max={all: 1000, local: 1000}",
    )  # fmt: skip
    run_id = status["id"]
    assert status["lost_ratio"] < 0.001
    # One ledger: phases, classes, result.json, criteria and the store agree, to the query.
    ledger = assert_figures_agree(data, run_id)
    # `soak status` against a witness the ledger does not compute: the schedule (the
    # demo's 2 h warm-up at 100 q/s and 22 h at 300 q/s, scaled to the run's whole
    # seconds by its timeline, as the report's phases say).
    report = json.loads((data / "runs" / run_id / "report.json").read_text())
    warm_s, steady_s = (p["duration_s"] for p in report["phases"])
    assert warm_s + steady_s == DEMO_RUN_S
    scheduled = 100 * warm_s + 300 * steady_s
    totals = status["load_totals"]
    assert abs(totals["due"] - scheduled) <= 2, (totals, scheduled)
    assert totals["sent"] == ledger["sent"] == totals["due"]  # it kept up
    audited = run_soak("audit", run_id, "--data-dir", str(data))
    assert audited.returncode == 0 and "every load figure agrees" in audited.stdout
    assert "the engine's sockets took" in audited.stdout  # its counters are a witness too
    # A result.json that says otherwise (a stale copy, a bug) is a disagreement: exit 1,
    # the figure named, and an `accounting` event in the run.
    result_file = data / "runs" / run_id / "result.json"
    doc = json.loads(result_file.read_text())
    doc["load_totals"]["sent"] += 1
    result_file.write_text(json.dumps(doc))
    audited = run_soak("audit", run_id, "--data-dir", str(data))
    assert audited.returncode == 1, audited.stderr
    want = (
        f"result.json load_totals: sent {ledger['sent'] + 1:,.0f} != ledger {ledger['sent']:,.0f}"
    )
    assert want in audited.stdout
    listed = run_soak("status", run_id, "--data-dir", str(data), "--json")
    assert any(e["kind"] == "accounting" for e in json.loads(listed.stdout)["events"])
    doc["load_totals"]["sent"] -= 1
    result_file.write_text(json.dumps(doc))
    # Samples landed, on the 1-s grid, with the run's tags.
    store = SqliteStore(data / "points.db")
    try:
        rss = store.series(run_id, "process", "rss_anon_bytes")
        times = [t for t, _ in rss[0][1]]
        assert all(t % NS_PER_S == 0 for t in times)  # the 1-s grid, whole seconds
        # Every grid slot between the first and the last sample either has its sample or
        # is counted in a `ticks_missed` event (a busy machine delays ticks; none vanish).
        missed = sum(e["value"] for e in status["events"] if e["kind"] == "ticks_missed")
        slots = (times[-1] - times[0]) // NS_PER_S + 1
        assert len(times) + missed == slots
        assert slots >= DEMO_RUN_S - 5  # the warm-up's first second to the run's end
        assert store.series(run_id, "load", "rate_achieved", {"class": "miss"})
        assert store.series(run_id, "runtime", "cache_entries")
        verdict_points = store.series(run_id, "leak", "verdict")
    finally:
        store.close()
    # Verdicts were computed (every resource of the scenario) and judged.
    resources = {v["resource"] for v in status["verdicts"]}
    assert {"rss_anon_bytes", "fds", "threads"} <= resources
    assert {tags["resource"] for tags, _ in verdict_points} >= resources
    kinds = [e["kind"] for e in status["events"]]
    assert kinds.index("ready") < kinds.index("phase") < kinds.index("stop")
    # Nothing left running: the target and its helper are gone.
    assert processes_under(data / "runs" / run_id) == []
    # The report was written; the HTML shows its plots in a real browser.
    reports = status["reports"]
    assert set(reports) == {"html", "json", "md"}, status["events"][-3:]
    assert_html_shows_plots(Path(reports["html"]))
    md = run_soak("report", run_id, "--format", "md", "--data-dir", str(data))
    assert md.returncode == 0 and run_id in md.stdout
    # `soak compare` reads a soak run by id: against itself every figure is `same`.
    cmp = run_soak("compare", run_id, run_id, "--data-dir", str(data), "--json")
    assert cmp.returncode == 0, cmp.stderr
    compared = json.loads(cmp.stdout)
    figures = {f["name"]: f["verdict"] for f in compared["figures"]}
    assert figures["answered q/s"] == figures["RssAnon"] == "same"
    assert set(figures.values()) == {"same"}
    assert {row["resource"] for row in compared["leaks"]} >= resources


def assert_html_shows_plots(path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") >= 3
    assert "<polyline" in dom.stdout or "<path" in dom.stdout


def test_failed_criterion_exits_1(tmp_path: Path) -> None:
    proc = run_soak(
        "start", str(DEMO), "--foreground", "--duration", "8s", *QUICK,
        "--set", "criteria.p99_ms_max.all=0.0001", "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "FAIL  p99_ms[all]" in proc.stdout
    assert processes_under(tmp_path / "runs") == []


def test_bad_input_and_unstartable_target_exit_2(tmp_path: Path) -> None:
    bad = run_soak("start", str(DEMO), "--foreground", "--set", "phases=[]")
    assert bad.returncode == 2
    assert "phases" in bad.stderr
    unstartable = run_soak(
        "start", str(DEMO), "--foreground", "--duration", "5s",
        "--set", "target.argv=[/nonexistent/pdns_recursor]", "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert unstartable.returncode == 2, unstartable.stderr
    assert "not found" in unstartable.stderr.splitlines()[-1]
    # The helper (dnsmasq) had started: it was stopped again.
    assert processes_under(tmp_path / "runs") == []


def test_a_killed_foreground_run_is_reaped(tmp_path: Path) -> None:
    """SIGKILL: the target and its helper die with the command (a parent-death signal);
    the next service marks the run abandoned."""
    data = tmp_path / "data"
    fg = demo_in_foreground(data)
    try:
        run_id = wait_for(lambda: _running_id(data), 60.0, "the foreground run is running")
        fg.kill()
        fg.wait(10)
        gone = lambda: processes_under(data / "runs" / run_id) == []  # noqa: E731
        wait_for(gone, 10.0, "the target and its helper are gone with their soak process")
        port = free_port()
        with service(data, port):
            st = status(port, run_id)
        assert st["status"] == "abandoned" and "abandoned" in st["message"]
        assert processes_under(data / "runs" / run_id) == []
    finally:
        if fg.poll() is None:
            fg.kill()


def _running_id(data: Path) -> str | None:
    listed = run_soak("list", "--json", "--data-dir", str(data))
    if listed.returncode != 0:
        return None
    runs = [r for r in json.loads(listed.stdout) if r["status"] == "running"]
    return runs[0]["id"] if runs else None
