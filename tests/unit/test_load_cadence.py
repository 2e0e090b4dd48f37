"""The once-a-second bookkeeping of the load loops, driven by an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from soak.clock import NS_PER_S
from soak.load.cadence import Cadence
from soak.load.load_config import LoadConfig
from soak.load.queries import build_classes, mix_schedule
from soak.load.stats import Interval
from soak.load.worker import CONTROL_NS, Control, WorkerSpec
from tests.support.cadence import Clock, Outbox

S = NS_PER_S  # ns
MS = 1_000_000
T0 = 5 * S  # the clock at the start


class Taker:
    """The loop's side: the counts it reports, and the arguments it was asked with."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, int, int]] = []
        self.cursors: list[int] = []

    def __call__(
        self, interval_s: float, rate: float, backlog: int, skipped: int, cursor: int
    ) -> Interval:
        self.calls.append((interval_s, rate, backlog, skipped))
        self.cursors.append(cursor)
        return Interval(0, interval_s, rate, backlog, skipped)


class Skips:
    """The loop's side of skipped queries: (second, n) as the cadence counts them."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, second: int, n: int) -> None:
        self.calls.append((second, n))


def spec(duration_s: float = 10.0, max_duration_s: float = 60.0, rate: float = 100.0) -> WorkerSpec:
    classes = build_classes(LoadConfig(mix=[{"name": "a", "queries": ["a.test"]}]).mix, Path(), 1)
    schedule = mix_schedule([1.0])
    return WorkerSpec(
        0,
        "127.0.0.1",
        53,
        "udp",
        1,
        2.0,
        classes,
        schedule,
        0,
        100,
        duration_s,
        max_duration_s,
        rate,
    )


@pytest.fixture
def pipe() -> Iterator[tuple[Connection, Connection]]:
    parent, child = Pipe()
    yield parent, child
    parent.close()
    child.close()


def cadence(
    pipe: tuple[Connection, Connection], **kw: float
) -> tuple[Cadence, Clock, Outbox, Taker]:
    clock, out, take = Clock(T0), Outbox(), Taker()
    sp = spec(**kw)
    cad = Cadence(sp, Control(pipe[1], sp.rate_qps), out, Skips(), clock)
    return cad, clock, out, take


def test_intervals_follow_the_one_second_grid(pipe: tuple[Connection, Connection]) -> None:
    cad, _, out, take = cadence(pipe)
    assert cad.wake_ns == T0 + CONTROL_NS
    assert not cad.tick(T0 + 999 * MS, 99, take)
    assert cad.tick(T0 + S + 2 * MS, 100, take)  # a loop turn a little late
    assert cad.tick(T0 + 2 * S + 1 * MS, 200, take)
    assert [iv.interval_s for iv in out.sent] == [1.002, 0.999]
    assert cad.next_interval_ns == T0 + 3 * S  # absolute: lateness does not accumulate
    assert [c[1] for c in take.calls] == [100.0, 100.0]


def test_a_stall_is_one_long_interval_then_the_grid_restarts(
    pipe: tuple[Connection, Connection],
) -> None:
    cad, _, out, take = cadence(pipe)
    cad.tick(T0 + S, 100, take)
    assert cad.tick(T0 + 3 * S + 500 * MS, 350, take)  # the loop stalled for 2.5 s
    assert not cad.tick(T0 + 3 * S + 501 * MS, 350, take)  # no catch-up interval
    assert [iv.interval_s for iv in out.sent] == [1.0, 2.5]
    assert cad.next_interval_ns == T0 + 4 * S + 500 * MS


def test_control_sets_the_rate_and_the_interval_reports_it(
    pipe: tuple[Connection, Connection],
) -> None:
    cad, _, _, take = cadence(pipe)
    pipe[0].send(("rate", 200.0))
    cad.tick(T0 + 10 * MS, 1, take)  # before the control poll is due: not read yet
    assert cad.pacer.rate_qps == 100.0
    cad.tick(T0 + CONTROL_NS, 5, take)
    assert cad.pacer.rate_qps == 200.0
    assert cad.next_control_ns == T0 + 2 * CONTROL_NS
    # The rate and the backlog of the interval come from the same pacer (as it stands
    # after the poll): due at T0 + 1 s is 5 + 0.95 s x 200 + 1 = 196.
    cad.tick(T0 + S, 100, take)
    assert take.calls == [(1.0, 200.0, 96, 0)]


def test_stop_ends_sending_now_and_the_interval_says_rate_0(
    pipe: tuple[Connection, Connection],
) -> None:
    cad, _, _, take = cadence(pipe)
    pipe[0].send(("stop",))
    cad.tick(T0 + S, 100, take)
    assert not cad.sending and cad.send_end_ns == T0 + S
    assert take.calls == [(1.0, 0.0, 0, 0)]
    assert not cad.done(T0 + S + MS, 100, 3)  # answers still due
    assert cad.done(T0 + S + MS, 100, 0)


def test_a_closed_control_pipe_means_stop(pipe: tuple[Connection, Connection]) -> None:
    cad, _, _, take = cadence(pipe)
    pipe[0].close()
    cad.tick(T0 + CONTROL_NS, 5, take)
    assert not cad.sending


def test_sending_ends_when_every_query_due_before_the_end_has_left(
    pipe: tuple[Connection, Connection],
) -> None:
    cad, _, _, take = cadence(pipe, duration_s=1.0)
    end = T0 + S
    assert cad.due(end + 5 * S) == cad.pacer.due(end - 1) == 100  # none due after the end
    assert not cad.done(end - 1, 99, 10) and cad.sending
    assert not cad.done(end, 99, 10) and cad.sending  # one due query has not left
    assert not cad.done(end, 100, 10) and not cad.sending
    assert not cad.done(end + 2 * S - 1, 100, 1)  # waits for answers up to the timeout
    cad.tick(end + 1980 * MS, 100, take)  # next control poll at end + 2.03 s
    assert cad.deadline_ns() == end + 2 * S  # the loop wakes at the end of the timeout
    assert cad.done(end + 2 * S, 100, 1)


def test_the_hard_end_bounds_everything(pipe: tuple[Connection, Connection]) -> None:
    cad, _, _, _ = cadence(pipe, duration_s=100.0, max_duration_s=3.0)
    assert cad.send_end_ns == T0 + 3 * S
    assert cad.done(T0 + 5 * S, 0, 50)  # hard end + timeout, whatever is outstanding
    assert cad.deadline_ns() == T0 + CONTROL_NS


def test_a_backlog_beyond_a_second_is_skipped_and_reported_once(
    pipe: tuple[Connection, Connection],
) -> None:
    cad, _, _, take = cadence(pipe)
    cad.tick(T0 + 3 * S, 0, take)  # 301 due, none sent: 201 dropped, 1 s (100) left
    cad.tick(T0 + 4 * S, 100, take)
    assert take.calls == [(3.0, 100.0, 100, 201), (1.0, 100.0, 100, 0)]
    # each dropped query counts in the second it was due: 0-99 in 0, 100-199 in 1, 200 in 2
    assert isinstance(cad.skip, Skips) and cad.skip.calls == [(0, 100), (1, 100), (2, 1)]
    assert take.cursors == [2, 3]  # seconds below the next query's have all left


def test_finish_drains_then_sends_the_final_interval(
    pipe: tuple[Connection, Connection],
) -> None:
    cad, clock, out, take = cadence(pipe, duration_s=1.0)
    cad.tick(T0 + S, 100, take)
    drained: list[tuple[int, int]] = []
    clock.now = T0 + S + 300 * MS
    cad.finish(take, lambda now, end: drained.append((now, end)), 100)
    assert drained == [(T0 + S + 300 * MS, T0 + S)]  # a silence counts up to the end
    assert [iv.final for iv in out.sent] == [False, True]
    assert take.calls[-1] == (0.3, 0.0, 0, 0)
