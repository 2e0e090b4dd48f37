"""The ledger's window arithmetic: any schedule, answers, timeouts, stalls and stops.

A worker's real bookkeeping (Book and Cadence, as the loops use them) runs on a
simulated clock: queries leave when due (unless the generator stalls), answers
come back after a drawn latency or never, the load may be stopped early. Every
window that comes out keeps the invariants, and the windows add up to what was
done, to the query.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from multiprocessing import Pipe
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from soak.clock import NS_PER_S, s_to_ns
from soak.load.cadence import Cadence
from soak.load.ledger import (
    ClassWindow,
    Merger,
    Window,
    schedule_counts,
    sum_windows,
)
from soak.load.load_config import LoadConfig
from soak.load.queries import build_classes, mix_schedule
from soak.load.segments import Segment, agent_phase, rate_share_qps
from soak.load.stats import Interval
from soak.load.wire import HEADER
from soak.load.worker import Book, Control, WorkerSpec, worker_phase
from tests.support.cadence import Clock, Outbox

S = NS_PER_S
MS = 1_000_000
T0 = 7 * S
STEP_NS = 10 * MS


@dataclass
class Done:
    """What the simulated worker did, counted apart from the windows."""

    intervals: list[Interval]
    sent: int
    answered: int  # within the timeout


def worker_spec(
    rate: float,
    duration_s: int,
    timeout_s: float,
    index: int = 0,
    workers: int = 1,
    offset: float = 0.0,
) -> WorkerSpec:
    mix = [{"name": "a", "queries": ["a.test"], "weight": 3}, {"name": "b", "queries": ["b.test"]}]
    classes = build_classes(LoadConfig(mix=mix).mix, Path(), 1)
    spec = WorkerSpec(
        index, "127.0.0.1", 53, "udp", 1, timeout_s, classes,
        mix_schedule([c.weight for c in classes]), 0, 60_000, duration_s, duration_s + 10,
        rate / workers,
    )  # fmt: skip
    spec.phase = worker_phase(index, workers, offset)
    spec.begin_at_ns = T0
    return spec


def simulate(
    spec: WorkerSpec,
    latencies_ms: list[int | None],
    stall: tuple[float, float] | None = None,
    stop_at_s: float | None = None,
) -> Done:
    clock, out = Clock(T0), Outbox()
    parent, child = Pipe()
    book = Book(spec)
    cad = Cadence(spec, Control(child, spec.rate_qps), out, book.skip, clock)
    pending: list[tuple[int, int, bytes]] = []
    sent = answered = i = 0
    stopped = False
    timeout_ns = s_to_ns(spec.timeout_s)  # as the worker converts it
    while True:
        now = clock.now
        while pending and pending[0][0] <= now:
            at, _, reply = heapq.heappop(pending)
            book.reply(reply, at)
        if cad.done(now, sent, book.outstanding):
            break
        if stop_at_s is not None and not stopped and now >= T0 + stop_at_s * S:
            parent.send(("stop",))
            stopped = True
        stalled = stall is not None and T0 + stall[0] * S <= now < T0 + (stall[0] + stall[1]) * S
        if cad.sending and not stalled:
            for _ in range(cad.due(now) - sent):
                book.at_second(cad.second_of_query(sent, now))
                slot = book.take_slot(now)
                if slot < 0:
                    break
                c, q = book.next_query()
                book.sent_query(slot, c, q, now)
                lat = latencies_ms[i % len(latencies_ms)]
                i += 1
                if lat is not None:
                    reply = bytes([slot >> 8, slot & 255]) + b"\x81\x80" + HEADER[4:] + q
                    heapq.heappush(pending, (now + lat * MS, i, reply))
                    answered += lat * MS <= timeout_ns
                sent += 1
        book.sweep(now)
        if now >= cad.wake_ns:
            cad.tick(now, sent, book.interval)
        clock.now += STEP_NS
    cad.finish(book.interval, book.drain, sent)
    parent.close()
    child.close()
    return Done(out.sent, sent, answered)


def windows_of(done: Done) -> list[Window]:
    return [w for iv in done.intervals for w in iv.windows]


def total(windows: list[Window]) -> ClassWindow:
    out = ClassWindow()
    for cw in sum_windows(windows, 2):
        out.add(cw)
    return out


latencies = st.lists(st.one_of(st.none(), st.integers(0, 3000)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(1, 400),
    duration_s=st.integers(1, 5),
    timeout_ms=st.integers(50, 2500),
    lats=latencies,
    stall=st.one_of(st.none(), st.tuples(st.floats(0, 4), st.floats(0.1, 3))),
    stop_at_s=st.one_of(st.none(), st.floats(0, 5)),
)
def test_every_window_keeps_the_invariants_and_the_windows_add_up(
    rate: int,
    duration_s: int,
    timeout_ms: int,
    lats: list[int | None],
    stall: tuple[float, float] | None,
    stop_at_s: float | None,
) -> None:
    spec = worker_spec(rate, duration_s, timeout_ms / 1000)
    done = simulate(spec, lats, stall, stop_at_s)
    windows = windows_of(done)
    for w in windows:
        assert w.problems() == []
    seconds = [w.second for w in windows]
    assert seconds == sorted(set(seconds))  # each second once, in order
    assert all(0 <= s < duration_s for s in seconds)  # due seconds lie in the schedule
    t = total(windows)
    assert t.sent == done.sent
    assert t.completed == done.answered
    assert t.completed + t.lost == t.sent
    assert t.due == t.sent + t.skipped
    assert done.intervals[-1].final and done.intervals[-1].closed_below >= max(seconds, default=0)
    if stall is None and stop_at_s is None:
        assert t.due == rate * duration_s  # the schedule is exact
        assert t.skipped == 0
    elif stop_at_s is None:
        assert t.due == rate * duration_s  # a stall skips queries, it does not lose them


@settings(max_examples=25, deadline=None)
@given(
    rate=st.integers(1, 300),
    workers=st.integers(2, 4),
    duration_s=st.integers(1, 4),
    lats=latencies,
)
def test_workers_merged_by_grid_second_are_due_exactly_rate_times_seconds(
    rate: int, workers: int, duration_s: int, lats: list[int | None]
) -> None:
    merger = Merger(2, range(workers))
    runs = [
        simulate(worker_spec(rate, duration_s, 0.5, index, workers), lats)
        for index in range(workers)
    ]
    merged: list[Window] = []
    # the workers' intervals arrive interleaved, as the pipes deliver them
    for step in range(max(len(r.intervals) for r in runs)):
        for index, r in enumerate(runs):
            if step < len(r.intervals):
                iv = r.intervals[step]
                merger.add(index, iv.windows, iv.closed_below)
                if iv.final:
                    merger.end(index)
        merged += merger.take_closed()
    assert [w.second for w in merged] == list(range(len(merged)))
    for w in merged:
        assert w.problems() == []
    t = total(merged)
    assert t.due == rate * duration_s
    assert t.sent == sum(r.sent for r in runs)
    assert t.completed == sum(r.answered for r in runs)
    per_second = [w.total().due for w in merged]
    assert max(per_second) - min(per_second) <= 1  # rate per second, to the query


def merged_by_second(sources: list[list[Interval]]) -> list[Window]:
    """Sources' intervals merged by grid second, arriving interleaved as pipes (or
    heartbeats) deliver them."""
    merger = Merger(2, range(len(sources)))
    merged: list[Window] = []
    for step in range(max(len(ivs) for ivs in sources)):
        for index, ivs in enumerate(sources):
            if step < len(ivs):
                iv = ivs[step]
                merger.add(index, iv.windows, iv.closed_below)
                if iv.final:
                    merger.end(index)
        merged += merger.take_closed()
    return merged


@settings(max_examples=25, deadline=None)
@given(
    rate=st.integers(1, 300),
    agents=st.integers(2, 4),
    workers=st.lists(st.integers(1, 2), min_size=4, max_size=4),
    duration_s=st.integers(1, 3),
    lats=latencies,
)
def test_agents_interleaved_are_due_exactly_rate_times_seconds(
    rate: int, agents: int, workers: list[int], duration_s: int, lats: list[int | None]
) -> None:
    """Each agent carries its segment's share with its place in the period (agent_phase),
    with its own number of workers: their windows added by grid second are due exactly
    rate x seconds, as one machine's."""
    runs: list[Done] = []
    for a in range(agents):
        segment = Segment(a, agents)
        share = rate_share_qps(rate, segment.count)
        offset = agent_phase(segment)
        runs += [
            simulate(worker_spec(share, duration_s, 0.5, i, workers[a], offset), lats)
            for i in range(workers[a])
        ]
    merged = merged_by_second([r.intervals for r in runs])
    assert [w.second for w in merged] == list(range(len(merged)))
    for w in merged:
        assert w.problems() == []
    t = total(merged)
    assert t.due == rate * duration_s  # not up to agents - 1 more
    assert t.sent == sum(r.sent for r in runs)
    per_second = [w.total().due for w in merged]
    assert max(per_second) - min(per_second) <= 1


def test_a_window_closes_only_once_its_last_query_has_an_end() -> None:
    spec = worker_spec(10, 2, 1.0)
    done = simulate(spec, [5, None])  # every other query unanswered: lost after 1 s
    closes = [(iv.closed_below, [w.second for w in iv.windows]) for iv in done.intervals]
    # second 0's last query leaves at 0.9 s and times out at 1.9 s: out with the 2 s interval
    assert closes[0] == (0, [])
    assert closes[1] == (1, [0])


@given(
    schedule=st.lists(st.integers(0, 2), min_size=1, max_size=7),
    start=st.integers(0, 20),
    n=st.integers(0, 50),
)
def test_skipped_queries_take_their_classes_from_the_schedule(
    schedule: list[int], start: int, n: int
) -> None:
    walked = [0, 0, 0]
    for i in range(n):
        walked[schedule[(start + i) % len(schedule)]] += 1
    assert schedule_counts(schedule, start % len(schedule), n, 3) == walked


def test_exact_schedule_of_a_fractional_share() -> None:
    # 1,000 q/s over 3 workers is 333.3 each: interleaved, they are due 1,000 a second.
    runs = [simulate(worker_spec(1000, 1, 0.2, i, 3), [1]) for i in range(3)]
    assert sum(total(windows_of(r)).due for r in runs) == 1000
    assert math.isclose(sum(r.sent for r in runs), 1000)
