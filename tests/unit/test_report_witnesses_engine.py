"""The engine's socket counters as a witness: the ledger's sent is what the sockets took
(and the refused counted sent), its completed no more than the replies they read; the
windows before the engine's start (a service that resumed a run) are not held to them;
counters missing are said, never passed."""

from __future__ import annotations

from typing import Any

from soak.clock import NS_PER_S
from soak.report.witnesses import (
    Window,
    engine_counter_words,
    engine_counters_missing,
    engine_disagreements,
)

FROM_NS = 100 * NS_PER_S
# Three windows of the engine (stamped at their seconds' ends) and one of a part before.
WINDOWS = [
    Window(FROM_NS, 999, 999),
    *(Window(FROM_NS + i * NS_PER_S, 100, 98) for i in (1, 2, 3)),
]


def totals(sent: int, received: int, failed: int = 0, **more: Any) -> dict[str, Any]:
    counters = {"socket_sent": sent, "socket_received": received, "send_failed": failed}
    return {"engine_counters": {**counters, "from_ns": FROM_NS}, **more}


def test_counters_that_agree_say_so() -> None:
    assert engine_disagreements(WINDOWS, totals(298, 296, failed=2)) == []
    words = engine_counter_words(WINDOWS, totals(298, 296, failed=2))
    assert words == (
        "the engine's sockets took 298 queries and read 296 replies (2 late, duplicate or stray)"
    )


def test_a_query_counted_sent_that_no_socket_took_is_named() -> None:
    assert engine_disagreements(WINDOWS, totals(299, 294)) == [
        "the ledger's sent 300 != the 299 queries its sockets took (0 of them refused"
        " and counted sent)"
    ]
    assert engine_disagreements(WINDOWS, totals(301, 294)) != []


def test_more_answers_than_replies_read_is_named() -> None:
    assert engine_disagreements(WINDOWS, totals(300, 293)) == [
        "the ledger's completed 294 above the 293 replies its sockets read"
    ]


def test_missing_counters_are_skipped_with_their_reason() -> None:
    for missing in ({}, None, {"replay": {"clients": 3}}, totals(0, 0, load_restarts=1)):
        assert engine_disagreements(WINDOWS, missing) == []
        reason = engine_counters_missing(missing)
        assert reason
        assert engine_counter_words(WINDOWS, missing).endswith(reason)


def test_a_replays_counters_are_held_and_a_dead_plays_are_said() -> None:
    """A replay's counts survive its restarts (each play tells them); a play whose
    process died took them with it, and that is the reason given."""
    replay = {"replay": {"clients": 3}, "load_restarts": 1}
    assert engine_counters_missing(totals(300, 294, **replay)) is None
    assert engine_disagreements(WINDOWS, totals(299, 294, **replay)) != []
    lost = "the replay's process died 1 time(s) before telling its socket counts"
    dead = {**replay, "engine_counters_lost": lost}
    assert engine_counters_missing(dead) == lost
    assert engine_disagreements(WINDOWS, dead) == []
    assert engine_counter_words(WINDOWS, dead).endswith(lost)
