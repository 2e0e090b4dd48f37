"""Leak alerts end to end: two soaks at once in one service, a real Alertmanager.

One target holds 1 MiB more every second for the whole run; the other grows for a
few seconds, then holds still. Only the first may reach Alertmanager.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.soakrun import TOKEN, kinds, run_soak, service, service_place, status, wait_for
from tests.support.alertmanager import alertmanager, am_alerts
from tests.support.leaky import leaky_target

pytestmark = pytest.mark.e2e


def leaky_scenario(name: str, am_url: str, leaky_args: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "target": leaky_target(name, *leaky_args),
        "phases": [
            {"name": "warmup", "duration_s": "3s", "warmup": True},
            {"name": "steady", "duration_s": "42s"},
        ],
        "samplers": {"interval_s": 1, "load": False},
        # 3-s windows: the minimum of each still sees 1 MiB/s clearly, and 5 windows
        # (18 s after the warm-up) are enough for a significant trend.
        "leaks": {
            "window_s": "3s",
            "min_windows": 4,
            "interval_s": "3s",
            "startup_max_s": 0,  # the leak starts with the target: judged at once
            "thresholds": {"rss_anon_bytes": "100MiB/h"},
        },
        "alerting": {"alertmanagers": [am_url], "resend_interval_s": "5s"},
        "criteria": {"leaks_ok": True},
    }


def test_growing_target_alerts_plateau_does_not(tmp_path: Path) -> None:
    data, port, url = service_place(tmp_path)
    env = {"SOAK_TOKEN": TOKEN}
    am_dir = tmp_path / "am"
    am_dir.mkdir()
    with alertmanager(am_dir) as am, service(data, port):
        am_url = f"http://127.0.0.1:{am.port}"
        ids = {}
        for name, args in [
            ("grows", ["--kib-per-s", "1024", "--duration-s", "120"]),
            ("plateau", ["--kib-per-s", "1024", "--grow-for-s", "6", "--duration-s", "120"]),
        ]:
            path = tmp_path / f"{name}.yaml"
            path.write_text(yaml.safe_dump(leaky_scenario(name, am_url, args)))
            started = run_soak("start", str(path), "--server", url, env=env)
            assert started.returncode == 0, started.stderr
            ids[name] = started.stdout.strip()
        # Both soaks run at once in the one service.
        wait_for(
            lambda: all(status(port, i)["status"] == "running" for i in ids.values()),
            30.0,
            "both runs are running",
        )
        fired = wait_for(
            lambda: [a for a in am_alerts(am_url) if a["labels"].get("soak") == ids["grows"]],
            60.0,
            "Alertmanager has the alert of the growing target",
        )
        assert fired[0]["labels"]["resource"] == "rss_anon_bytes"
        assert "growing" in fired[0]["annotations"]["summary"]
        finals = {
            name: wait_for(
                lambda i=run_id: (
                    (s := status(port, i))["status"] not in ("pending", "running") and s
                ),
                60.0,
                f"{name} ends",
            )
            for name, run_id in ids.items()
        }
        time.sleep(1.0)
        plateau_alerts = [a for a in am_alerts(am_url) if a["labels"].get("soak") == ids["plateau"]]
    assert plateau_alerts == []
    grows, plateau = finals["grows"], finals["plateau"]
    assert "alert" in kinds(grows)
    assert "alert" not in kinds(plateau)
    verdict = {v["resource"]: v["verdict"] for v in grows["verdicts"]}
    assert verdict["rss_anon_bytes"] == "growing"
    assert grows["status"] == "failed" and "leak[rss_anon_bytes]" in grows["message"]
    plateau_verdict = {v["resource"]: v["verdict"] for v in plateau["verdicts"]}
    assert plateau_verdict["rss_anon_bytes"] in ("ok", "levelling")
    assert plateau["status"] == "passed", plateau["message"]
