"""A run's recording of its target's dnstap (soak.runs.capture_dnstap) when the real writer
dies: a killed unbound is a `capture_writer_lost` event, the next unbound connects to
the same socket, and every query either of them delivered is in the file."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import dns.message
import dns.query
import pytest

from soak.runs.capture_dnstap import RunCapture
from soak.traffic.capture_config import CaptureConfig
from soak.traffic.capture_file import read_capture
from tests.support.traffic import unbound_dnstap
from tests.support.waiting import wait_for
from tests.unit.test_runs_capture import Told

pytestmark = pytest.mark.integration

# More than unbound's 32 queued messages, so that its dnstap thread is woken at once.
ASKED = 40


def ask(port: int, count: int) -> None:
    for i in range(count):
        q = dns.message.make_query("www.example.test" if i % 2 else "mail.example.test", "A")
        dns.query.udp(q, "127.0.0.1", port=port, timeout=2)


def subdir(tmp: Path, name: str) -> Path:
    path = tmp / name
    path.mkdir()
    return path


def test_a_killed_writer_is_told_and_loses_nothing_delivered(tmp_path: Path) -> None:
    cap = RunCapture(CaptureConfig(clients_by_port=True), tmp_path / "tap.sock", tmp_path)
    cap.open()
    told = Told(cap)
    try:
        with unbound_dnstap(subdir(tmp_path, "a"), cap.socket) as a:
            cap.begin(time.time_ns())  # after its readiness probe: that one is left out
            ask(a.port, ASKED)
            wait_for(lambda: len(cap.recording) == ASKED + 1, 20, "the queries recorded", 0.1)
            os.killpg(a.proc.pid, signal.SIGKILL)
            a.proc.wait(10)
            (lost,) = told.until("capture_writer_lost")
            assert f"{ASKED + 1} queries kept" in lost.message
        with unbound_dnstap(subdir(tmp_path, "b"), cap.socket) as b:  # its probe counts
            # its writer connects on its own time, after its readiness on a busy machine
            assert len(told.until("capture_connected", count=2)) == 2
            ask(b.port, ASKED)
            want = 2 * ASKED + 2
            wait_for(lambda: len(cap.recording) == want, 20, "the second server's queries", 0.1)
        told.until("capture_writer_stopped")  # the second one stopped as asked
    finally:
        faults = cap.finish()
    (written,) = [f for f in faults if f.kind == "capture_written"]
    assert "1 before the run's origin" in written.message
    capture = read_capture(cap.out)
    assert len(capture.queries) == 2 * ASKED + 1
