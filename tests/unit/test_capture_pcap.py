"""What a run's tcpdump is asked and what its log says (soak.runs.capture_pcap)."""

from __future__ import annotations

from pathlib import Path

from soak.runs.capture_pcap import PACKETS_PER_QUERY, tcpdump_argv, tcpdump_said, tcpdump_stats
from soak.traffic.capture_config import CaptureConfig

EXIT_LOG = """tcpdump: listening on lo, link-type EN10MB (Ethernet), snapshot length 262144 bytes
1 packet captured
322 packets received by filter
7 packets dropped by kernel
"""


def test_tcpdump_records_only_what_goes_to_the_target_bounded() -> None:
    cfg = CaptureConfig(source="pcap", max_queries=1000, interface="lo")
    argv = tcpdump_argv(cfg, "127.0.0.1", 5300, Path("/r/capture.pcap"))
    assert argv[:3] == ["tcpdump", "-i", "lo"] and "-U" in argv and "--immediate-mode" in argv
    assert argv[argv.index("-c") + 1] == str(1000 * PACKETS_PER_QUERY)
    assert argv[argv.index("-w") + 1] == "/r/capture.pcap"
    assert argv[-1] == "dst host 127.0.0.1 and dst port 5300"


def test_tcpdump_counts_at_exit_and_its_own_last_line() -> None:
    assert tcpdump_stats(EXIT_LOG) == {"captured": 1, "received": 322, "dropped": 7}
    assert tcpdump_stats("") == {}
    log = "tcpdump: lo: You don't have permission to capture on that device\n(socket: x)\n"
    assert (
        tcpdump_said(log, "?") == "tcpdump: lo: You don't have permission to capture on that device"
    )
    assert tcpdump_said("", "exit 1") == "exit 1"
