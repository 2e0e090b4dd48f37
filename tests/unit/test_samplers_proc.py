from pathlib import Path

import pytest

from soak.procfs import CLOCK_TICKS_PER_S
from soak.samplers.proc import ProcSampler
from soak.targets.base import Running

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "proc"
SERVER_ROOT = FIXTURES / "pdns-server"
SERVER_PID = 21924
KIB = 1024


def running(pid: int | None) -> Running:
    return Running("t", "127.0.0.1", {}, pid, None)


def test_proc_sampler_on_the_pdns_server_fixture() -> None:
    clock = iter([100.0, 160.0])
    sampler = ProcSampler(
        lambda: running(SERVER_PID), proc_root=SERVER_ROOT, clock=lambda: next(clock)
    )
    (point,) = sampler.sample(1_000)
    assert point.measurement == "process" and point.time_ns == 1_000
    f = point.fields
    assert f["rss_bytes"] == 63020 * KIB
    assert f["rss_anon_bytes"] == 46492 * KIB
    assert f["pss_bytes"] > 0
    assert f["fds"] == 12
    assert f["fd_limit"] > 0
    assert f["threads"] == 7
    assert f["cpu_user_s"] == pytest.approx(1 / CLOCK_TICKS_PER_S)
    assert f["cpu_system_s"] == pytest.approx(4 / CLOCK_TICKS_PER_S)
    assert "read_bytes" in f and "write_bytes" in f
    assert "cpu_cores" not in f  # one sample is no interval
    (second,) = sampler.sample(2_000)
    assert second.fields["cpu_cores"] == 0.0  # the fixture's CPU time did not move


def test_proc_sampler_without_pid_or_target_gives_nothing() -> None:
    assert ProcSampler(lambda: None, proc_root=SERVER_ROOT).sample(1) == []
    assert ProcSampler(lambda: running(None), proc_root=SERVER_ROOT).sample(1) == []


def test_proc_sampler_of_a_vanished_process_raises() -> None:
    with pytest.raises(OSError):
        ProcSampler(lambda: running(4_000_000), proc_root=SERVER_ROOT).sample(1)
