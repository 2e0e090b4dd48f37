"""The corpus answer diff: categories, their order, the message; asking at a bounded rate."""

from __future__ import annotations

import threading
import time
from typing import Any

from soak.upgrade.corpus import ask_corpus
from soak.upgrade.corpus_diff import MESSAGE_EXAMPLES, compare, counts, difference, summary


def rec(q: str, rcode: str = "NOERROR", answers: Any = (), flags: Any = ("AA", "QR")) -> Any:
    return {"q": q, "rcode": rcode, "flags": sorted(flags), "answers": [list(a) for a in answers]}


WWW = [("www.t. A 192.0.2.1", 3600)]


def test_each_category_and_its_precedence() -> None:
    same = rec("www.t A", answers=WWW)
    assert difference(same, rec("www.t A", answers=WWW)) is None
    no_reply = difference(same, {"q": "www.t A", "error": "timeout"})
    assert no_reply is not None and no_reply.category == "no_reply"
    assert no_reply.after == "timeout"
    # Both without a reply: not a change the upgrade made.
    assert difference({"q": "x A", "error": "timeout"}, {"q": "x A", "error": "timeout"}) is None
    # An rcode change wins over the (also changed) answers.
    rcode = difference(same, rec("www.t A", rcode="SERVFAIL"))
    assert rcode is not None and (rcode.category, rcode.before, rcode.after) == (
        "rcode",
        "NOERROR",
        "SERVFAIL",
    )
    answers = difference(same, rec("www.t A", answers=[("www.t. A 192.0.2.2", 3600)]))
    assert answers is not None and answers.category == "answers"
    ttl = difference(same, rec("www.t A", answers=[("www.t. A 192.0.2.1", 60)]))
    assert ttl is not None and ttl.category == "ttl"
    assert ttl.after == "[www.t. A 192.0.2.1 ttl 60]"
    flags = difference(same, rec("www.t A", answers=WWW, flags=("QR",)))
    assert flags is not None and (flags.category, flags.before, flags.after) == (
        "flags",
        "AA QR",
        "QR",
    )


def test_answer_order_is_not_a_difference() -> None:
    two = [("a.t. A 192.0.2.1", 60), ("a.t. A 192.0.2.2", 60)]
    assert difference(rec("a.t A", answers=two), rec("a.t A", answers=two[::-1])) is None


def test_compare_ignores_categories_and_the_message_quotes_the_first_20() -> None:
    before = [rec(f"n{i}.t A", answers=WWW) for i in range(30)]
    after = [rec(f"n{i}.t A", answers=[("www.t. A 192.0.2.1", 5)]) for i in range(25)]
    after += [rec(f"n{i}.t A", rcode="NXDOMAIN") for i in range(25, 30)]
    diffs = compare(before, after)
    assert counts(diffs) == {"rcode": 5, "ttl": 25}
    assert [d.category for d in compare(before, after, ["ttl"])] == ["rcode"] * 5
    text = summary(diffs, 30)
    assert text.startswith("30 of 30 answers differ (rcode 5, ttl 25): n0.t A: ttl ")
    assert text.count(" -> ") == MESSAGE_EXAMPLES
    assert text.endswith("; ... and 10 more (all in the JSON)")
    assert summary([], 30) == "no differences in 30 answers"


def test_ask_corpus_keeps_order_bounds_parallelism_and_rate() -> None:
    lock = threading.Lock()
    in_flight = peak = 0

    def ask(host: str, port: int, name: str, rtype: str, proto: str, timeout_s: float) -> Any:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.01)
        with lock:
            in_flight -= 1
        return {"rcode": "NOERROR", "flags": [], "answers": [[name, 1]]}

    pairs = [(f"n{i}.t", "A") for i in range(40)]
    start_s = time.monotonic()
    records = ask_corpus(
        pairs, "127.0.0.1", 53, protocol="udp", rate_qps=400, parallel=3, timeout_s=1, ask=ask
    )
    elapsed_s = time.monotonic() - start_s
    assert [r["q"] for r in records] == [f"n{i}.t A" for i in range(40)]
    assert peak <= 3
    # 40 started at 400 q/s: the last one is due 39/400 s after the first.
    assert elapsed_s >= 39 / 400
