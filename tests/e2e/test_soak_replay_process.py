"""A soak run's replay plays in a process of its own, not in the soak's interpreter
(its timing apart from the samplers and the leak passes); that process killed mid-run
is a fault recorded as events, a fresh one plays on, and the ledger still counts every
planned query once."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from soak.clock import NS_PER_S
from soak.load.realtime import scheduling_of
from soak.load.replay import Plan
from soak.results.reportinput import local_witness_lines
from soak.runs.layout import DataDir
from soak.traffic.capture_file import UDP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.e2e.soakrun import QUICK
from tests.support.audit_runs import result_of
from tests.support.ledger import assert_figures_agree
from tests.support.procs import children, cmdline
from tests.support.soaks import RESTART_CRITERIA, last_json, replay_scenario, started
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

RUN_S = 20
CHILD = "soak.load.replay._child"
WWW = b"\x03www\x07example\x04test\x00"
WAIT_S = 120.0  # for a state, on a busy machine
ROOT = os.geteuid() == 0  # CI's: SCHED_FIFO is granted


def ticking_capture() -> Capture:
    """Two clients, a query every 100 ms between them."""
    queries = [Query(t * 100_000_000, t % 2, 0, 0x0100, 1, UDP, WWW) for t in range(10)]
    return Capture("test", ["10.0.0.1", "10.0.0.2"], queries)


def replay_children(parent: int) -> list[int]:
    """The replay processes whose parent is `parent`."""
    return [pid for pid in children(parent) if CHILD in cmdline(pid)]


def playing(pid: int) -> bool:
    """The replay's process has opened its clients' sockets: it is sending."""
    try:
        links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:
        return False
    return any(link.startswith("socket:") for link in links)


def test_the_replay_plays_in_its_own_process_and_survives_its_death(tmp_path: Path) -> None:
    capture = ticking_capture()
    phases = [{"name": "steady", "duration_s": f"{RUN_S}s"}]
    path = replay_scenario(tmp_path, capture, "replay-process", phases, RESTART_CRITERIA)
    data = tmp_path / "data"
    soak = started(path, data, "--duration", f"{RUN_S}s", *QUICK, as_json=True)
    try:
        runs = "the replay's process runs"
        children = wait_for(lambda: replay_children(soak.pid), WAIT_S, runs, 0.1)
        assert len(children) == 1 and children[0] != soak.pid, children
        wait_for(lambda: playing(children[0]), WAIT_S, "the replay sends", 0.1)
        if ROOT:  # the replay's process in the real-time class (taken before it plays)
            assert scheduling_of(children[0]) == "SCHED_FIFO 1"
            assert scheduling_of(soak.pid) == "SCHED_OTHER"  # the run's own is not
        os.kill(children[0], signal.SIGKILL)
        fresh = wait_for(
            lambda: [p for p in replay_children(soak.pid) if p != children[0]],
            WAIT_S,
            "a fresh replay process runs",
            0.1,
        )
        assert len(fresh) == 1, fresh
        out, err = soak.communicate(timeout=WAIT_S + RUN_S)
    finally:
        if soak.poll() is None:
            soak.kill()
            soak.wait()
    assert soak.returncode in (0, 1), err[-3000:]
    status: dict[str, Any] = last_json(out)
    events = [(e["kind"], e["message"]) for e in status["events"]]
    failed = [m for k, m in events if k == "load_failed"]
    restarted = [m for k, m in events if k == "load_restarted"]
    assert failed and "the replay's process ended (exit status -9)" in failed[0], events
    assert restarted and "a fresh one from second" in restarted[0], events
    # Every planned query is counted once: those of the killed process's open seconds,
    # and of the seconds the fresh one took to start, due and skipped; none twice.
    ledger = assert_figures_agree(data, status["id"], kept_up=False)
    plan = Plan(ReplayConfig(file=tmp_path / "c.soakcap"), capture, 0)
    planned = sum(1 for _ in plan.queries(RUN_S * NS_PER_S))
    assert planned - len(capture.queries) <= ledger["due"] <= planned, (planned, ledger)
    assert ledger["due"] == ledger["sent"] + ledger["skipped"], ledger
    assert ledger["skipped"] > 0 and ledger["sent"] > 0, ledger
    # The killed process's socket counts died with it: the audit says why it has none.
    totals = result_of(data, status["id"])[1]["load_totals"]
    assert "engine_counters" not in totals, totals
    if ROOT:  # granted to the fresh process too; a refusal would be an event
        assert totals["replay"]["scheduling"] == "SCHED_FIFO 1", totals
        assert "replay_not_realtime" not in [k for k, _ in events], events
    else:
        assert "replay_not_realtime" in [k for k, _ in events], events
    lost = "the replay's process died 1 time(s) before telling its socket counts"
    assert totals["engine_counters_lost"] == lost, totals
    said = f"not witnessed by the engine's socket counters: {lost}"
    assert local_witness_lines(DataDir(data), status["id"])[0] == said  # `soak audit`'s line
    # The run's end took its replay process with it.
    assert not [p for p in fresh if Path(f"/proc/{p}").exists()], fresh
