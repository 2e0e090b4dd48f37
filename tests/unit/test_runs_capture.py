"""A run's recording of its target's dnstap (soak.runs.capture_dnstap), fed by a Frame Streams
writer on the real socket: what the writer does is told as events, and what was kept
is written whatever it did."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from soak.clock import NS_PER_S
from soak.config import Scenario, scenario_from_data
from soak.errors import InputError
from soak.points import Fault
from soak.runs.capture_dnstap import RunCapture, resolve_from_run, written_capture
from soak.runs.layout import DataDir
from soak.traffic import dnstap
from soak.traffic.capture_config import CaptureConfig
from soak.traffic.capture_file import read_capture
from tests.support.waiting import wait_for
from tests.unit.test_traffic import pb, query

LOCAL = b"\x7f\0\0\x01"


class Writer:
    """A dnstap writer as a server is: READY, (ACCEPT), START, data frames, then STOP
    (FINISH) or just gone."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.sock.sendall(dnstap.control_frame(dnstap.CTRL_READY))
        self.sock.settimeout(5)
        assert self.sock.recv(4096)  # ACCEPT
        self.sock.sendall(dnstap.control_frame(dnstap.CTRL_START))

    def queries(self, *times_s: float, port: int = 4000) -> None:
        for i, t in enumerate(times_s):
            frame = _timed(t, port, i)
            self.sock.sendall(len(frame).to_bytes(4, "big") + frame)

    def stop(self) -> None:
        self.sock.sendall(dnstap.control_frame(dnstap.CTRL_STOP, None))
        assert self.sock.recv(4096)  # FINISH
        self.sock.close()

    def die(self) -> None:
        self.sock.close()


def _timed(t_s: float, port: int, i: int) -> bytes:
    """A client query's dnstap frame, timed at `t_s` (seconds in field 8, ns in 9)."""
    ns = int(t_s * NS_PER_S)
    m = pb([(1, 5), (2, 1), (3, 1), (4, LOCAL), (6, port), (8, ns // NS_PER_S)])
    m += pb([(9, ns % NS_PER_S), (10, query(f"q{i}.test"))])
    return pb([(1, b"ns1"), (14, m), (15, 1)])


@pytest.fixture
def now_s() -> float:
    return time.time()


def recording(tmp_path: Path, **cfg: object) -> RunCapture:
    cap = RunCapture(CaptureConfig.model_validate(cfg), tmp_path / "tap.sock", tmp_path)
    cap.open()
    return cap


def kinds(faults: list[Fault]) -> list[str]:
    return [f.kind for f in faults]


def finished(cap: RunCapture) -> Fault:
    """The recording finished: its `capture_written` event."""
    (written,) = [f for f in cap.finish(drain_s=0.0) if f.kind == "capture_written"]
    return written


class Told:
    """Every fault a recording's check() has told so far."""

    def __init__(self, cap: RunCapture) -> None:
        self.cap = cap
        self.faults: list[Fault] = []

    def until(self, kind: str, count: int = 1) -> list[Fault]:
        """Checked until `count` of `kind` have been told; those of that kind."""

        def check() -> list[Fault]:
            self.faults += self.cap.check(time.time_ns())
            found = [f for f in self.faults if f.kind == kind]
            return found if len(found) >= count else []

        found: list[Fault] = wait_for(check, 10, f"{count} {kind} event(s)", 0.05)
        return found


def test_a_writer_that_dies_loses_nothing_kept(tmp_path: Path, now_s: float) -> None:
    cap = recording(tmp_path)
    try:
        cap.begin(int((now_s - 5) * NS_PER_S))
        w = Writer(cap.socket)
        w.queries(now_s - 6, now_s - 4, now_s - 3, now_s - 2)  # the first before the origin
        told = Told(cap)
        told.until("capture_connected")
        wait_for(lambda: len(cap.recording) == 4, 10, "four queries read", 0.05)
        w.die()
        (lost,) = told.until("capture_writer_lost")
        assert "4 queries kept" in lost.message
    finally:
        written = finished(cap)
    assert "1 before the run's origin" in written.message
    assert cap.written is not None and cap.written["queries"] == 3
    assert len(read_capture(cap.out).queries) == 3
    assert not cap.socket.exists()  # the listener's socket removed


def test_a_stream_closed_properly_and_a_full_capture(tmp_path: Path, now_s: float) -> None:
    cap = recording(tmp_path, max_queries=2)
    try:
        cap.begin(int((now_s - 5) * NS_PER_S))
        w = Writer(cap.socket)
        w.queries(now_s - 4, now_s - 3, now_s - 2)
        w.stop()
        told = Told(cap)
        told.until("capture_writer_stopped")
        (full,) = told.until("capture_full")
        assert "2 queries kept (capture.max_queries)" in full.message
    finally:
        written = finished(cap)
    assert "1 over capture.max_queries" in written.message
    assert len(read_capture(cap.out).queries) == 2


def test_quiet_then_frames_again(tmp_path: Path, now_s: float) -> None:
    cap = recording(tmp_path, quiet_s=0.3)
    try:
        cap.begin(time.time_ns())
        told = Told(cap)
        (quiet,) = told.until("capture_quiet")
        assert "no writer connected" in quiet.message
        w = Writer(cap.socket)
        w.queries(time.time())
        told.until("capture_resumed")
        w.stop()
    finally:
        cap.finish(drain_s=0.0)
    assert len(read_capture(cap.out).queries) == 1


def test_the_span_is_written_at_its_end(tmp_path: Path, now_s: float) -> None:
    """`duration_s`: the file is written once the span is over (and settled), not at the
    run's end; later queries are counted, not kept."""
    cap = recording(tmp_path, duration_s=1)
    try:
        cap.begin(int((now_s - 10) * NS_PER_S))
        w = Writer(cap.socket)
        w.queries(now_s - 9.8, now_s - 9.5, now_s - 5)  # the last after the span's end
        wait_for(lambda: cap.recording.after_end == 1, 10, "the late query counted", 0.05)
        (written,) = Told(cap).until("capture_written")
        assert "1 after the capture's span" in written.message
        assert len(read_capture(cap.out).queries) == 2
        w.queries(time.time())
        assert cap.check(time.time_ns()) == []  # written once; nothing more is told
        w.stop()
    finally:
        assert cap.finish(drain_s=0.0) == []
    assert len(read_capture(cap.out).queries) == 2


def test_nothing_recorded_is_said_and_no_file_is_written(tmp_path: Path) -> None:
    cap = recording(tmp_path)
    cap.begin(time.time_ns())
    faults = cap.finish(drain_s=0.0)
    assert kinds(faults) == ["capture_empty"]
    assert not cap.out.exists()


def replaying(run_id: str, tmp_path: Path) -> Scenario:
    data = {
        "name": "next",
        "target": {"runtime": "process", "argv": ["sleep", "60"]},
        "load": {"replay": {"from_run": run_id}},
        "phases": [{"name": "steady", "duration_s": "10s"}],
    }
    return scenario_from_data(data, "s.yaml", tmp_path)


def test_from_run_finds_that_runs_capture(tmp_path: Path, now_s: float) -> None:
    data = DataDir(tmp_path / "data")
    run_dir = data.run_dir("cap-1")
    run_dir.mkdir(parents=True)
    with pytest.raises(InputError, match="cap-1: has no capture"):
        resolve_from_run(replaying("cap-1", tmp_path), data)
    with pytest.raises(InputError, match=f"other-1: no such run in {data.root}"):
        resolve_from_run(replaying("other-1", tmp_path), data)
    cap = recording(run_dir)  # a run's recording writes where from_run looks
    try:
        cap.begin(int((now_s - 5) * NS_PER_S))
        w = Writer(cap.socket)
        w.queries(now_s - 4, now_s - 3)
        w.stop()
        Told(cap).until("capture_writer_stopped")
    finally:
        finished(cap)
    found = resolve_from_run(replaying("cap-1", tmp_path), data)
    assert found.load is not None and found.load.replay is not None
    assert found.load.replay.file == cap.out and found.load.replay.from_run is None
    assert found.base_dir == tmp_path
    # What a resumed run's result says of the file written before (no recording then, so
    # no count of what the server wrote: the audit's capture witness is the recording's).
    recorded = {k: v for k, v in (cap.written or {}).items() if k != "counted"}
    assert written_capture(run_dir) == {**recorded, "file": str(cap.out)}
    assert written_capture(tmp_path) is None
