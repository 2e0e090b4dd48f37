"""A soak stopped halfway (SIGTERM to a foreground run), against a real unbound on
loopback: the windows in flight at the stop are closed and kept, and the run's figures
cover exactly the seconds it ran (the audit holds; what was due before the stop is due,
sent or, in the last moment, skipped)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from soak.runs.layout import DataDir
from tests.e2e.soakrun import foreground_json_argv, last_json
from tests.support.ledger import assert_figures_agree, load_series_rows
from tests.support.servers import ServerProc, external_unbound, module_unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

RATE_QPS = 300
DURATION_S = 120


server = module_unbound(threads=1)


def scenario(tmp_path: Path, port: int) -> Path:
    doc = {
        "name": "stopped",
        "target": external_unbound(port),
        "phases": [{"name": "steady", "duration_s": f"{DURATION_S}s"}],
        "samplers": {"interval_s": 1},
        "load": {
            "rate_qps": RATE_QPS,
            "workers": 2,
            "seed": 7,
            "mix": [{"name": "hit", "queries": ["www.example.test A"]}],
        },
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def windows_stored(data: Path) -> int:
    """How many `load` windows of class `all` the run's store holds so far."""
    rows = load_series_rows(data / "points.db", "COUNT(*)", "due")
    if rows is None:
        return 0
    return sum(int(n) for tags, n in rows if json.loads(tags).get("class") == "all")


def test_a_run_stopped_halfway_covers_exactly_the_seconds_it_ran(
    server: ServerProc, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    argv = foreground_json_argv(scenario(tmp_path, server.port), data)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: windows_stored(data) >= 5, 90, "five seconds of load stored")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.strip(), err[-3000:]
    status = last_json(out)
    counts = assert_figures_agree(data, status["id"], kept_up=False)
    # what was due before the stop is due: a query due in the last moment before the
    # workers saw the stop did not leave, and is skipped (at most a control poll's worth)
    assert counts["skipped"] <= 0.05 * RATE_QPS, counts
    run_dir = DataDir(data).run_dir(status["id"])
    totals = json.loads((run_dir / "result.json").read_text())["load_totals"]
    seconds = totals["seconds"]
    assert 5 <= seconds < DURATION_S  # stopped halfway, every second it ran kept
    # every stored second is whole but the one cut by the stop
    assert RATE_QPS * (seconds - 1) < counts["due"] <= RATE_QPS * seconds
    assert counts["completed"] + counts["lost"] == counts["sent"]
