"""`soak load --replay` and `soak capture` with bad input: one line, exit 2, nothing
started (no socket to the server: the address below is never sent to)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

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
