"""The replay's ledger windows: a replay that raised closes what it left open with
every query in it counted once."""

from __future__ import annotations

from soak.load.ledger import Window
from soak.load.replay import ReplayWindows


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
