"""`soak start --foreground` with `load.replay`: a capture replayed against unbound is the
run's load, counted in the same ledger as the workers' load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.load.replay_config import ReplayConfig
from soak.load.replay_plan import Plan
from soak.traffic.capture import TCP, UDP, Capture, Query, write_capture
from tests.e2e.soakrun import QUICK, soak_passes
from tests.support.ledger import assert_figures_agree
from tests.support.servers import unbound_process_target

pytestmark = pytest.mark.e2e

RUN_S = 20


def wire_name(name: str) -> bytes:
    return b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"


def small_capture() -> Capture:
    """Three clients (one over TCP), six queries in 0.9 s, every name one that the
    target answers from its own zone."""
    www, mail = wire_name("www.example.test"), wire_name("mail.example.test")
    queries = [
        Query(0, 0, 0, 0x0100, 1, UDP, www),
        Query(150_000_000, 1, 0, 0x0100, 1, UDP, mail),
        Query(300_000_000, 2, 0, 0x0100, 1, TCP, www),
        Query(450_000_000, 0, 0, 0x0100, 28, UDP, www),
        Query(600_000_000, 2, 0, 0x0100, 1, TCP, mail),
        Query(900_000_000, 1, 0, 0x0100, 1, UDP, www),
    ]
    return Capture("test", ["10.0.0.1", "10.0.0.2", "10.0.0.3"], queries)


def test_soak_run_replays_a_capture(tmp_path: Path) -> None:
    capture = small_capture()
    write_capture(tmp_path / "c.soakcap", capture)
    scenario = {
        "name": "replay-soak",
        "target": unbound_process_target(),
        "phases": [
            {"name": "warmup", "duration_s": "4s", "warmup": True},
            {"name": "steady", "duration_s": f"{RUN_S - 4}s"},
        ],
        "load": {"timeout_s": "1s", "replay": {"file": "c.soakcap", "speed": "2x"}},
        # 20 s of unbound filling its caches is no leak verdict; the cores are shared.
        "criteria": {"leaks_ok": False, "p99_ms_max": {"all": 1000}},
    }
    path = tmp_path / "replay.yaml"
    path.write_text(json.dumps(scenario))
    data = tmp_path / "data"
    status = soak_passes(path, data, f"{RUN_S}s", *QUICK)
    # Every figure the run reports agrees with its ledger, to the query.
    ledger = assert_figures_agree(data, status["id"])
    # The run's windows hold the capture's queries, loop after loop: all that were due
    # before the run's end, but for the loop in progress when the load stopped.
    cfg = ReplayConfig(file=tmp_path / "c.soakcap", speed=2.0)
    planned = sum(1 for _ in Plan(cfg, capture, 0).queries(RUN_S * 1_000_000_000))
    per_loop = len(capture.queries)
    assert planned - per_loop <= ledger["due"] <= planned, (planned, ledger)
    assert ledger["due"] == ledger["sent"] == ledger["completed"], ledger
    assert status["load_totals"]["sent"] == ledger["sent"]
