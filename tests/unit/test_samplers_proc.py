from pathlib import Path

import pytest

from soak.samplers import procfs
from soak.samplers.proc import CLOCK_TICKS_PER_S, ProcSampler
from soak.targets.base import Running

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "proc"
SERVER_ROOT = FIXTURES / "pdns-server"
SERVER_PID = 21924
RECURSOR_ROOT = FIXTURES / "pdns-recursor"
RECURSOR_PID = 21977
KIB = 1024


def running(pid: int | None) -> Running:
    return Running("t", "127.0.0.1", {}, pid, None)


def test_status_of_pdns_server_keeps_anon_file_and_shmem_apart() -> None:
    status = procfs.parse_status((SERVER_ROOT / str(SERVER_PID) / "status").read_text())
    assert status.rss_bytes == 63020 * KIB
    assert status.rss_anon_bytes == 46492 * KIB
    assert status.rss_file_bytes == 16528 * KIB
    assert status.rss_shmem_bytes == 0
    assert status.rss_anon_bytes + status.rss_file_bytes + status.rss_shmem_bytes == (
        status.rss_bytes
    )
    assert status.threads == 7


def test_stat_io_limits_smaps_of_pdns_recursor() -> None:
    base = RECURSOR_ROOT / str(RECURSOR_PID)
    stat = procfs.parse_stat((base / "stat").read_text())
    assert (stat.ppid, stat.utime_ticks, stat.stime_ticks) == (21921, 0, 2)
    io = procfs.parse_io((base / "io").read_text())
    assert (io["read_bytes"], io["write_bytes"]) == (7557120, 8192)
    assert procfs.parse_fd_limit((base / "limits").read_text()) == 20000
    smaps = procfs.parse_smaps_rollup((base / "smaps_rollup").read_text())
    assert smaps["Pss"] == 23847 * KIB
    assert smaps["Pss_Anon"] == 10332 * KIB


def test_stat_with_spaces_and_parentheses_in_the_command_name() -> None:
    text = "42 (a (b) c) S 7 42 42 0 -1 0 0 0 0 0 150 50 0 0 20 0 1 0 999 0 0"
    stat = procfs.parse_stat(text)
    assert (stat.ppid, stat.utime_ticks, stat.stime_ticks, stat.starttime_ticks) == (
        7,
        150,
        50,
        999,
    )


def test_unlimited_fd_limit_is_none() -> None:
    text = "Limit Soft Limit Hard Limit Units\nMax open files unlimited unlimited files\n"
    assert procfs.parse_fd_limit(text) is None


def test_children_of_walks_the_whole_tree() -> None:
    ppids = {1: 0, 10: 1, 11: 10, 12: 10, 13: 12, 20: 1}
    assert procfs.children_of(ppids, 10) == [10, 11, 12, 13]
    assert procfs.children_of(ppids, 99) == [99]


def test_cpu_cores_over_the_interval() -> None:
    assert procfs.cpu_cores(10.0, 13.0, 100.0, 102.0) == 1.5
    assert procfs.cpu_cores(10.0, 9.0, 100.0, 102.0) == 0.0  # a tree member exited
    assert procfs.cpu_cores(10.0, 13.0, 100.0, 100.0) is None


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
