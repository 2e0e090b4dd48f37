"""A pcap capture's tcpdump after its soak process was SIGKILLed: a foreground run's
dies with it; a service run's is found by its mark and stopped by the next sweep.
Real tcpdump on loopback (as root, as CI runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from soak.procfs import pid_alive
from soak.runs.capture_pcap import MARK_NAME
from soak.runs.leftovers import sweep_leftovers
from soak.targets.tree import pids_of
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs CAP_NET_RAW: run as root"),
]

REPO = Path(__file__).resolve().parents[2]

# The soak side of a run that records with tcpdump, then waits to be killed.
OWNER = """
import sys, time
from pathlib import Path
from soak.runs.capture_pcap import PcapCapture
from soak.traffic.capture_config import CaptureConfig

run_dir, run_id, dies = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
capture = PcapCapture(CaptureConfig(source="pcap"), run_dir, run_id, dies_with_owner=dies)
print(capture.attach("127.0.0.1", 9), flush=True)
time.sleep(300)
"""


def owner_killed_while_recording(tmp_path: Path, run_id: str, dies_with_owner: bool) -> int:
    """The owner started, tcpdump listening, the owner SIGKILLed; tcpdump's pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path), run_id, "1" if dies_with_owner else "0"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("capture: tcpdump on lo to 127.0.0.1:9"), line
        pids = pids_of(run_id, MARK_NAME)
        assert len(pids) == 1, pids
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return pids[0]


def test_a_foreground_runs_tcpdump_dies_with_its_soak(tmp_path: Path) -> None:
    run_id = f"t-pcap-{uuid.uuid4().hex[:8]}"
    pid = owner_killed_while_recording(tmp_path, run_id, dies_with_owner=True)
    wait_for(lambda: not pid_alive(pid), 10, "tcpdump gone with its owner", 0.05)
    assert pids_of(run_id, MARK_NAME) == []


def test_a_service_runs_tcpdump_is_swept_by_the_next_command(tmp_path: Path) -> None:
    run_id = f"t-pcap-{uuid.uuid4().hex[:8]}"
    pid = owner_killed_while_recording(tmp_path, run_id, dies_with_owner=False)
    try:
        assert pid_alive(pid)  # nothing else stops it: it records until its packet bound
        swept = sweep_leftovers()
        assert swept.processes.get((MARK_NAME, run_id)) == [pid], swept
        assert f"tcpdump (capture) of run {run_id} (pid {pid})" in (swept.line() or "")
        assert not pid_alive(pid)
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
