"""`soak load --replay` and `soak capture` with bad input: one line, exit 2, nothing
started (no socket to the server: the address below is never sent to)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import dns.message
import dns.query
import pytest

from tests.unit.test_traffic import answers_pcap, dnstap_bytes, good_pcap

pytestmark = pytest.mark.e2e

SOAK = str(Path(sys.executable).parent / "soak")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SOAK, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def listening_udp() -> socket.socket:
    """A UDP socket the replay would send to: it must stay silent on bad input."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    return s


CASES = {
    "text.txt": (b"www.example.test A\n", "not a pcap, pcapng, dnstap or soak capture"),
    "cut.pcap": (good_pcap()[:-9], "truncated pcap"),
    "cut.dnstap": (dnstap_bytes()[:-12], "truncated dnstap"),
    "noise.pcap": (answers_pcap(noise=True), "no DNS queries"),
    "answers.pcap": (answers_pcap(), "only DNS responses"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_capture_is_one_line_exit_2(
    tmp_path: Path, listening_udp: socket.socket, name: str
) -> None:
    blob, text = CASES[name]
    path = tmp_path / name
    path.write_bytes(blob)
    port = listening_udp.getsockname()[1]
    for args in (
        ["load", "--server", f"127.0.0.1:{port}", "--replay", str(path)],
        ["capture", "--from", str(path), "-o", str(tmp_path / "out")],
    ):
        proc = run(*args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("soak: ") and text in lines[0], proc.stderr
        assert not (tmp_path / "out").exists()
    with pytest.raises(BlockingIOError):
        listening_udp.recv(512)  # nothing was sent


def test_good_pcap_converts_and_summarises(tmp_path: Path) -> None:
    path = tmp_path / "t.pcap"
    path.write_bytes(good_pcap())
    proc = run("capture", "--from", str(path), "-o", str(tmp_path / "c.soakcap"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert '"queries": 5' in proc.stdout and '"clients": 3' in proc.stdout


SCENARIO = """
name: replay
target:
  runtime: external
  name: unbound
  version: test
phases:
  - {{name: steady, duration_s: 1m}}
load:
  timeout_s: 1s
  replay:
    file: t.pcap
    speed: 2x
    loops: 3
    classes:
      - {{name: v6, qtypes: [AAAA]}}
"""


def test_scenario_load_replay(tmp_path: Path) -> None:
    from tests.support.servers import unbound

    (tmp_path / "t.pcap").write_bytes(good_pcap())
    with unbound(tmp_path) as server:
        scenario = tmp_path / "s.yaml"
        scenario.write_text(SCENARIO.format(port=server.port))
        proc = run(
            "load", "--scenario", str(scenario), "--server", f"127.0.0.1:{server.port}", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        d = json.loads(proc.stdout)
        assert d["loops"] == 3 and d["speed"] == 2 and d["sent"] == 15
        assert d["classes"]["v6"]["sent"] == 3 and d["classes"]["other"]["sent"] == 12
        assert d["completed"] + d["lost"] == 15
        # the sockets' own counts, apart from the ledger (docs/replay.md)
        counters = d["engine_counters"]
        assert counters["socket_sent"] + counters["send_failed"] == d["sent"], counters
        assert counters["socket_received"] >= d["completed"], counters
        # latency: quantiles of the windows' histograms merged (soak.histogram), per class
        lat = d["latency_ms"]
        # (a quantile is its bucket's top: at most 1/128 above the exact max)
        assert d["completed"] > 0 and 0 < lat["p50"] <= lat["p99"] <= lat["max"] * 1.008, lat
        assert d["classes"]["other"]["latency_ms"]["max"] <= lat["max"]
        assert d["queries_per_loop"] == 5
        text = run("load", "--scenario", str(scenario), "--server", f"127.0.0.1:{server.port}")
        assert text.returncode == 0, text.stderr
        assert "3 loops of 5 queries" in text.stdout, text.stdout
        (latency,) = [ln for ln in text.stdout.splitlines() if "Latency (ms):" in ln]
        assert " p50 " in latency and " p99 " in latency and latency.endswith(" ms"), latency
        # a soak run replays it too (tests/e2e/test_soak_replay.py): its pre-flight reads
        # the capture, and a bad one is one line, exit 2, before anything starts
        check = run("validate", str(scenario))
        assert check.returncode == 0, check.stderr
        (tmp_path / "t.pcap").write_bytes(good_pcap()[:-9])
        check = run("validate", str(scenario))
        assert check.returncode == 2 and "truncated pcap" in check.stderr, check.stderr
        assert len(check.stderr.strip().splitlines()) == 1


def test_capture_from_unbound_dnstap_socket(tmp_path: Path) -> None:
    from tests.support.traffic import unbound_dnstap
    from tests.support.waiting import wait_for

    sock = tmp_path / "tap.sock"
    out = tmp_path / "c.soakcap"
    capture = subprocess.Popen(
        [SOAK, "capture", "--dnstap-socket", str(sock), "--duration", "8s", "-o", str(out),
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(sock.exists, 20, "soak capture listens", 0.05)
        with unbound_dnstap(tmp_path, sock) as server:
            for name in ("mail.example.test", "ns.example.test"):
                dns.query.udp(
                    dns.message.make_query(name, "A"), "127.0.0.1", port=server.port, timeout=2
                )
            stdout, stderr = capture.communicate(timeout=60)
    finally:
        capture.kill()
    assert capture.returncode == 0, stderr
    from soak.traffic.capture_file import qname_text, read_capture

    names = [qname_text(q.qname) for q in read_capture(out).queries]
    assert names[-2:] == ["mail.example.test.", "ns.example.test."]
    assert json.loads(stdout)["queries"] == len(names)
