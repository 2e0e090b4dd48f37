"""Two workers and 2-s ticks against a real unbound on loopback, a warm-up at one rate and
a steady phase at another: the schedule is exact (due is rate x seconds of each phase, to
the query), every figure of the run agrees with its ledger (soak.report.audit), the
warm-up's windows are the warm-up's, and the generator criterion is sent over due, never
above 1. The tick (2 s) is not the window (1 s): nothing depends on their being equal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from soak.runs.layout import DataDir
from tests.e2e.soakrun import last_json, soak_argv
from tests.support.ledger import assert_figures_agree
from tests.support.servers import ServerProc, external_unbound, module_unbound

pytestmark = pytest.mark.e2e

WARMUP_S, WARMUP_QPS = 4, 500
STEADY_S, STEADY_QPS = 10, 1_500


server = module_unbound(threads=2)


def scenario(tmp_path: Path, port: int) -> Path:
    doc = {
        "name": "ticks-2s",
        "target": external_unbound(port),
        "phases": [
            {
                "name": "warmup",
                "duration_s": f"{WARMUP_S}s",
                "rate_qps": WARMUP_QPS,
                "warmup": True,
            },
            {"name": "steady", "duration_s": f"{STEADY_S}s", "rate_qps": STEADY_QPS},
        ],
        "samplers": {"interval_s": 2},
        "load": {
            "workers": 2,
            "seed": 11,
            "mix": [
                {"name": "hit", "weight": 3, "queries": ["www.example.test A"]},
                {"name": "miss", "random": {"zone": "example.test"}},
            ],
        },
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_two_workers_at_2s_ticks_agree_with_the_ledger(server: ServerProc, tmp_path: Path) -> None:
    data = tmp_path / "data"
    argv = soak_argv(
        "start", str(scenario(tmp_path, server.port)), "--foreground", "--json",
        "--data-dir", str(data),
    )  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # a criterion may fail on a busy machine
    status = last_json(proc.stdout)
    counts = assert_figures_agree(data, status["id"], kept_up=False)
    # the schedule is exact whatever the machine did: rate x seconds of each phase
    assert counts["due"] == WARMUP_QPS * WARMUP_S + STEADY_QPS * STEADY_S, counts
    assert counts["sent"] + counts["skipped"] == counts["due"]
    assert counts["completed"] + counts["lost"] + counts["abandoned"] == counts["sent"]
    generator = next(c for c in status["criteria"] if c["name"] == "generator")
    assert 0 < generator["value"] <= 1, generator
    # the generator criterion is judged after the warm-up: the steady phase's windows only
    report = json.loads((DataDir(data).run_dir(status["id"]) / "result.json").read_text())
    assert report["load_totals"]["due"] == counts["due"]
