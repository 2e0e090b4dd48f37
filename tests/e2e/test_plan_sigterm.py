"""SIGTERM during each kind of plan, as a CI system cancels a job: the real command
against real servers, the signal once the plan has started its parts; every process it
started is gone, and it exits 143 with one line (soak.plans.engine, soak.interrupt)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.agents import agents_scenario
from tests.support.procs import children, cmdline
from tests.support.servers import (
    ServerProc,
    bench_load,
    module_unbound,
    unbound_process_target,
)
from tests.support.waiting import wait_for
from tests.unit.test_traffic import good_pcap

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SOAK = str(Path(sys.executable).parent / "soak")

server = module_unbound(threads=1)


def descendants(pid: int) -> Iterator[int]:
    for child in children(pid):
        yield child
        yield from descendants(child)


def started(proc: subprocess.Popen[str], marker: str) -> list[int]:
    """The soak process's descendants whose command line holds `marker` (none: [])."""
    return [pid for pid in descendants(proc.pid) if marker in cmdline(pid)]


def sigterm_once_started(
    argv: list[str], markers: tuple[str, ...], cwd: Path = REPO
) -> tuple[subprocess.Popen[str], list[int], str]:
    """The command started, SIGTERM once a process with each marker runs under it; the
    process, those processes' pids and its standard error."""
    proc = subprocess.Popen(
        [SOAK, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    )
    try:
        pids = [
            pid
            for marker in markers
            for pid in wait_for(lambda m=marker: started(proc, m), 60, f"{marker} runs", 0.1)
        ]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, pids, err


def all_gone(pids: list[int]) -> None:
    wait_for(lambda: not any(cmdline(pid) for pid in pids), 30, f"{pids} are gone", 0.1)


def test_load_in_process_stops_its_workers(server: ServerProc, tmp_path: Path) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("www.example.test A\n")
    proc, workers, err = sigterm_once_started(
        ["load", "--server", f"127.0.0.1:{server.port}", "--queries", str(queries),
         "--rate", "200", "--duration", "120", "--workers", "2"],
        ("soak.load.child",),
    )  # fmt: skip
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == ["soak: stopped by SIGTERM"], err
    assert len(workers) == 2
    all_gone(workers)


def test_load_on_local_agents_removes_them(server: ServerProc, tmp_path: Path) -> None:
    load = {
        "rate_qps": 100, "duration_s": 120, "agents": {"count": 2, "engine": "local"},
        "mix": [{"name": "q", "queries": ["www.example.test A"]}],
    }  # fmt: skip
    path = agents_scenario(tmp_path, "agents-sigterm", server.port, load)
    proc, agents, err = sigterm_once_started(
        ["load", "--server", f"127.0.0.1:{server.port}", "--scenario", str(path)], (" agent ",)
    )
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "soak: stopped by SIGTERM; the agents were removed"
    assert agents
    all_gone(agents)


def test_replay_stops_and_exits_143(server: ServerProc, tmp_path: Path) -> None:
    capture = tmp_path / "t.pcap"
    capture.write_bytes(good_pcap())
    proc = subprocess.Popen(
        [SOAK, "load", "--server", f"127.0.0.1:{server.port}", "--replay", str(capture),
         "--duration", "120", "--speed", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # The replay's sockets are its process's: one UDP socket open is the replay under way.
    wait_for(lambda: udp_sockets(proc.pid), 60, "the replay has a socket", 0.1)
    proc.send_signal(signal.SIGTERM)
    players = children_of(proc.pid)  # the capture mixes UDP and TCP: a process each
    assert len(players) == 2, players
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "soak: stopped by SIGTERM", err
    all_gone(players)


def udp_sockets(pid: int) -> int:
    """How many sockets the process and its children hold (a replay opens its clients'
    on start; a capture that mixes UDP and TCP plays in child processes, one a transport)."""
    held = 0
    for each in (pid, *children_of(pid)):
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{each}/fd").iterdir()]
        except OSError:
            continue
        held += sum(link.startswith("socket:") for link in links)
    return held


def children_of(pid: int) -> list[int]:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def test_bench_stops_its_target(tmp_path: Path) -> None:
    scenario = {
        "name": "bench-sigterm",
        "target": unbound_process_target(1),
        "load": bench_load(1),
        "phases": [{"name": "p", "duration_s": 10}],
        "bench": {"runs": 3, "duration_s": 60, "throwaway_s": 60, "knee": {"enabled": False}},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    proc, pids, err = sigterm_once_started(
        ["bench", str(path), "--data-dir", str(tmp_path / "data")], ("unbound", "soak.load.child")
    )
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "soak: stopped by SIGTERM; its targets were stopped"
    all_gone(pids)


def test_upgrade_stops_its_version_and_removes_its_run(tmp_path: Path) -> None:
    target = unbound_process_target(1)
    plan = {
        "name": "sigterm-me",
        "old": target,
        "new": target,
        "populate": [{"kind": "command", "argv": ["sleep", "120"]}],
        "checks": [{"name": "www A", "kind": "dig", "qname": "www.example.test"}],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    work = tmp_path / "work"
    work.mkdir()
    junit = tmp_path / "junit.xml"
    proc, pids, err = sigterm_once_started(
        ["upgrade", str(path), "--work-dir", str(work), "--junit", str(junit)],
        ("unbound", "sleep 120"),
    )
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM" in err.strip().splitlines()[-1], err
    all_gone(pids)
    assert list(work.iterdir()) == []  # the run directory removed
    assert "interrupted" in junit.read_text()
