"""Accounting, pacing schedule, stats merging and reply checks (pure, no sockets)."""

from __future__ import annotations

from pathlib import Path

import dns.message
import dns.rrset
import pytest

from soak.load.ledger import CLOSE_ALL, ClassWindow, Window
from soak.load.load_config import LoadConfig
from soak.load.queries import build_classes, mix_schedule
from soak.load.stats import (
    ClassStats,
    Interval,
    LoadResult,
    MixStats,
    SocketCounts,
    is_generator_bound,
    result_from,
)
from soak.load.supervised import engine_counters
from soak.load.wire import HEADER
from soak.load.worker import Book, Pacer, WorkerSpec, is_wrong

MS = 1_000_000  # ns
T0 = 10**9  # a send time (0 marks a free slot)


def spec(mix: list[dict], timeout_s: float = 2.0) -> WorkerSpec:
    cfg = LoadConfig(mix=mix)
    classes = build_classes(cfg.mix, Path("."), 1)
    schedule = mix_schedule([c.weight for c in classes])
    return WorkerSpec(0, "127.0.0.1", 53, "udp", 1, timeout_s, classes, schedule, 0, 100, 1, 1)


def reply_to(query_wire: bytes, *answers: str, rcode: int = 0) -> bytes:
    q = dns.message.from_wire(query_wire)
    r = dns.message.make_response(q)
    r.set_rcode(rcode)
    for text in answers:
        r.answer.append(dns.rrset.from_text(q.question[0].name, 60, "IN", "A", text))
    return r.to_wire()


def counts(book: Book, name: str) -> list[int]:
    """A counter of the open window of second 0, per class (the queries here are due in it)."""
    return getattr(book.win, name)[: book.nc]


def sent(book: Book, now: int) -> bytes:
    slot = book.take_slot(now)
    c, q = book.next_query()
    book.sent_query(slot, c, q, now)
    return bytes([slot >> 8, slot & 255]) + HEADER[2:] + q


def test_completed_lost_late() -> None:
    book = Book(spec([{"name": "a", "queries": ["www.example.test"]}], timeout_s=1.0))
    q1, q2, q3 = sent(book, T0), sent(book, T0), sent(book, T0)
    book.reply(reply_to(q1), T0 + 250_000)  # 250 µs
    book.sweep(T0 + 999 * MS)
    assert counts(book, "lost") == [0] and book.outstanding == 2
    book.sweep(T0 + 1001 * MS)
    assert counts(book, "lost") == [2] and book.outstanding == 0
    book.reply(reply_to(q2), T0 + 1500 * MS)  # after the timeout: late, not a sample
    book.reply(reply_to(q2), T0 + 1500 * MS)  # a duplicate matches nothing any more
    assert counts(book, "late") == [1] and book.unexpected == 1
    assert counts(book, "completed") == [1] and book.win.lats[0] == {250: 1}
    assert counts(book, "sent") == [3]
    assert counts(book, "sent")[0] == counts(book, "completed")[0] + counts(book, "lost")[0]
    del q3


def test_reply_past_timeout_before_the_sweep_is_lost_and_late() -> None:
    book = Book(spec([{"name": "a", "queries": ["www.example.test"]}], timeout_s=1.0))
    q = sent(book, T0)
    book.reply(reply_to(q), T0 + 1200 * MS)
    assert (
        counts(book, "completed") == [0]
        and counts(book, "lost") == [1]
        and counts(book, "late") == [1]
    )


def test_reply_with_other_question_is_unexpected() -> None:
    book = Book(spec([{"name": "a", "queries": ["www.example.test", "mail.example.test"]}]))
    q = sent(book, T0)
    other = dns.message.make_query("other.test", "A")
    other.id = (q[0] << 8) | q[1]
    book.reply(dns.message.make_response(other).to_wire(), T0 + MS)
    book.reply(b"\x00\x01", T0 + MS)
    assert book.unexpected == 2 and counts(book, "completed") == [0] and book.outstanding == 1


def test_rcodes_and_wrong_answers() -> None:
    book = Book(
        spec(
            [
                {"name": "blocked", "queries": ["b.test"], "expect": {"addresses": ["0.0.0.0"]}},
                {"name": "ok", "queries": ["a.test"], "expect": {"rcodes": ["NOERROR"]}},
            ]
        )
    )
    b1, a1, b2, a2 = (sent(book, T0) for _ in range(4))
    book.reply(reply_to(b1, "0.0.0.0"), T0 + MS)
    book.reply(reply_to(b2, "192.0.2.1"), T0 + MS)
    book.reply(reply_to(a1), T0 + MS)
    book.reply(reply_to(a2, rcode=3), T0 + MS)
    assert counts(book, "wrong") == [1, 1]
    iv = book.interval(1.0, 100.0, 0, 0, CLOSE_ALL)
    [window] = iv.windows
    assert window.classes[1].rcodes == {0: 1, 3: 1}
    assert window.classes[0].lat_us == {1000: 2}
    assert window.problems() == []
    assert counts(book, "sent") == [0, 0]  # the window left with the interval


def test_is_wrong_when_no_address() -> None:
    classes = build_classes(
        LoadConfig(mix=[{"name": "b", "queries": ["b.test"], "expect": {"addresses": ["::"]}}]).mix,
        Path("."),
        1,
    )
    q = dns.message.make_query("b.test", "AAAA")
    nx = dns.message.make_response(q)
    nx.set_rcode(3)
    assert is_wrong(classes[0], nx.to_wire(), len(q.to_wire()) - 12)


def test_pacer_absolute_deadlines() -> None:
    p = Pacer(1000.0, start_ns=0)
    assert p.due(0) == 1
    assert p.due(999_999) == 1
    assert p.due(1 * MS) == 2
    assert p.due(10_000 * MS) == 10_001  # no drift: counted from the start
    assert p.deadline_ns(5) == 5 * MS


def test_pacer_rate_change_rebases_without_burst_or_gap() -> None:
    p = Pacer(1000.0, start_ns=0)
    sent = p.due(100 * MS)  # 101 sent by 100 ms
    p.set_rate(2000.0, sent, 100 * MS)
    assert p.due(100 * MS) == sent  # the next one is due at the old schedule's next slot
    assert p.due(101 * MS) == sent + 1
    assert p.due(111 * MS) - p.due(101 * MS) == 20


def test_pacer_flat_out_and_backlog_cap() -> None:
    assert Pacer(0.0, 0).due(10**12) == 0
    p = Pacer(1000.0, 0)
    dropped = p.behind(sent=0, now_ns=5000 * MS)
    assert dropped == 5001 - 1000
    p.skip(dropped)
    assert p.due(5000 * MS) == 1000


def window(lat_us: dict[int, int], sent: int, completed: int, second: int = 0) -> Window:
    cw = ClassWindow(due=sent, sent=sent, completed=completed, lost=sent - completed, lat_us=lat_us)
    cw.rcodes = {0: completed}
    return Window(second, [cw])


def test_histograms_merge_not_average() -> None:
    stats = MixStats(["a"], highest_us=2_000_000)
    stats.add_window(window({100: 99}, 99, 99))  # a fast worker
    stats.add_window(window({10_000: 1}, 2, 1))  # a slow one: 1 of 100 samples at 10 ms
    lat = stats.all.latency_ms()
    assert lat["p50"] == pytest.approx(0.1, rel=0.01)
    assert lat["p99"] == pytest.approx(0.1, rel=0.01)
    assert lat["p999"] == pytest.approx(10.0, rel=0.01)
    assert lat["max"] == 10.0 and lat["min"] == 0.1
    assert lat["avg"] == pytest.approx((99 * 100 + 10_000) / 100 / 1000)
    assert stats.all.sent == 101 and stats.all.lost == 1


def test_window_fields_have_the_design_names() -> None:
    stats = MixStats(["a", "b"], highest_us=2_000_000)
    w = window({100: 10}, 10, 10)
    w.classes.append(ClassWindow(due=5, skipped=5))
    stats.add_window(w)
    stats.add_window(Window(1, [ClassWindow(), ClassWindow()]))
    fields = stats.fields()
    assert set(fields) == {"a", "b", "all"}
    a = fields["a"]
    assert a["rate_target"] == 5.0 and a["rate_achieved"] == 5.0  # 10 over 2 s
    assert fields["all"]["due"] == 15 and fields["all"]["skipped"] == 5
    assert a["rcode_noerror"] == 10 and a["lat_p999_ms"] == 0.1
    for key in ("sent", "completed", "lost", "late", "wrong_answers", "lat_min_ms", "lat_max_ms"):
        assert key in a
    assert "lat_p50_ms" not in fields["b"]  # no samples: absent, not zero


def test_a_reset_window_reports_like_a_fresh_one() -> None:
    used = MixStats(["a"], highest_us=2_000_000)
    used.add_window(window({10_000: 5, 50: 3}, 8, 8))
    used.reset()
    fresh = MixStats(["a"], highest_us=2_000_000)
    assert used.fields() == fresh.fields()
    for stats in (used, fresh):
        stats.add_window(window({100: 10}, 10, 10))
    assert used.fields() == fresh.fields()
    assert used.all.latency_ms() == fresh.all.latency_ms()  # stddev included
    assert used.all.latency_ms()["max"] == 0.1  # nothing left of the 10 ms samples


def test_window_latency_skips_stddev_the_summary_keeps_it() -> None:
    stats = ClassStats(highest_us=2_000_000)
    assert "stddev" not in stats.latency_ms(stddev=False)
    stats.add(ClassWindow(sent=2, completed=2, lat_us={100: 1, 300: 1}))
    assert "stddev" not in stats.latency_ms(stddev=False)
    assert stats.latency_ms()["stddev"] == pytest.approx(0.1, rel=0.01)
    assert stats.summary()["latency_ms"]["stddev"] == pytest.approx(0.1, rel=0.01)


def test_latency_above_the_range_is_clamped() -> None:
    stats = ClassStats(highest_us=1000)
    stats.add(ClassWindow(sent=1, completed=1, lat_us={5000: 1}))
    assert stats.latency_ms()["p99"] == pytest.approx(1.0, rel=0.01)


def test_result_json_keys() -> None:
    stats = MixStats(["a"], highest_us=2_000_000)
    stats.add_window(window({100: 10}, 10, 10))
    result = result_from(stats, "builtin", 1.0, 10.0)
    assert isinstance(result, LoadResult)
    d = result.to_json_dict()
    assert list(d) == [
        "engine", "duration_s", "due", "skipped", "refused", "target_rate", "achieved_rate",
        "qps", "sent", "completed",
        "lost", "late", "rcodes", "latency_ms", "generator_bound", "classes",
    ]  # fmt: skip
    assert list(d["latency_ms"]) == ["min", "avg", "p50", "p95", "p99", "p999", "max", "stddev"]
    assert d["rcodes"] == {"NOERROR": 10} and d["classes"]["a"]["sent"] == 10


def test_generator_bound() -> None:
    assert not is_generator_bound(1000, 10_000, 10.0, 0)
    assert is_generator_bound(1000, 9_000, 10.0, 0)
    assert is_generator_bound(1000, 10_000, 10.0, 5)
    assert not is_generator_bound(0, 5, 10.0, 0)


def test_longest_silence_between_answers_goes_into_the_interval() -> None:
    book = Book(spec([{"name": "a", "queries": ["www.example.test"]}]))
    book.last_answer_ns = 0
    book.answered(10_000_000)  # 10 ms after the start
    book.answered(15_000_000)
    book.answered(1_215_000_000)  # a 1.2 s silence ended here
    book.answered(1_220_000_000)
    iv = book.interval(1.0, 500.0, 0, 0, 0)
    assert iv.max_gap_ns == 1_200_000_000 and iv.max_gap_end_ns == 1_215_000_000
    # The next interval starts afresh; a silence still going on counts at the end.
    book.silence_until(4_220_000_000)
    iv = book.interval(1.0, 0.0, 0, 0, 0)
    assert iv.max_gap_ns == 3_000_000_000 and iv.max_gap_end_ns == 4_220_000_000


def test_socket_counts_sum_the_intervals_of_loops_that_keep_them() -> None:
    counted = SocketCounts()
    for sent, received in ((100, 98), (50, 51)):
        iv = Interval(0, 1.0, 100.0, 0, 0)
        iv.sockets_counted, iv.socket_sent, iv.socket_received = True, sent, received
        counted.add(iv)
    want = {"socket_sent": 150, "socket_received": 149, "send_failed": 0}
    assert counted.as_dict() == want
    counted.add(Interval(1, 1.0, 100.0, 0, 0))  # a loop that keeps none: no figures
    assert counted.as_dict() is None
    assert SocketCounts().as_dict() is None
    # a replaced runner's counts and the current one's; one without them: none at all
    assert engine_counters([want, want]) == {k: 2 * v for k, v in want.items()}
    assert engine_counters([want, None]) is None
