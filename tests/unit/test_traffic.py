"""Traffic sources: soak's capture file, pcap/pcapng and dnstap readers, bad input."""

from __future__ import annotations

import struct
from pathlib import Path

import dns.message
import pytest

from soak.errors import InputError
from soak.traffic import dnstap
from soak.traffic.capture_file import TCP, UDP, Capture, Query, read_capture, write_capture
from soak.traffic.sources import load_capture


def query(name: str, rdtype: str = "A", qid: int = 1) -> bytes:
    m = dns.message.make_query(name, rdtype, use_edns=False)
    m.id = qid
    return m.to_wire()


def response(name: str) -> bytes:
    m = dns.message.make_response(dns.message.make_query(name, "A", use_edns=False))
    return m.to_wire()


def ipv4(src: str, dst: str, proto: int, payload: bytes) -> bytes:
    a = bytes(int(x) for x in src.split("."))
    b = bytes(int(x) for x in dst.split("."))
    return (
        struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(payload), 0, 0, 64, proto, 0) + a + b + payload
    )


def ipv6(src: int, dst: int, proto: int, payload: bytes) -> bytes:
    head = struct.pack("!IHBB", 6 << 28, len(payload), proto, 64)
    return head + src.to_bytes(16, "big") + dst.to_bytes(16, "big") + payload


def udp(sport: int, dport: int, data: bytes) -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data


def tcp(sport: int, dport: int, seq: int, data: bytes, syn: bool = False) -> bytes:
    flags = 0x02 if syn else 0x18
    return struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 65535, 0, 0) + data


def ether(ip: bytes, v6: bool = False) -> bytes:
    return b"\0" * 12 + (b"\x86\xdd" if v6 else b"\x08\x00") + ip


def framed(msg: bytes) -> bytes:
    return len(msg).to_bytes(2, "big") + msg


def pcap(frames: list[tuple[float, bytes]], link: int = 1) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, link)
    for t, f in frames:
        out += struct.pack("<IIII", int(t), round(t % 1 * 1e6), len(f), len(f)) + f
    return out


def pcapng(frames: list[tuple[float, bytes]]) -> bytes:
    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    tsresol = struct.pack("<HHB", 9, 1, 9) + b"\0" * 3 + b"\0" * 4  # ns, then opt_end
    idb = block(1, struct.pack("<HHI", 1, 0, 65535) + tsresol)
    out = shb + idb
    for t, f in frames:
        ticks = round(t * 1e9)
        out += block(
            6, struct.pack("<IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, len(f), len(f)) + f
        )
    return out


def mixed_frames() -> list[tuple[float, bytes]]:
    """Two UDP clients (one IPv6), one TCP connection carrying three queries (two in one
    segment, one split across two, a retransmission), and the server's responses."""
    q3, q4, q5 = query("c.test", "MX"), query("d.test", "TXT"), query("e.test", "NS")
    stream = framed(q3) + framed(q4) + framed(q5)
    cut = len(framed(q3)) + len(framed(q4)) + 5
    return [
        (100.0, ether(ipv4("10.0.0.1", "10.0.0.53", 17, udp(4000, 5353, query("a.test"))))),
        (100.0005, ether(ipv4("10.0.0.53", "10.0.0.1", 17, udp(5353, 4000, response("a.test"))))),
        (100.25, ether(ipv6(1, 2, 17, udp(4001, 53, query("b.test", "AAAA"))), v6=True)),
        (100.3, ether(ipv4("10.0.0.9", "10.0.0.53", 6, tcp(5000, 53, 999, b"", syn=True)))),
        (100.5, ether(ipv4("10.0.0.9", "10.0.0.53", 6, tcp(5000, 53, 1000, stream[:cut])))),
        (100.5, ether(ipv4("10.0.0.9", "10.0.0.53", 6, tcp(5000, 53, 1000, stream[:cut])))),
        (100.75, ether(ipv4("10.0.0.9", "10.0.0.53", 6, tcp(5000, 53, 1000 + cut, stream[cut:])))),
    ]


def check_mixed(c: Capture) -> None:
    assert [(q.offset_ns, q.qtype, q.transport) for q in c.queries] == [
        (0, 1, UDP),
        (250_000_000, 28, UDP),
        (500_000_000, 15, TCP),
        (500_000_000, 16, TCP),
        (750_000_000, 2, TCP),
    ]
    assert c.clients == ["10.0.0.1", "::1", "10.0.0.9"]
    assert [q.client for q in c.queries] == [0, 1, 2, 2, 2]
    assert {q.conn for q in c.queries if q.client == 2} == {0}
    assert c.queries[0].qname == b"\x01a\x04test\x00"
    assert c.queries[0].flags & 0x0100  # RD as sent


def test_pcap_udp_tcp_ipv4_ipv6(tmp_path: Path) -> None:
    f = tmp_path / "t.pcap"
    f.write_bytes(pcap(mixed_frames()))
    check_mixed(load_capture(f))


def test_pcapng_same_queries(tmp_path: Path) -> None:
    f = tmp_path / "t.pcapng"
    f.write_bytes(pcapng(mixed_frames()))
    check_mixed(load_capture(f))


def test_raw_ip_link_and_clients_by_port(tmp_path: Path) -> None:
    frames = [
        (1.0, ipv4("127.0.0.1", "127.0.0.1", 17, udp(p, 53, query(f"n{p}.test"))))
        for p in (1000, 1001, 1000)
    ]
    f = tmp_path / "raw.pcap"
    f.write_bytes(pcap(frames, link=101))
    assert len(load_capture(f).clients) == 1
    c = load_capture(f, by_port=True)
    assert c.clients == ["127.0.0.1#1000", "127.0.0.1#1001"]
    assert [q.client for q in c.queries] == [0, 1, 0]


def pb_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb(fields: list[tuple[int, int | bytes]]) -> bytes:
    out = b""
    for number, value in fields:
        if isinstance(value, bytes):
            out += pb_varint(number << 3 | 2) + pb_varint(len(value)) + value
        else:
            out += pb_varint(number << 3) + pb_varint(value)
    return out


def tap(mtype: int, msg: bytes, sec: int, addr: bytes, port: int, proto: int = 1) -> bytes:
    m = pb([(1, mtype), (2, 1), (3, proto), (4, addr), (6, port), (8, sec), (10, msg)])
    return pb([(1, b"ns1"), (14, m), (15, 1)])


def test_dnstap_file(tmp_path: Path) -> None:
    frames = [
        tap(5, query("a.test"), 10, b"\x7f\0\0\x01", 3000),
        tap(6, response("a.test"), 10, b"\x7f\0\0\x01", 3000),
        tap(5, query("b.test", "AAAA"), 11, b"\x7f\0\0\x02", 3001, proto=2),
        tap(3, query("upstream.test"), 11, b"\x7f\0\0\x01", 53),  # resolver query: not a client's
        # an authoritative server's client query (BIND without recursion), and its answer
        tap(1, query("c.test", "MX"), 12, b"\x7f\0\0\x03", 3002),
        tap(2, response("c.test"), 12, b"\x7f\0\0\x03", 3002),
    ]
    f = tmp_path / "t.dnstap"
    f.write_bytes(dnstap.file_bytes(frames))
    c = load_capture(f)
    assert c.clients == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert [(q.offset_ns, q.qtype, q.transport) for q in c.queries] == [
        (0, 1, UDP),
        (1_000_000_000, 28, TCP),
        (2_000_000_000, 15, UDP),
    ]


def test_capture_round_trip(tmp_path: Path) -> None:
    c = Capture(
        "t",
        ["a", "b"],
        [Query(0, 0, 0, 0x100, 1, UDP, b"\x01a\0"), Query(5, 1, 2, 0, 28, TCP, b"\0")],
    )
    f = tmp_path / "c.soakcap"
    write_capture(f, c)
    back = load_capture(f)
    assert back.queries == c.queries and back.clients == c.clients


def test_a_name_asked_again_is_one_object(tmp_path: Path) -> None:
    """A capture read for a day's replay holds each distinct name once."""
    frames = [
        (100.0 + k / 10, ether(ipv4("10.0.0.1", "10.0.0.53", 17, udp(4000, 53, query(n)))))
        for k, n in enumerate(["a.test", "b.test", "a.test"])
    ]
    (tmp_path / "t.pcap").write_bytes(pcap(frames))
    from_pcap = load_capture(tmp_path / "t.pcap")
    write_capture(tmp_path / "c.soakcap", from_pcap)
    for c in (from_pcap, load_capture(tmp_path / "c.soakcap")):
        a1, b, a2 = (q.qname for q in c.queries)
        assert a1 == a2 == b"\x01a\x04test\x00" != b
        assert a1 is a2


# ----------------------------------------------------------------- bad input


def bad(tmp_path: Path, blob: bytes, name: str = "bad") -> str:
    f = tmp_path / name
    f.write_bytes(blob)
    with pytest.raises(InputError) as err:
        load_capture(f)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_not_a_capture(tmp_path: Path) -> None:
    assert "not a pcap, pcapng, dnstap or soak capture" in bad(tmp_path, b"www.example.test A\n")
    assert "empty file" in bad(tmp_path, b"")


def test_truncated(tmp_path: Path) -> None:
    whole = pcap(mixed_frames())
    assert "truncated pcap" in bad(tmp_path, whole[:-7])
    assert "truncated pcapng" in bad(tmp_path, pcapng(mixed_frames())[:-3])
    tap_file = dnstap.file_bytes([tap(5, query("a.test"), 1, b"\x7f\0\0\x01", 1)])
    assert "truncated dnstap" in bad(tmp_path, tap_file[:-12])
    assert "truncated dnstap" in bad(tmp_path, tap_file[:-3])
    f = tmp_path / "c.soakcap"
    write_capture(f, Capture("t", ["a"], [Query(0, 0, 0, 0, 1, UDP, b"\x01a\0")] * 3))
    assert "truncated capture" in bad(tmp_path, f.read_bytes()[:-2])


def test_no_queries_and_responses_only(tmp_path: Path) -> None:
    noise = [(1.0, ether(ipv4("10.0.0.1", "10.0.0.2", 17, udp(1, 2, b"hello, not dns at all"))))]
    assert "no DNS queries" in bad(tmp_path, pcap(noise))
    answers = [(1.0, ether(ipv4("10.0.0.53", "10.0.0.1", 17, udp(53, 4000, response("a.test")))))]
    assert "only DNS responses (1)" in bad(tmp_path, pcap(answers))
    tap_answers = dnstap.file_bytes([tap(6, response("a.test"), 1, b"\x7f\0\0\x01", 1)])
    assert "only DNS responses" in bad(tmp_path, tap_answers)


def test_truncated_capture_file_reads_as_bad(tmp_path: Path) -> None:
    f = tmp_path / "c.soakcap"
    write_capture(f, Capture("t", ["a"], [Query(0, 0, 0, 0, 1, UDP, b"\x01a\0")]))
    cut = tmp_path / "cut.soakcap"
    cut.write_bytes(f.read_bytes()[:-1])
    with pytest.raises(InputError, match="truncated capture"):
        read_capture(cut)


# ----------------------------------------------------------------- files for the e2e tests


def good_pcap() -> bytes:
    return pcap(mixed_frames())


def dnstap_bytes() -> bytes:
    return dnstap.file_bytes([tap(5, query("a.test"), 1, b"\x7f\0\0\x01", 1)])


def answers_pcap(noise: bool = False) -> bytes:
    payload = b"hello, not dns at all" if noise else response("a.test")
    return pcap([(1.0, ether(ipv4("10.0.0.53", "10.0.0.1", 17, udp(53, 4000, payload))))])
