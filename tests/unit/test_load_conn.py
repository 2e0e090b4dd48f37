"""Connection policies and how connections are split between classes (pure logic)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from soak.load.conn import Policy, assign_flows
from soak.load.load_config import ConnectionPolicy, LoadConfig
from soak.load.queries import ClassQueries
from soak.load.spawn import policy_of
from soak.load.tcp import hangs_up
from soak.load.worker import Book, WorkerSpec


def test_shared_flows_carry_every_class() -> None:
    assert assign_flows(3, [1, 1], own=False) == [[0, 1, 2], [0, 1, 2]]


def test_own_flows_split_by_weight_with_at_least_one_each() -> None:
    assert assign_flows(10, [8, 1, 1], own=True) == [list(range(8)), [8], [9]]
    assert assign_flows(2, [1, 1, 1], own=True) == [[0], [1], [2]]


def test_policy_in_nanoseconds() -> None:
    cp = ConnectionPolicy(queries_per_connection=50, idle_s="200ms", reconnect_every_s="2s")
    assert policy_of(cp) == Policy(50, 200_000_000, 2_000_000_000)
    assert policy_of(cp).churns and not policy_of(None).churns


def test_bad_policy_and_protocol_are_refused() -> None:
    with pytest.raises(ValidationError):
        ConnectionPolicy(queries_per_connection=0)
    with pytest.raises(ValidationError):
        ConnectionPolicy(reconnect_every_s=0)
    with pytest.raises(ValidationError):
        LoadConfig(protocol="quic", mix=[{"name": "q", "queries": ["a.test"]}])
    with pytest.raises(ValidationError):
        LoadConfig(doh={"method": "PUT"}, mix=[{"name": "q", "queries": ["a.test"]}])


def test_hangup_fraction_spreads_evenly() -> None:
    for fraction in (0.0, 0.1, 0.25, 0.5, 1 / 3, 1.0):
        flags = [hangs_up(n, fraction) for n in range(300)]
        for k in (1, 10, 300):  # any k consecutive connections: about k x fraction
            for start in range(0, 300 - k + 1, 7):
                assert abs(sum(flags[start : start + k]) - k * fraction) < 1.0 + 1e-9
    assert not any(hangs_up(n, 0.0) for n in range(100))
    assert all(hangs_up(n, 1.0) for n in range(100))


def test_hangup_policy_is_checked_and_carried() -> None:
    cp = ConnectionPolicy(queries_per_connection=10, hangup_fraction=0.2)
    assert policy_of(cp).hangup_fraction == 0.2
    with pytest.raises(ValidationError):
        ConnectionPolicy(queries_per_connection=10, hangup_fraction=1.5)
    with pytest.raises(ValidationError, match="needs queries_per_connection"):
        ConnectionPolicy(hangup_fraction=0.2)


def test_abandoned_query_is_neither_answered_nor_lost() -> None:
    question = b"\x03www\x04test\x00\x00\x01\x00\x01"
    spec = WorkerSpec(
        index=0, host="127.0.0.1", port=53, protocol="tcp", flows=1, timeout_s=2.0,
        classes=[ClassQueries("a", 1.0, [question])], schedule=[0], start_offset=0,
        max_outstanding=10, duration_s=1.0, max_duration_s=1.0,
    )  # fmt: skip
    book = Book(spec)
    slots = []
    for t in (1000, 2000):
        slot = book.take_slot(t)
        c, q = book.next_query()
        book.sent_query(slot, c, q, t)
        slots.append((slot, t))
    book.abandon(slots[0][0], slots[0][1])
    book.abandon(slots[1][0], 999)  # not the query sent at 2000: left alone
    assert book.interval(1.0, 0.0, 0, 0, 1).windows == []  # one query still in flight
    assert book.outstanding == 1
    book.sweep(10**10)  # the other times out
    [window] = book.interval(1.0, 0.0, 0, 0, 1).windows
    (ci,) = window.classes
    assert (ci.sent, ci.abandoned, ci.lost, ci.completed) == (2, 1, 1, 0)
    assert window.problems() == []
