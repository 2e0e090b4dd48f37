"""`soak load` as a user runs it: exit codes, one-line errors, the summary and --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ServerProc, free_port, module_unbound

pytestmark = pytest.mark.e2e

SOAK = str(Path(sys.executable).parent / "soak")


def soak_load(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SOAK, "load", *args], capture_output=True, text=True, timeout=timeout_s)


server = module_unbound(threads=1)


@pytest.fixture
def qfile(tmp_path: Path) -> Path:
    path = tmp_path / "q.txt"
    path.write_text("# local names\nwww.example.test A\nmail.example.test\nwww.example.test AAAA\n")
    return path


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("soak: ") and text in lines[0], proc.stderr


def test_json_against_unbound(server: ServerProc, qfile: Path) -> None:
    proc = soak_load(
        "--server", f"127.0.0.1:{server.port}", "--queries", str(qfile),
        "--rate", "500", "--duration", "2", "--json", "--flows", "4",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert set(d) == {
        "engine", "duration_s", "due", "skipped", "refused", "target_rate", "achieved_rate",
        "qps", "sent", "completed", "lost", "late", "rcodes", "latency_ms", "generator_bound",
        "classes", "engine_counters",
    }  # fmt: skip
    # the schedule is exact: 500 q/s for 2 s is 1,000 due, and a generator keeping up sends all
    assert d["due"] == 1000 and d["skipped"] == 0 and d["refused"] == 0
    assert d["sent"] == 1000 and d["completed"] == 1000 and d["rcodes"] == {"NOERROR": 1000}
    assert sum(c["due"] for c in d["classes"].values()) == 1000
    assert d["achieved_rate"] == 500.0 and d["generator_bound"] is False
    # the engine's own socket counts, kept apart from the windows: the same 1,000
    sockets = d["engine_counters"]
    assert sockets["socket_sent"] + sockets["send_failed"] == 1000, sockets
    assert sockets["socket_received"] >= 1000, sockets


def load_300_for_1_s(server: ServerProc, qfile: Path, *extra: str) -> str:
    """`soak load` at 300 q/s for 1 s that exits 0; its standard output."""
    proc = soak_load(
        "--server", f"127.0.0.1:{server.port}", "--queries", str(qfile),
        "--rate", "300", "--duration", "1", *extra,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_text_summary_and_tcp(server: ServerProc, qfile: Path) -> None:
    out = load_300_for_1_s(server, qfile, "--protocol", "tcp", "--flows", "2")
    assert "Queries sent:         300" in out
    assert "Queries completed:    300 (100.00%)" in out
    assert "Percentiles (ms):" in out and "GENERATOR BOUND" not in out


def test_dnsperf_engine(server: ServerProc, qfile: Path) -> None:
    d = json.loads(load_300_for_1_s(server, qfile, "--engine", "dnsperf", "--json", "--flows", "1"))
    assert d["engine"] == "dnsperf" and d["completed"] > 250 and d["lost"] == 0


def test_server_that_never_answers_is_all_lost_exit_1(qfile: Path) -> None:
    port = free_port()  # nothing listens there
    proc = soak_load(
        "--server", f"127.0.0.1:{port}", "--queries", str(qfile),
        "--rate", "100", "--duration", "1", "--timeout", "0.5", "--flows", "2",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "Queries lost:         100 (100.00%)" in proc.stdout
    # the cause is said: the port refused them (ICMP), not a generator that fell behind
    assert "connection refused" in proc.stdout and "GENERATOR BOUND" not in proc.stdout
    assert "no answer from" in proc.stderr and "connection refused" in proc.stderr


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--queries", "/nonexistent/q.txt"], "cannot read query file /nonexistent/q.txt"),
        (["--rate", "-5"], "--rate: rate must not be negative: '-5'"),
        (["--duration", "-3"], "duration"),
        (["--duration", "0"], "--duration must be positive"),
        (["--server", "127.0.0.1:70000"], "port out of range"),
        (["--server", "192.0.2.53:53"], "refusing to send to 192.0.2.53"),
        (["--workers", "0"], "workers"),
    ],
)
def test_bad_input_is_one_line_exit_2(qfile: Path, args: list[str], text: str) -> None:
    base = {"--server": "127.0.0.1:5300", "--queries": str(qfile), "--duration": "1"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = [x for pair in base.items() for x in pair]
    one_line_error(soak_load(*argv, *args[len(args) :]), 2, text)


def test_bad_query_lines_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("www.example.test A\nwww.example.test NOTATYPE\n")
    proc = soak_load("--server", "127.0.0.1:5300", "--queries", str(bad), "--duration", "1")
    one_line_error(proc, 2, "line 2: unknown record type 'NOTATYPE'")
    bad.write_text("# ok\nwww.example.test A B\n")
    proc = soak_load("--server", "127.0.0.1:5300", "--queries", str(bad), "--duration", "1")
    one_line_error(proc, 2, "line 2: malformed query line")


def test_allow_target_lets_a_named_network_through(qfile: Path) -> None:
    # 192.0.2.0/24 is named, so the safety check passes; --duration 0 then stops it
    # before any packet leaves.
    proc = soak_load(
        "--server", "192.0.2.53:53", "--queries", str(qfile), "--duration", "0",
        "--allow-target", "192.0.2.0/24",
    )  # fmt: skip
    one_line_error(proc, 2, "--duration must be positive")


SCENARIO = """
name: load-only
target:
  runtime: external
  name: unbound
  version: test
phases:
  - {name: steady, duration_s: 1m}
load:
  rate_qps: 200
  flows: 4
  seed: 3
  mix:
    - {name: local, weight: 3, queries: [www.example.test A], expect: {rcodes: [NOERROR]}}
    - {name: wrongly, weight: 1, queries: [www.example.test], expect: {addresses: [0.0.0.0]}}
"""


def test_mix_from_a_scenario(server: ServerProc, tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    proc = soak_load(
        "--scenario", str(scenario), "--server", f"127.0.0.1:{server.port}",
        "--duration", "1", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["sent"] == 200 and d["target_rate"] == 200
    assert d["classes"]["local"]["sent"] == 150 and d["classes"]["local"]["wrong_answers"] == 0
    assert d["classes"]["wrongly"]["wrong_answers"] == 50
