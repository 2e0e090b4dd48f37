"""A leak alert raised after a soak's swap names the version running when it fires:
scenarios/refdns-soak-upgrade.yaml with a real Alertmanager, the new version of refdns
started with a memory leak on purpose (`-shape=leak`, 4 MiB/s) and the old one without.
The alert Alertmanager holds and the run's stored `alert` events carry `version:
format-2` and `segment: 1`, not the run's first version; on a service's /metrics,
`soak_run_info` (which the alert rules join) names the version running and its segment."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from soak.sinks.sqlite import SqliteStore
from tests.e2e.soakrun import (
    ROOT,
    TOKEN,
    last_json,
    service,
    service_place,
    status,
    submitted,
    wait_for,
)
from tests.support.alertmanager import alertmanager, am_alerts
from tests.support.refdns import refdns_binary
from tests.support.soaks import start_argv

pytestmark = pytest.mark.e2e

SCENARIO = ROOT / "scenarios" / "refdns-soak-upgrade.yaml"
# 3 s of warm-up, 12 s of the old version, 30 s of the new one. The new version leaks
# 4 MiB/s (the threshold: 1 GiB/h, 0.3 MiB/s, above what the old one's start-up grows),
# in place of its -migrate=true (the default) and -cache-entries flags. 3-s leak windows,
# judged from the warm-up's end, so that the leak is seen within the new version's time.
SETS = [
    "phases.0.duration_s=3s", "phases.1.duration_s=12s", "phases.2.duration_s=30s",
    "upgrade.swaps.0.target.argv.5=-shape=leak",
    "upgrade.swaps.0.target.argv.6=-shape-kib-per-s=4096",
    "samplers.interval_s=1",
    "leaks.window_s=3s", "leaks.interval_s=3s", "leaks.min_windows=4", "leaks.startup_max_s=0",
    "leaks.thresholds={rss_anon_bytes: 1GiB/h}",
    "criteria.not_judged=pass", "criteria.lost_ratio_max=0.05",
]  # fmt: skip


def test_an_alert_raised_after_the_swap_carries_the_new_version(tmp_path: Path) -> None:
    refdns_binary()
    data = tmp_path / "data"
    (tmp_path / "am").mkdir()
    with alertmanager(tmp_path / "am") as am:
        am_url = f"http://127.0.0.1:{am.port}"
        sets = [*SETS, f"alerting.alertmanagers=[{am_url}]", "alerting.resend_interval_s=5s"]
        argv = start_argv(SCENARIO, data, *(a for s in sets for a in ("--set", s)))
        fg = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            (alert,) = wait_for(lambda: am_alerts(am_url), 120.0, "a leak alert is raised")
        finally:
            out, err = fg.communicate(timeout=180)
    assert fg.returncode in (0, 1), err[-3000:]  # judged: the leak may fail the run
    labels = alert["labels"]
    assert (labels["resource"], labels["version"], labels["segment"]) == (
        "rss_anon_bytes", "format-2", "1",
    ), labels  # fmt: skip
    status = last_json(out)
    store = SqliteStore(data / "points.db")
    try:
        events = list(store.points(status["id"], "event"))
    finally:
        store.close()
    swap_ns = min(e.time_ns for e in events if e.tags.get("kind") == "swap")
    alerts = [e for e in events if e.tags.get("kind") == "alert"]
    assert alerts and all(e.time_ns > swap_ns for e in alerts)
    assert {(e.tags["version"], e.tags["segment"]) for e in alerts} == {("format-2", "1")}
    assert "SoakLeakGrowing firing: rss_anon_bytes growing" in str(alerts[0].fields["message"])


def run_info(port: int, run_id: str) -> list[dict[str, str]]:
    text = httpx.get(
        f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    ).text
    return [
        s.labels
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "soak_run_info" and s.labels.get("soak") == run_id
    ]


def test_the_services_run_info_names_the_version_running_across_the_swap(
    tmp_path: Path,
) -> None:
    """`soak serve`'s /metrics: format-1 and segment 0 before the swap (at 10 s of 40),
    format-2 and segment 1 after it, one series at a time; gone with the run."""
    refdns_binary()
    data, port, url = service_place(tmp_path)
    with service(data, port):
        run_id = submitted(
            url,
            str(SCENARIO), "--duration", "40s", "--set", "samplers.interval_s=1",
            "--set", "criteria.not_judged=pass", "--set", "criteria.lost_ratio_max=0.05",
        )  # fmt: skip

        def versions() -> list[tuple[str, str]]:
            return [(i.get("version", ""), i.get("segment", "")) for i in run_info(port, run_id)]

        wait_for(lambda: versions() == [("format-1", "0")], 30.0, "format-1 on /metrics")
        wait_for(lambda: versions() == [("format-2", "1")], 60.0, "format-2 after the swap")
        swaps = [e["message"] for e in status(port, run_id)["events"] if e["kind"] == "swap"]
        assert swaps and swaps[0].startswith("swap 0: format-1 -> format-2")
        wait_for(
            lambda: status(port, run_id)["status"] not in ("pending", "running"), 90.0, "its end"
        )
        wait_for(lambda: run_info(port, run_id) == [], 10.0, "no run info once it ended")
