"""The load engine under the service's supervision: a worker killed mid-run is replaced
and the run's totals keep what the dead one had sent. Against a real unbound."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from soak.load.generator import LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.supervised import SupervisedLoad
from tests.support.procs import children, cmdline
from tests.support.servers import unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def test_dead_worker_is_replaced_and_totals_add_up(tmp_path: Path) -> None:
    cfg = LoadConfig.model_validate(
        {"rate_qps": 200, "mix": [{"name": "www", "queries": ["www.example.test A"]}]}
    )
    with unbound(tmp_path) as server:
        load = SupervisedLoad(LoadRunner(cfg, ("127.0.0.1", server.port), base_dir=tmp_path))
        load.start(200, 60)
        try:
            assert load.supervise(60) is None  # alive: nothing to do
            # a window counts once closed: its last query answered or timed out
            before = wait_for(lambda: load.totals()["sent"], 30.0, "a closed window")
            first = load.runner
            workers = load_workers()
            assert len(workers) == 1
            os.kill(workers[0], signal.SIGKILL)
            deadline = time.monotonic() + 30
            while first.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            why = load.supervise(55)
            assert why is not None and load.restarts == 1
            assert load.runner is not first
            sent_after = 0  # the new engine sends (wait for it, however loaded the machine)
            deadline = time.monotonic() + 30
            while sent_after == 0 and time.monotonic() < deadline:
                time.sleep(0.5)
                sent_after += load.take_window().get("all", {}).get("sent", 0)
            assert sent_after > 0
            totals = load.totals()
            assert totals["sent"] > before  # the dead engine's queries are still counted
            assert totals["load_restarts"] == 1
        finally:
            load.stop()


def load_workers() -> list[int]:
    """PIDs of this process's children that are load workers."""
    return [pid for pid in children(os.getpid()) if "soak.load" in cmdline(pid)]
