"""wire.py from bytes: the queries the engine sends, what it reads from replies, TCP framing."""

from __future__ import annotations

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rrset
import pytest

from soak.load import wire

# A reply as a server sends it, written out by hand: id 0x1234, QR RD RA, NXDOMAIN,
# one question (b.test A IN), no answers.
NXDOMAIN_REPLY = bytes.fromhex("1234 8183 0001 0000 0000 0000 0162 0474 6573 7400 0001 0001")
B_TEST_A = bytes.fromhex("0162 0474 6573 7400 0001 0001")


def response(query: bytes, *answers: tuple[str, str, str], rcode: int = 0) -> bytes:
    r = dns.message.make_response(dns.message.from_wire(query))
    r.set_rcode(rcode)
    for owner, rdtype, text in answers:
        r.answer.append(dns.rrset.from_text(owner, 60, "IN", rdtype, text))
    return r.to_wire()


def test_header_is_what_dnsperf_sends() -> None:
    expected = bytes.fromhex("0000 0100 0001 0000 0000 0000")
    assert expected == wire.HEADER
    assert len(wire.HEADER) == wire.HEADER_LEN


def test_question_and_query_parse_back_in_dnspython() -> None:
    q = wire.question(dns.name.from_text("www.example.test").to_wire(), 28)
    msg = dns.message.from_wire(wire.query(q, 0xBEEF))
    assert msg.id == 0xBEEF
    assert msg.flags == dns.flags.RD
    assert [(str(r.name), r.rdtype, r.rdclass) for r in msg.question] == [
        ("www.example.test.", 28, 1)
    ]
    assert not msg.answer and not msg.authority and not msg.additional
    assert msg.edns < 0


def test_question_by_hand() -> None:
    assert wire.question(wire.plain_name("b.test") or b"", 1) == B_TEST_A


@pytest.mark.parametrize("qid", [0, 1, 255, 256, 0x1234, 0xFFFF])
def test_ids_patch_and_read_back(qid: int) -> None:
    buf = wire.query_buffer(B_TEST_A)
    assert bytes(buf) == wire.query(B_TEST_A)  # id 0 until patched
    wire.set_id(buf, qid)
    assert bytes(buf) == wire.query(B_TEST_A, qid)
    assert wire.message_id(buf) == qid
    assert buf[2:] == wire.HEADER[2:] + B_TEST_A


@pytest.mark.parametrize("code", range(16))
def test_rcode_is_the_header_nibble(code: int) -> None:
    reply = response(wire.query(B_TEST_A, 7), rcode=code)
    assert wire.rcode(reply) == code == dns.message.from_wire(reply).rcode()


def test_a_reply_written_by_hand() -> None:
    assert wire.message_id(NXDOMAIN_REPLY) == 0x1234
    assert wire.rcode(NXDOMAIN_REPLY) == 3
    assert wire.echoes(NXDOMAIN_REPLY, B_TEST_A)
    assert wire.answer_addresses(NXDOMAIN_REPLY, len(B_TEST_A)) == []


def test_echoes_the_question_byte_for_byte() -> None:
    assert wire.echoes(response(wire.query(B_TEST_A)), B_TEST_A)
    other = wire.question(wire.plain_name("c.test") or b"", 1)
    assert not wire.echoes(response(wire.query(other)), B_TEST_A)
    upper = wire.question(wire.plain_name("B.test") or b"", 1)
    assert not wire.echoes(response(wire.query(upper)), B_TEST_A)  # case too (0x20)
    assert not wire.echoes(NXDOMAIN_REPLY[:-1], B_TEST_A)  # cut short


def test_answer_addresses_follow_pointers_and_skip_other_types() -> None:
    q = dns.message.make_query("www.example.test", "A")
    r = dns.message.make_response(q)
    r.answer.append(dns.rrset.from_text("www.example.test.", 60, "IN", "CNAME", "x.example.test."))
    r.answer.append(dns.rrset.from_text("x.example.test.", 60, "IN", "A", "192.0.2.7"))
    data = r.to_wire()
    qlen = len(q.to_wire()) - 12
    assert wire.answer_addresses(data, qlen) == [bytes([192, 0, 2, 7])]


def test_answer_addresses_aaaa_and_a_truncated_section() -> None:
    q = wire.query(wire.question(wire.plain_name("b.test") or b"", 28))
    reply = response(q, ("b.test.", "AAAA", "2001:db8::1"), ("b.test.", "AAAA", "::"))
    assert wire.answer_addresses(reply, len(B_TEST_A)) == [
        bytes.fromhex("20010db8000000000000000000000001"),
        bytes(16),
    ]
    # A count that promises more than the message holds: what is there, no error.
    assert wire.answer_addresses(reply[:-20], len(B_TEST_A)) == [
        bytes.fromhex("20010db8000000000000000000000001")
    ]


def test_wrong_answer() -> None:
    q = wire.query(B_TEST_A)
    blocked = response(q, ("b.test.", "A", "0.0.0.0"))
    other = response(q, ("b.test.", "A", "192.0.2.1"))
    nx = response(q, rcode=3)
    zero = {bytes(4)}
    n = len(B_TEST_A)
    assert not wire.wrong_answer(nx, n)  # no expectation: never wrong
    assert not wire.wrong_answer(blocked, n, addresses=zero)
    assert wire.wrong_answer(other, n, addresses=zero)
    assert wire.wrong_answer(nx, n, addresses=zero)  # no address at all
    assert wire.wrong_answer(nx, n, rcodes={0})
    assert not wire.wrong_answer(nx, n, rcodes={0, 3})
    assert wire.wrong_answer(blocked, n, rcodes={3}, addresses=zero)


def test_plain_names_match_dnspython_and_odd_ones_are_left_to_it() -> None:
    for name in ("www.example.test", "www.example.test.", ".", "a" * 63 + ".test"):
        assert wire.plain_name(name) == dns.name.from_text(name).to_wire()
    for name in ("a\\.b.test", "bücher.test", "", "a..b", "a" * 64 + ".test"):
        assert wire.plain_name(name) is None
    assert wire.plain_name(".".join(["a" * 63] * 4)) is None  # 257 bytes: over 255


def test_framing_round_trip_and_partial_reads() -> None:
    msgs = [wire.query(B_TEST_A, 1), NXDOMAIN_REPLY, b""]
    stream = b"".join(wire.frame(m) for m in msgs)
    assert stream[:2] == bytes((0, len(msgs[0])))
    assert wire.unframe(stream) == (msgs, len(stream))
    # Byte by byte: a message comes out only once it is whole.
    buf = bytearray()
    got: list[bytes] = []
    for byte in stream:
        buf.append(byte)
        out, used = wire.unframe(buf)
        del buf[:used]
        got += out
    assert got == msgs and not buf


@pytest.mark.parametrize("qid", [0, 0x1234, 0xFFFF])
def test_framed_query_is_a_framed_query(qid: int) -> None:
    long_question = wire.question(wire.plain_name(".".join(["a" * 60] * 4)) or b"", 1)
    for q in (B_TEST_A, long_question):
        assert wire.framed_query(q, qid) == wire.frame(wire.query(q, qid))


def test_unframe_keeps_an_incomplete_tail() -> None:
    framed = wire.frame(NXDOMAIN_REPLY)
    assert wire.unframe(framed + framed[:5]) == ([NXDOMAIN_REPLY], len(framed))
    assert wire.unframe(b"\x00") == ([], 0)
    assert wire.frame(bytes(300))[:2] == b"\x01\x2c"
