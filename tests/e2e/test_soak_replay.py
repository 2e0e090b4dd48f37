"""`soak start --foreground` with `load.replay`: a capture replayed against unbound is the
run's load, counted in the same ledger as the workers' load."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import dns.rdatatype
import pytest

from soak.clock import NS_PER_S
from soak.load.replay_config import ReplayConfig
from soak.load.replay_plan import Plan
from soak.sinks.sqlite import SqliteStore
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
    plan = Plan(ReplayConfig(file=tmp_path / "c.soakcap", speed=2.0), capture, 0)
    planned = collections.Counter(plan.classes.names[q.cls] for q in plan.queries(RUN_S * NS_PER_S))
    per_loop = collections.Counter(dns.rdatatype.to_text(q.qtype) for q in capture.queries)
    assert set(planned) == {"A", "AAAA"}  # a class per query type
    store = SqliteStore(data / "points.db")
    try:
        for cls, due in planned.items():
            counts = {
                field: class_sum(store, status["id"], field, cls)
                for field in ("due", "sent", "completed")
            }
            assert due - per_loop[cls] <= counts["due"] <= due, (cls, due, counts)
            assert counts["due"] == counts["sent"] == counts["completed"], (cls, counts)
    finally:
        store.close()
    total = sum(planned.values())
    assert total - len(capture.queries) <= ledger["due"] <= total, (total, ledger)
    assert ledger["due"] == ledger["sent"] == ledger["completed"], ledger
    assert status["load_totals"]["sent"] == ledger["sent"]


def class_sum(store: SqliteStore, run_id: str, field: str, cls: str) -> float:
    """A `load` field summed over the run's windows of one class."""
    found = store.series(run_id, "load", field, {"class": cls})
    return sum(float(v) for _, values in found for _, v in values)
