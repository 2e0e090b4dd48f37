"""DNS queries out of a packet capture: classic pcap (µs and ns, either byte order)
and pcapng, over Ethernet (VLAN tags too), Linux cooked (SLL, SLL2), BSD loopback
and raw IP links; IPv4 and IPv6; UDP on any port and TCP reassembled per
connection (2-byte framing, several messages per segment or one across several).

Our own reader rather than dpkt: dpkt's last release is from 2022, it does not
reassemble TCP, and what we need of it (five headers) is about as long as the glue
around it would be. No libpcap: the file is read as bytes.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from soak.clock import NS_PER_S
from soak.errors import InputError
from soak.traffic.capture_file import TCP, UDP, Builder

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),  # µs, little-endian
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),  # ns
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
LINK_NULL, LINK_ETHERNET, LINK_RAW, LINK_SLL, LINK_SLL2 = 0, 1, 101, 113, 276
LINK_RAW_ALIASES = {12, 14, 101, 228, 229}
ETH_IPV4, ETH_IPV6, ETH_VLAN, ETH_QINQ = 0x0800, 0x86DD, 0x8100, 0x88A8
PROTO_TCP, PROTO_UDP = 6, 17
IPV6_EXT = {0, 43, 60}  # hop-by-hop, routing, destination options (a fragment: skipped)


def is_pcap(head: bytes) -> bool:
    return head[:4] in PCAP_MAGICS or head[:4] == PCAPNG_SHB


@dataclass
class Packet:
    time_ns: int
    link: int
    data: bytes


def read_pcap(path: Path, by_port: bool = False, into: Builder | None = None) -> Builder:
    """Every DNS message of the file into a Builder (queries kept, responses counted);
    `into`: one of the caller's (its span and bound set), else a new one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    packets = _pcapng(data, path) if data[:4] == PCAPNG_SHB else _pcap(data, path)
    builder = into if into is not None else Builder(f"pcap:{path.name}", by_port)
    streams = Streams()
    for pkt in packets:
        _packet(pkt, builder, streams)
    streams.finish(builder)
    return builder


def _pcap(data: bytes, path: Path) -> Iterator[Packet]:
    if data[:4] not in PCAP_MAGICS or len(data) < 24:
        raise InputError(f"{path}: truncated pcap (no file header)")
    order, ns_per_unit = PCAP_MAGICS[data[:4]]
    link = struct.unpack_from(order + "I", data, 20)[0] & 0xFFFF
    rec = struct.Struct(order + "IIII")
    pos, end = 24, len(data)
    while pos < end:
        if end - pos < rec.size:
            raise InputError(f"{path}: truncated pcap: a record header cut short at byte {pos}")
        sec, frac, incl, _orig = rec.unpack_from(data, pos)
        pos += rec.size
        if end - pos < incl:
            raise InputError(f"{path}: truncated pcap: a packet cut short at byte {pos}")
        yield Packet(sec * NS_PER_S + frac * ns_per_unit, link, data[pos : pos + incl])
        pos += incl


def _pcapng(data: bytes, path: Path) -> Iterator[Packet]:
    pos, end = 0, len(data)
    order = "<"
    links: list[tuple[int, int, int]] = []  # per interface: link type, ticks per second
    while pos < end:
        if end - pos < 12:
            raise InputError(f"{path}: truncated pcapng: a block cut short at byte {pos}")
        if data[pos : pos + 4] == PCAPNG_SHB:
            order = "<" if data[pos + 8 : pos + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            links = []
        btype, blen = struct.unpack_from(order + "II", data, pos)
        if blen < 12 or end - pos < blen:
            raise InputError(f"{path}: truncated pcapng: a block cut short at byte {pos}")
        body = data[pos + 8 : pos + blen - 4]
        if btype == 1:  # interface description
            link = struct.unpack_from(order + "H", body, 0)[0]
            links.append((link, _tsresol(body[8:], order), 0))
        elif btype == 6:  # enhanced packet
            iface, hi, lo, cap = struct.unpack_from(order + "IIII", body, 0)
            if iface >= len(links):
                raise InputError(f"{path}: pcapng packet on undeclared interface {iface}")
            link, per_s, _ = links[iface]
            ticks = (hi << 32) | lo
            yield Packet(ticks * NS_PER_S // per_s, link, body[20 : 20 + cap])
        pos += blen


def _tsresol(options: bytes, order: str) -> int:
    """Ticks per second of an interface (option if_tsresol; default µs)."""
    pos = 0
    while pos + 4 <= len(options):
        code, size = struct.unpack_from(order + "HH", options, pos)
        if code == 0:
            break
        if code == 9 and size >= 1:
            v = options[pos + 4]
            return 2 ** (v & 0x7F) if v & 0x80 else 10**v
        pos += 4 + ((size + 3) & ~3)
    return 1_000_000


def _ip_payload(link: int, frame: bytes) -> bytes | None:
    """The IP packet inside a link-layer frame, or None (not IP)."""
    if link == LINK_ETHERNET:
        etype, pos = struct.unpack_from("!H", frame, 12)[0] if len(frame) >= 14 else 0, 14
        while etype in (ETH_VLAN, ETH_QINQ) and len(frame) >= pos + 4:
            etype, pos = struct.unpack_from("!H", frame, pos + 2)[0], pos + 4
        return frame[pos:] if etype in (ETH_IPV4, ETH_IPV6) else None
    if link == LINK_NULL:
        return frame[4:]
    if link in LINK_RAW_ALIASES:
        return frame
    if link == LINK_SLL:
        etype = struct.unpack_from("!H", frame, 14)[0] if len(frame) >= 16 else 0
        return frame[16:] if etype in (ETH_IPV4, ETH_IPV6) else None
    if link == LINK_SLL2:
        etype = struct.unpack_from("!H", frame, 0)[0] if len(frame) >= 20 else 0
        return frame[20:] if etype in (ETH_IPV4, ETH_IPV6) else None
    return None


def _transport(ip: bytes) -> tuple[str, str, int, bytes] | None:
    """(source, destination, protocol, payload) of an unfragmented IPv4/IPv6 packet."""
    if not ip:
        return None
    version = ip[0] >> 4
    if version == 4 and len(ip) >= 20:
        ihl = (ip[0] & 15) * 4
        total = struct.unpack_from("!H", ip, 2)[0]
        if struct.unpack_from("!H", ip, 6)[0] & 0x3FFF:  # a fragment (MF or an offset)
            return None
        src = str(ipaddress.IPv4Address(ip[12:16]))
        dst = str(ipaddress.IPv4Address(ip[16:20]))
        return src, dst, ip[9], ip[ihl : total or len(ip)]
    if version == 6 and len(ip) >= 40:
        nxt, pos = ip[6], 40
        length = struct.unpack_from("!H", ip, 4)[0]
        while nxt in IPV6_EXT and len(ip) >= pos + 8:
            nxt, pos = ip[pos], pos + (ip[pos + 1] + 1) * 8
        src = str(ipaddress.IPv6Address(ip[8:24]))
        dst = str(ipaddress.IPv6Address(ip[24:40]))
        return src, dst, nxt, ip[pos : 40 + length if length else len(ip)]
    return None


def _packet(pkt: Packet, builder: Builder, streams: Streams) -> None:
    ip = _ip_payload(pkt.link, pkt.data)
    got = _transport(ip) if ip is not None else None
    if got is None:
        return
    src, dst, proto, payload = got
    if proto == PROTO_UDP and len(payload) >= 8:
        sport = struct.unpack_from("!H", payload, 0)[0]
        builder.add(pkt.time_ns, src, sport, UDP, payload[8:])
    elif proto == PROTO_TCP and len(payload) >= 20:
        sport, dport, seq = struct.unpack_from("!HHI", payload, 0)
        off = (payload[12] >> 4) * 4
        syn = bool(payload[13] & 0x02)
        streams.segment((src, sport, dst, dport), seq, syn, payload[off:], pkt.time_ns)


@dataclass
class Stream:
    """One direction of a TCP connection: its segments by relative sequence number."""

    isn: int
    number: int  # this stream among all of the file (a connection's identity)
    segments: dict[int, tuple[bytes, int]] = field(default_factory=dict)


class Streams:
    """TCP reassembly: segments kept by sequence number (retransmissions once), the
    contiguous bytes cut into framed DNS messages at the end; a message is timed by
    the segment its last byte came in (when the server could read it whole). A gap
    ends what is read of a direction."""

    def __init__(self) -> None:
        self.flows: dict[tuple[str, int, str, int], Stream] = {}
        self.ended: list[tuple[tuple[str, int, str, int], Stream]] = []
        self.gaps = 0

    def segment(
        self, key: tuple[str, int, str, int], seq: int, syn: bool, data: bytes, t: int
    ) -> None:
        flow = self.flows.get(key)
        if flow is None or (syn and flow.segments):  # a new connection on the same ports
            if flow is not None:
                self.ended.append((key, flow))
            number = len(self.flows) + len(self.ended)
            flow = self.flows[key] = Stream((seq + 1 if syn else seq) & 0xFFFFFFFF, number)
        if data:
            rel = (seq - flow.isn) & 0xFFFFFFFF
            flow.segments.setdefault(rel, (data, t))

    def finish(self, builder: Builder) -> None:
        for key, flow in [*self.ended, *self.flows.items()]:
            for t, msg in self._messages(flow):
                builder.add(t, key[0], flow.number, TCP, msg)

    def _messages(self, flow: Stream) -> Iterator[tuple[int, bytes]]:
        buf = bytearray()
        times: list[tuple[int, int]] = []  # (position in buf, time) of each segment
        pos = 0
        for rel in sorted(flow.segments):
            data, t = flow.segments[rel]
            if rel > pos:
                self.gaps += 1
                break
            data = data[pos - rel :]
            if data:
                times.append((len(buf), t))
                buf += data
                pos += len(data)
        at = 0
        ti = 0
        while len(buf) - at >= 2:
            size = (buf[at] << 8) | buf[at + 1]
            if len(buf) - at - 2 < size:
                break
            last = at + 2 + size - 1  # the message is complete with its last byte
            while ti + 1 < len(times) and times[ti + 1][0] <= last:
                ti += 1
            yield times[ti][1], bytes(buf[at + 2 : at + 2 + size])
            at += 2 + size
