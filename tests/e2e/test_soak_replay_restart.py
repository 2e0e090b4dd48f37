"""A soak run whose replay raises mid-run: the replay is restarted for the rest of the
run, and the run's ledger still adds up, every planned query counted once.

The fault is put in the soak process by tests/support/faults (its 6th replayed query
raises): the last server fault that made a replay raise, a DoH server's stream limit
(TooManyStreamsError), now opens another connection
(tests/integration/test_replay.py), and the run must still survive whatever else may."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from soak.clock import NS_PER_S
from soak.load.replay import Plan
from soak.traffic.capture_file import UDP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.e2e.soakrun import QUICK, last_json, run_soak
from tests.support.audit_runs import result_of
from tests.support.ledger import assert_figures_agree
from tests.support.soaks import RESTART_CRITERIA, replay_scenario

pytestmark = pytest.mark.e2e

RUN_S = 16
FAULTS = Path(__file__).parents[1] / "support" / "faults"
WWW = b"\x03www\x07example\x04test\x00"


def pairs_capture() -> Capture:
    """One client asking two queries at once, twice, 500 ms apart."""
    queries = [Query(t, 0, 0, 0x0100, 1, UDP, WWW) for t in (0, 0, 500_000_000, 500_000_000)]
    return Capture("test", ["10.0.0.1"], queries)


def test_a_replay_that_raises_is_restarted_and_the_ledger_adds_up(tmp_path: Path) -> None:
    capture = pairs_capture()
    phases = [{"name": "steady", "duration_s": f"{RUN_S}s"}]
    path = replay_scenario(tmp_path, capture, "replay-restart", phases, RESTART_CRITERIA)
    data = tmp_path / "data"
    proc = run_soak(
        "start", str(path), "--foreground", "--duration", f"{RUN_S}s", *QUICK,
        "--data-dir", str(data), "--json",
        env={"PYTHONPATH": str(FAULTS), "SOAK_TEST_REPLAY_RAISE_AT": "6"},
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    status: dict[str, Any] = last_json(proc.stdout)
    assert status["status"] in ("passed", "failed"), proc.stderr[-3000:]
    events = [(e["kind"], e["message"]) for e in status["events"]]
    failed = [m for k, m in events if k == "load_failed"]
    restarted = [m for k, m in events if k == "load_restarted"]
    assert failed and "injected fault" in failed[0], events
    assert restarted and "a fresh one from second" in restarted[0], events
    # each restart follows the failure it answers, in the workers' event kinds
    kinds = [k for k, _ in events if k in ("load_failed", "load_restarted")]
    assert kinds[:2] == ["load_failed", "load_restarted"], kinds
    # The run's ledger adds up: every window keeps its invariants, the report and the
    # result agree with the stored windows (the restarts' skipped queries included) ...
    ledger = assert_figures_agree(data, status["id"], kept_up=False)
    assert status["load_totals"]["load_restarts"] == len(restarted)
    assert ledger["skipped"] > 0  # the failed replays' queries they never sent
    # Each failed play told its socket counts once wound up (its process lives on): the
    # audit held the ledger to them, summed over the plays.
    counters = result_of(data, status["id"])[1]["load_totals"]["engine_counters"]
    assert counters["socket_sent"] + counters["send_failed"] == ledger["sent"], counters
    # ... and every query planned before the run's end is counted once: none lost from
    # the accounting between a failure and its restart, none counted twice (the one
    # loop in progress as the load stopped may be cut short).
    plan = Plan(ReplayConfig(file=tmp_path / "c.soakcap"), capture, 0)
    planned = sum(1 for _ in plan.queries(RUN_S * NS_PER_S))
    assert planned - len(capture.queries) <= ledger["due"] <= planned, (planned, ledger)
    assert ledger["due"] == ledger["sent"] + ledger["skipped"], ledger
    # The live status lines name the replay's planned rate (4 queries a 2/3-s loop) as
    # the asked one, not the load's rate_qps that a replay does not use.
    asked = re.findall(r"rate [\d,]+ of ([\d,.]+) q/s", proc.stderr)
    assert asked and set(asked) == {"6"}, proc.stderr[-2000:]
