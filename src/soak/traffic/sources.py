"""Any traffic file to a Capture: soak's own capture, a pcap/pcapng, a dnstap file.

The pre-flight of a replay and of `soak capture`: a file that is none of these,
is cut short, holds no DNS queries, or holds only responses, is refused in one
line (InputError, exit 2) before anything starts.
"""

from __future__ import annotations

from pathlib import Path

from soak.errors import InputError
from soak.traffic.capture_file import Builder, Capture, is_capture, read_capture
from soak.traffic.dnstap import is_dnstap, read_dnstap
from soak.traffic.pcap import is_pcap, read_pcap


def sniff(path: Path) -> str:
    """The file's kind: "capture", "pcap" or "dnstap"; InputError if none."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if is_capture(head):
        return "capture"
    if is_pcap(head):
        return "pcap"
    if is_dnstap(head):
        return "dnstap"
    if not head:
        raise InputError(f"{path}: empty file (want a pcap, pcapng, dnstap or soak capture)")
    raise InputError(
        f"{path}: not a pcap, pcapng, dnstap or soak capture (starts {head[:8].hex()})"
    )


def load_capture(path: Path, by_port: bool = False) -> Capture:
    """The client queries of any traffic file, checked (see the module's doc); `by_port`:
    a client is an address and port (capture.Builder), for pcap and dnstap."""
    kind = sniff(path)
    if kind == "capture":
        return read_capture(path)
    builder = read_pcap(path, by_port) if kind == "pcap" else read_dnstap(path, by_port)
    return finish(builder, str(path))


def finish(builder: Builder, where: str) -> Capture:
    """A Builder's capture, or the one line saying why there is nothing to replay."""
    if not len(builder):
        if builder.responses:
            raise InputError(
                f"{where}: only DNS responses ({builder.responses}), no queries: capture the"
                " server's client queries (dnstap client-query messages, or both directions)"
            )
        raise InputError(f"{where}: no DNS queries in it")
    return builder.capture()
