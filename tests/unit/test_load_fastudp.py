"""The compiled UDP loop: built by the install, its latency buckets, its wire format."""

from __future__ import annotations

import socket
import time
from collections import Counter

import dns.message
import dns.name
import pytest

from soak.load import udp_fast, wire


def test_the_extension_is_built_by_the_install() -> None:
    # `pip install -e .` (make setup) compiles it; without it workers fall back silently.
    assert udp_fast.available()


@pytest.mark.parametrize(
    ("us", "reported"),
    [
        (0, 0),
        (1, 1),
        (2047, 2047),
        (2048, 2048),
        (2049, 2048),
        (4099, 4096),
        (1_999_999, 1_999_872),
    ],
)
def test_latency_buckets_are_exact_below_2048_us_then_within_0_1_percent(
    us: int, reported: int
) -> None:
    from soak.load._fastudp import bucket_value

    assert bucket_value(us) == reported
    assert 0 <= us - reported <= us / 1024


def test_the_compiled_loop_reads_and_writes_the_wire_as_wire_py_does() -> None:
    """The C loop mirrors wire.py: the queries it sends are wire.query(question, id), and it
    counts replies by wire.message_id, wire.echoes and wire.rcode (same packets, both sides)."""
    from soak.load._fastudp import Engine

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    ours.setblocking(False)
    theirs.settimeout(2.0)
    questions = [
        wire.question(dns.name.from_text(name).to_wire(), rdtype)
        for name, rdtype in [("a.test", 1), ("www.example.test", 28), ("x.y.z.test", 15)]
    ]
    seen: list[tuple[bytes, int]] = []

    def check(reply: bytes, question_len: int) -> bool:
        seen.append((reply, question_len))
        return wire.wrong_answer(reply, question_len, rcodes={0})

    n = len(questions)
    engine = Engine(
        [ours.fileno()], [questions], [None], [check], [0], 0, [0], 5 * 10**9, n, 512, 0, 8, 0
    )
    try:
        start = time.monotonic_ns()
        engine.begin(start)
        sent, outstanding, _ = engine.run(
            start + 50_000_000, start + 10**10, 0.0, start, 0, 0.0, True
        )
        assert (sent, outstanding) == (n, n)
        queries = [theirs.recv(512) for _ in range(n)]
        assert queries == [wire.query(q, i) for i, q in enumerate(questions)]
        assert [wire.message_id(q) for q in queries] == [0, 1, 2]

        replies = [
            response(queries[0], rcode=0),
            response(queries[1], rcode=3),
            response(queries[2], rcode=5),
        ]
        stray = [
            b"\x00\x01\x81",  # shorter than a header
            wire.query(questions[0], 7)[:2] + replies[0][2:],  # an id nothing was sent with
            wire.query(questions[1], 0)[:2] + replies[1][2:],  # id 0 with another question
        ]
        assert [wire.echoes(r, questions[0]) for r in stray[1:]] == [True, False]
        for packet in stray + replies:
            theirs.send(packet)
        now = time.monotonic_ns()
        _, outstanding, _ = engine.run(now + 10**9, now, 0.0, now, n, 0.0, False)
        assert outstanding == 0
        windows, closed_below, unexpected, errors = engine.take(1 << 62)[:4]
        assert (len(windows), unexpected, errors) == (1, 3, 0)
        # flat out, the window is the second of sending (the origin was 0: boot time)
        second, _refused, [counts] = windows[0]
        sent_c, completed, lost, late, wrong, skipped, abandoned, rcodes, lat = counts
        assert closed_below == second + 1
        assert (sent_c, completed, lost, late, skipped, abandoned) == (n, n, 0, 0, 0, 0)
        assert sum(lat.values()) == n
        assert rcodes == dict(Counter(wire.rcode(r) for r in replies)) == {0: 1, 3: 1, 5: 1}
        assert seen == [(r, len(q)) for r, q in zip(replies, questions, strict=True)]
        assert wrong == sum(wire.wrong_answer(r, qlen, {0}) for r, qlen in seen) == 2
    finally:
        del engine
        ours.close()
        theirs.close()


def response(query: bytes, rcode: int) -> bytes:
    r = dns.message.make_response(dns.message.from_wire(query))
    r.set_rcode(rcode)
    return r.to_wire()


def test_the_compiled_loop_counts_each_query_of_a_batch_in_the_second_it_was_due() -> None:
    """Behind schedule the loop sends in batches of 64 (chunks of 16): each query still
    counts in its own due second. 1,000 q/s from 0.99 s ago: queries 0-999 are due in
    second 0, the rest in second 1."""
    from soak.load._fastudp import Engine

    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # never read: drops the surplus
    sink.bind(("127.0.0.1", 0))
    ours = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ours.setblocking(False)
    ours.connect(sink.getsockname())
    question = wire.question(dns.name.from_text("a.test").to_wire(), 1)
    now = time.monotonic_ns()
    origin = now - 990_000_000
    engine = Engine(
        [ours.fileno()], [[question]], [None], [None], [0], 0, [0], 10**9, 10**6, 512, 0, 8,
        origin,
    )  # fmt: skip
    try:
        # Until past the first second's due queries (a busy machine may not give the loop
        # the CPU within one call's 30 ms): each call sends what is due by its deadline.
        sent = 0
        give_up_ns = now + 60 * 10**9
        while sent <= 1000 and time.monotonic_ns() < give_up_ns:
            deadline_ns = time.monotonic_ns() + 30_000_000
            sent += engine.run(deadline_ns, now + 10**11, 1000.0, origin, 0, 0.0, True)[0]
        assert sent > 1000  # due by now: 991 and more
        engine.sweep(True)  # nothing answers: every query lost, every window closed
        windows = engine.take(1 << 62)[0]
        per_second = {second: classes[0][0] for second, _, classes in windows}
        assert per_second[0] == 1000  # the batches behind schedule counted where due
        assert sum(n for second, n in per_second.items() if second > 0) == sent - 1000
    finally:
        del engine
        ours.close()
        sink.close()
