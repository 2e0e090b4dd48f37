"""The load engine's DNS wire format: pure functions over bytes, no sockets.

The loops own the sockets (udp.py, tcp.py with conn.py and doh.py, and the
compiled loop in _fastudp.c); this module owns what the bytes mean: the query
the engine sends (a 12-byte header, id patched per query, RD set, one
question, no EDNS), a reply's id and rcode, whether it echoes the question,
the A and AAAA addresses of its answer section, and the 2-byte length framing
of DNS over TCP and TLS (RFC 1035 4.2.2, RFC 7766). _fastudp.c mirrors the
header, id, rcode and echo check in C; tests/unit/test_load_wire.py checks
that the two agree on the same packets.
"""

from __future__ import annotations

import struct
from collections.abc import Collection

HEADER_LEN = 12
FLAG_RD = 0x0100
CLASS_IN = 1
TYPE_A = 1
TYPE_AAAA = 28
# id 0, flags RD, one question, no other sections: what dnsperf sends without -e.
HEADER = struct.pack("!HHHHHH", 0, FLAG_RD, 1, 0, 0, 0)
_AFTER_ID = HEADER[2:]
_RR_FIXED = struct.Struct("!HHIH")  # type, class, TTL, rdlength


def plain_name(name: str) -> bytes | None:
    """Wire form of a plain ASCII name without escapes (fast path for big files), else None
    (escapes, non-ASCII, empty or over-long labels: the caller asks dnspython)."""
    if "\\" in name or not name.isascii():
        return None
    text = name[:-1] if name.endswith(".") else name
    if not text:
        return b"\0" if name == "." else None
    out = bytearray()
    for label in text.split("."):
        if not 0 < len(label) <= 63:
            return None
        out.append(len(label))
        out += label.encode()
    out.append(0)
    return bytes(out) if len(out) <= 255 else None


def question(name_wire: bytes, rdtype: int) -> bytes:
    """The question section: the name in wire form (no compression), type, class IN."""
    return name_wire + struct.pack("!HH", rdtype, CLASS_IN)


def query(question: bytes, qid: int = 0) -> bytes:
    """A whole query: HEADER with `qid` as its id, then the question."""
    return bytes((qid >> 8, qid & 255)) + _AFTER_ID + question


def query_buffer(question: bytes) -> bytearray:
    """A query with id 0 that a loop keeps and re-ids before each send (set_id)."""
    return bytearray(HEADER + question)


def set_id(message: bytearray, qid: int) -> None:
    message[0] = qid >> 8
    message[1] = qid & 255


def message_id(message: bytes) -> int:
    """The id of a message of at least HEADER_LEN bytes."""
    return (message[0] << 8) | message[1]


def rcode(message: bytes) -> int:
    """The header's 4-bit rcode (the engine sends no EDNS, so there is no extended part)."""
    return message[3] & 15


def echoes(reply: bytes, question: bytes) -> bool:
    """Whether the reply's question section starts with the query's question, byte for byte."""
    return reply.startswith(question, HEADER_LEN)


def answer_addresses(reply: bytes, question_len: int) -> list[bytes]:
    """The A and AAAA rdata of the answer section (the question already matched)."""
    ancount = (reply[6] << 8) | reply[7]
    pos = HEADER_LEN + question_len
    out = []
    end = len(reply)
    for _ in range(ancount):
        while pos < end:  # owner name: labels ending in 0 or a 2-byte pointer
            length = reply[pos]
            if length == 0:
                pos += 1
                break
            if length >= 0xC0:
                pos += 2
                break
            pos += length + 1
        if pos + _RR_FIXED.size > end:
            break
        rdtype, _, _, rdlen = _RR_FIXED.unpack_from(reply, pos)
        pos += _RR_FIXED.size
        if rdtype in (TYPE_A, TYPE_AAAA):
            out.append(reply[pos : pos + rdlen])
        pos += rdlen
    return out


def wrong_answer(
    reply: bytes,
    question_len: int,
    rcodes: Collection[int] | None = None,
    addresses: Collection[bytes] | None = None,
) -> bool:
    """An answer outside the expectation: an rcode not in `rcodes`, or (with `addresses`,
    packed A/AAAA rdata) no address at all or one that is not expected."""
    if rcodes is not None and rcode(reply) not in rcodes:
        return True
    if addresses is not None:
        found = answer_addresses(reply, question_len)
        return not found or any(a not in addresses for a in found)
    return False


def frame(message: bytes) -> bytes:
    """A message with its 2-byte length in front (DNS over TCP and TLS)."""
    return len(message).to_bytes(2, "big") + message


def framed_query(question: bytes, qid: int) -> bytes:
    """frame(query(question, qid)) built in one step (the stream loops' send path)."""
    size = HEADER_LEN + len(question)
    return bytes((size >> 8, size & 255, qid >> 8, qid & 255)) + _AFTER_ID + question


def unframe(buf: bytes | bytearray) -> tuple[list[bytes], int]:
    """The complete framed messages at the start of `buf` and how many bytes they took
    (the caller keeps the rest for the next read)."""
    out = []
    pos = 0
    end = len(buf)
    while end - pos >= 2:
        size = (buf[pos] << 8) | buf[pos + 1]
        if end - pos - 2 < size:
            break
        out.append(bytes(buf[pos + 2 : pos + 2 + size]))
        pos += 2 + size
    return out, pos
