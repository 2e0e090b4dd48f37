"""The replay's ledger windows: a replay that raised closes what it left open with
every query in it counted once."""

from __future__ import annotations

from soak.load.ledger import Window
from soak.load.replay import ReplayWindows
from soak.words import loops_text


def test_close_all_ends_in_flight_abandoned_and_unsent_skipped() -> None:
    ledger = ReplayWindows(2)
    closed: list[Window] = []
    ledger.on_window = closed.append
    for second, c, what, n in [
        (3, 0, "due", 5), (3, 0, "sent", 5),
        (3, 1, "due", 2), (3, 1, "sent", 1),  # one due, counted, its send raised
        (4, 1, "due", 1), (4, 1, "skipped", 1),
    ]:  # fmt: skip
        ledger.count(second, c, what, n)
    ledger.inflight[3] = 6
    for how in ("completed", "completed", "completed", "lost"):  # two left in flight
        ledger.ended(3, 0, how, latency_us=250)
    ledger.close_all()
    assert [w.second for w in closed] == [3, 4] and not ledger.windows and not ledger.busy()
    first = closed[0].classes
    assert (first[0].abandoned, first[0].skipped) == (1, 0)
    assert (first[1].abandoned, first[1].skipped) == (1, 1)
    assert all(w.problems() == [] for w in closed)
    assert sum(cw.due for cw in ledger.per_class) == 8


def test_the_closed_windows_latencies_are_kept_in_one_histogram_per_class() -> None:
    """What `soak load --replay` reports its p50/p99 from: every answered query of a
    closed window, once, in the bounded histogram (soak.histogram)."""
    ledger = ReplayWindows(2)
    for second in (0, 1):
        ledger.count(second, 0, "due", 3)
        ledger.count(second, 0, "sent", 3)
        ledger.inflight[second] = 3
        for us in (100, 200, 30_000):
            ledger.ended(second, 0, "completed", latency_us=us)
    ledger.close_windows(2)
    a, b = ledger.hists
    assert (a.total, b.total) == (6, 0)
    assert a.quantile_ms(0.5) == 0.2 and a.latency_ms()["max"] == 30.0


def test_loops_are_said_as_a_fraction() -> None:
    assert [loops_text(x) for x in (1, 2, 8 / 3, 0.5)] == [
        "1 loop", "2 loops", "2.67 loops", "0.5 loops",
    ]  # fmt: skip
