"""A dnstap capture's count (result.json `capture.counted`) as a witness: at least every
query answered, no more than were sent besides a share of probes; said in one line."""

from __future__ import annotations

from typing import Any

from soak.clock import NS_PER_S
from soak.report.witnesses import (
    CAPTURE,
    CAPTURE_BESIDES,
    Window,
    capture_count,
    capture_disagreements,
    server_count_words,
)

# 20 seconds of 300 q/s, 298 answered each; the capture's span ends after them.
WINDOWS = [Window(i * NS_PER_S, 300, 298) for i in range(20)]
UNTIL_NS = 30 * NS_PER_S


def capture(n: float, **counted: Any) -> dict[str, Any]:
    return {
        "queries": n,
        "counted": {"client_queries": n, "from_ns": 0, "until_ns": UNTIL_NS, **counted},
    }


def test_a_count_between_answered_and_sent_agrees_and_is_said() -> None:
    assert capture_disagreements(WINDOWS, capture(6_000)) == []
    assert capture_disagreements(WINDOWS, capture(5_960)) == []  # datagrams lost on the way
    words = server_count_words(WINDOWS, capture_count(capture(6_003)), CAPTURE, CAPTURE_BESIDES)
    assert words == "the dnstap capture counted 6,000 of the 6,000 queries sent (3 besides: probes)"


def test_too_few_or_too_many_are_named() -> None:
    assert capture_disagreements(WINDOWS, capture(3_000)) == [
        "the dnstap capture counted 3,000 queries, fewer than the 5,960 the ledger has"
        " answered by then"
    ]
    (line,) = capture_disagreements(WINDOWS, capture(12_000))
    assert line.startswith("the dnstap capture counted 12,000 queries, more than the 6,000")


def test_no_count_is_no_witness() -> None:
    assert capture_count(None) == [] and capture_count({"queries": 0}) == []
    assert capture_disagreements(WINDOWS, {"queries": 5}) == []
    assert server_count_words(WINDOWS, [], CAPTURE) == ""
