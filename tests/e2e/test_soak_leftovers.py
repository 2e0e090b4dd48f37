"""A SIGKILLed `soak start --foreground` leaves no server process, and the next start
removes what escaped it (a child in a session of its own), saying so in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.soakrun import (
    processes_under,
    run_soak,
    scenario_in_foreground,
    upstream_rest,
)
from tests.support.procs import cmdlines
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

# dnsmasq in the foreground as the target; before it, the wrapper leaves a process in a
# session of its own (as a daemonizing helper would), its command line naming the run.
SCENARIO = """
name: leftovers
target:
  runtime: process
  name: upstream
  argv: [sh, -c, "setsid -f sh -c 'sleep 300; :' {run_dir}/straggler; exec dnsmasq
         --no-daemon --port={port.dns} --listen-address=127.0.0.1 --bind-interfaces
         --no-resolv --no-hosts --address=/#/192.0.2.1 --user=root
         --pid-file={run_dir}/dnsmasq.pid"]
""" + upstream_rest(50, "5m")


def dnsmasq_of(runs: Path) -> list[int]:
    """The run's dnsmasq: its --pid-file is in the run's directory."""
    found = []
    for pid, raw in cmdlines():
        if raw.startswith(b"dnsmasq\0") and str(runs).encode() in raw:
            found.append(pid)
    return found


def stragglers(runs: Path) -> list[str]:
    return [line for line in processes_under(runs) if "straggler" in line]


def test_a_sigkilled_foreground_run_leaves_nothing(tmp_path: Path) -> None:
    fg, data = scenario_in_foreground(tmp_path, "leftovers", SCENARIO, subprocess.PIPE)
    try:
        runs = data / "runs"
        server = wait_for(lambda: dnsmasq_of(runs), 60.0, "dnsmasq started by the run")
        straggler = wait_for(lambda: stragglers(runs), 30.0, "the straggler started")
        fg.kill()
        fg.wait(10)
        # The server died with the soak process that started it.
        wait_for(lambda: dnsmasq_of(runs) == [], 10.0, f"dnsmasq {server} gone")
        # The process in a session of its own escaped the parent-death signal...
        assert processes_under(runs) == straggler
    finally:
        if fg.poll() is None:
            fg.kill()
    # ... and the next start (another data directory: another user's) removes it.
    again = run_soak(
        "start", str(tmp_path / "leftovers.yaml"), "--foreground", "--duration", "2s",
        "--set", "target.argv=[dnsmasq, --no-daemon, '--port={port.dns}', "
        "--listen-address=127.0.0.1, --bind-interfaces, --no-resolv, '--address=/#/192.0.2.1']",
        "--data-dir", str(tmp_path / "other"),
        "--set", "criteria.not_judged=pass",  # 2 s judge no leak window
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    # The straggler never ends by itself: gone means swept.
    assert processes_under(runs) == []
    said = [ln for ln in again.stderr.splitlines() if "removed what dead runs left" in ln]
    # Any soak start on the machine sweeps: under `pytest -n` another test's start may
    # have swept it first, and then this one has nothing to say.
    assert len(said) <= 1, again.stderr[-2000:]
    assert not said or "upstream of run leftovers-" in said[0], said
