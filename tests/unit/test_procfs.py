"""soak.procfs: the /proc parsers from captured files, the readers on fixture roots."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

import pytest

from soak import hostproc, procfs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "proc"
SERVER_ROOT = FIXTURES / "pdns-server"
SERVER_PID = 21924
RECURSOR_ROOT = FIXTURES / "pdns-recursor"
RECURSOR_PID = 21977
KIB = 1024


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


def test_stat_ppid_and_start_ticks_with_parens_in_comm() -> None:
    text = "4242 (my (odd) srv) S 1 4242 4242 0 -1 4194560 " + " ".join(["0"] * 12) + " 777 0"
    stat = procfs.parse_stat(text)
    assert stat.ppid == 1
    assert stat.starttime_ticks == 777
    assert stat.state == "S" and stat.alive


def test_stat_that_cannot_be_read_is_a_value_error() -> None:
    for text in ("", "42 (srv) S 1 2 3", "no parenthesis at all " + "0 " * 30):
        with pytest.raises(ValueError):
            procfs.parse_stat(text)
    zombie = "9 (z) Z 1 " + " ".join(["0"] * 17) + " 5"
    assert not procfs.parse_stat(zombie).alive


def test_fd_limit_from_limits_file() -> None:
    text = (FIXTURES / "limits-soft-below-hard.txt").read_text()
    assert procfs.parse_fd_limit(text) == 20000  # the soft limit, not the hard one
    assert procfs.parse_fd_limit("Max open files  unlimited  unlimited  files\n") is None


def test_fd_limit_odd_input_is_not_known() -> None:
    assert procfs.parse_fd_limit("") is None
    assert procfs.parse_fd_limit("Max open files\n") is None
    assert procfs.parse_fd_limit("Max open files  lots  lots  files\n") is None


def test_machine_stat_busy_and_total_seconds() -> None:
    cpu = hostproc.parse_machine_stat((SERVER_ROOT / "stat").read_text())
    ticks = [22981, 0, 6006, 312101, 847, 0, 175, 36]
    assert cpu.total_s == pytest.approx(sum(ticks) / procfs.CLOCK_TICKS_PER_S)
    assert cpu.busy_s == pytest.approx((sum(ticks) - 312101 - 847) / procfs.CLOCK_TICKS_PER_S)
    assert hostproc.machine_cpu(SERVER_ROOT) == cpu
    assert hostproc.machine_cpu(RECURSOR_ROOT) is None  # no stat in that root
    with pytest.raises(ValueError):
        hostproc.parse_machine_stat("intr 0\n")


def test_readers_on_the_fixture_roots() -> None:
    assert procfs.start_ticks(SERVER_PID, SERVER_ROOT) == 65055
    assert procfs.start_ticks(4_000_000, SERVER_ROOT) is None
    assert procfs.read_fd_limit(RECURSOR_PID, RECURSOR_ROOT) == 20000
    assert procfs.read_fd_limit(4_000_000, RECURSOR_ROOT) is None
    assert procfs.count_fds(RECURSOR_PID, RECURSOR_ROOT) == 24
    assert procfs.cpu_s(SERVER_PID, SERVER_ROOT) == pytest.approx(5 / procfs.CLOCK_TICKS_PER_S)
    assert procfs.tree_cpu_s(None, SERVER_ROOT) is None
    assert procfs.tree_threads(SERVER_PID, SERVER_ROOT) == 7
    sample = procfs.read_process(RECURSOR_PID, RECURSOR_ROOT)
    assert (sample.fds, sample.fd_limit, sample.read_bytes) == (24, 20000, 7557120)
    assert sample.pss_bytes == 23847 * KIB


def test_pid_alive_checks_identity() -> None:
    assert procfs.pid_alive(SERVER_PID, root=SERVER_ROOT)
    assert procfs.pid_alive(SERVER_PID, 65055, root=SERVER_ROOT)
    assert not procfs.pid_alive(SERVER_PID, 65056, root=SERVER_ROOT)  # the pid was reused
    assert not procfs.pid_alive(4_000_000, root=SERVER_ROOT)


def stat_line(pid: int, ppid: int, state: str = "S") -> str:
    return f"{pid} (p{pid}) {state} {ppid} " + " ".join(["0"] * 17) + f" {pid}\n"


def test_children_and_tree_from_a_proc_root(tmp_path: Path) -> None:
    for pid, ppid in {1: 0, 10: 1, 11: 10, 12: 10, 13: 12, 20: 1}.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(stat_line(pid, ppid))
    (tmp_path / "self").mkdir()  # not a pid: skipped
    assert procfs.children(10, tmp_path) == [11, 12]  # by scanning: no task/children file
    assert procfs.process_tree(10, tmp_path) == [10, 11, 12, 13]
    (tmp_path / "10" / "task" / "10").mkdir(parents=True)
    (tmp_path / "10" / "task" / "10" / "children").write_text("12 11 ")
    assert procfs.children(10, tmp_path) == [12, 11]  # the kernel's list, as it gives it
    (tmp_path / "12" / "stat").write_text(stat_line(12, 10, "Z"))
    assert not procfs.pid_alive(12, root=tmp_path)


def test_meminfo_in_bytes() -> None:
    info = hostproc.read_meminfo(SERVER_ROOT)
    assert info["MemTotal"] == 24683664 * KIB
    assert info["HugePages_Total"] == 0  # a count, not kB
    with pytest.raises(OSError):
        hostproc.read_meminfo(RECURSOR_ROOT)


def test_udp_drops_counts_what_the_kernel_dropped_at_one_port() -> None:
    """The kernel's own count against ours: datagrams sent to a socket that is not read,
    its buffer small, minus those still queued for it, are the ones dropped (loopback
    loses nothing else); the sender's own socket, on another port, counts none."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a few datagrams
        rx.bind(("127.0.0.1", 0))
        port = rx.getsockname()[1]
        before = procfs.udp_drops(os.getpid(), port)
        sent = 200
        for _ in range(sent):
            tx.sendto(b"x" * 64, ("127.0.0.1", port))
        rx.setblocking(False)
        queued = 0
        with contextlib.suppress(BlockingIOError):
            while rx.recv(2048):
                queued += 1
        assert 0 < queued < sent
        assert procfs.udp_drops(os.getpid(), port) - before == sent - queued
        assert procfs.udp_drops(os.getpid(), tx.getsockname()[1]) == 0


def test_udp_drops_refuses_a_file_that_is_not_the_table() -> None:
    with pytest.raises(ValueError):
        procfs.parse_udp_drops("Tcp: 1 2 3\n", 53)


def test_snmp_udp_counts_every_sockets_drops_together() -> None:
    """The namespace's RcvbufErrors rise by at least what one socket's own count rose."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        rx.bind(("127.0.0.1", 0))
        port = rx.getsockname()[1]
        before, own_before = hostproc.read_snmp_udp(), procfs.udp_drops(os.getpid(), port)
        for _ in range(200):
            tx.sendto(b"x" * 64, ("127.0.0.1", port))
        own = procfs.udp_drops(os.getpid(), port) - own_before
        assert own > 0
        assert hostproc.read_snmp_udp()["RcvbufErrors"] - before["RcvbufErrors"] >= own
    with pytest.raises(ValueError):
        hostproc.parse_snmp_udp("Ip: 1 2\nIp: 3 4\n")
