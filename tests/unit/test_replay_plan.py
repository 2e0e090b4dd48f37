"""The replay's plan: send times per loop, speed and rate, classes, fresh names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from soak.errors import InputError
from soak.load.replay import Plan
from soak.traffic.capture_file import UDP, Capture, Query
from soak.traffic.replay_config import ReplayConfig

A, AAAA, MX = 1, 28, 15


def name(text: str) -> bytes:
    return b"".join(bytes([len(p)]) + p.encode() for p in text.split(".")) + b"\0"


def capture() -> Capture:
    qs = [
        Query(0, 0, 0, 0x100, A, UDP, name("a.test")),
        Query(100_000_000, 1, 0, 0x100, AAAA, UDP, name("b.test")),
        Query(200_000_000, 0, 0, 0x100, MX, UDP, name("mail.other")),
        Query(300_000_000, 1, 0, 0x100, A, UDP, name("a.test")),
    ]
    return Capture("t", ["x", "y"], qs)


def cfg(**fields: object) -> ReplayConfig:
    return ReplayConfig.model_validate({"file": Path("c"), **fields})


def test_one_loop_by_default_and_loops_follow_each_other() -> None:
    plan = Plan(cfg(), capture(), 1)
    assert [p.due_ns for p in plan.queries(None)] == [0, 100_000_000, 200_000_000, 300_000_000]
    # a loop lasts the span plus one mean gap: the next loop's first query comes on time
    dues = [p.due_ns for p in plan.queries(1_000_000_000)]
    assert dues[4:6] == [400_000_000, 500_000_000] and len(dues) == 10
    assert [p.loop for p in Plan(cfg(loops=3), capture(), 1).queries(None)][-1] == 2


def test_speed_and_rate() -> None:
    assert [p.due_ns for p in Plan(cfg(speed="2x"), capture(), 1).queries(None)][-1] == 150_000_000
    plan = Plan(cfg(rate_qps="100"), capture(), 1)  # captured at 10 q/s
    assert plan.speed == pytest.approx(10) and plan.rate_qps == pytest.approx(100)
    with pytest.raises(ValidationError):
        cfg(speed=2, rate_qps=10)
    with pytest.raises(ValidationError):
        cfg(speed="fast")


def test_classes_by_qtype_or_by_rule() -> None:
    plan = Plan(cfg(), capture(), 1)
    assert plan.classes.names == ["A", "MX", "AAAA"]
    assert [plan.classes.names[p.cls] for p in plan.queries(None)] == ["A", "AAAA", "MX", "A"]
    rules = [{"name": "mail", "pattern": r"^mail\."}, {"name": "v6", "qtypes": ["aaaa"]}]
    plan = Plan(cfg(classes=rules), capture(), 1)
    assert [plan.classes.names[p.cls] for p in plan.queries(None)] == [
        "other",
        "v6",
        "mail",
        "other",
    ]
    with pytest.raises(InputError, match="unknown record type"):
        Plan(cfg(classes=[{"name": "x", "qtypes": ["NOPE"]}]), capture(), 1)


def test_rewrite_fresh_per_loop_same_per_seed() -> None:
    c = cfg(loops=3, rewrite={"zones": ["z1.test", "z2.test"], "from_loop": 1})
    q = [p.question for p in Plan(c, capture(), 5).queries(None)]
    loops = [q[0:4], q[4:8], q[8:12]]
    assert loops[0][0].startswith(name("a.test"))  # loop 0 as captured
    assert not set(loops[1]) & set(loops[2]) and not set(loops[0]) & set(loops[1])
    assert loops[1][0] == loops[1][3] and loops[2][0] == loops[2][3]  # repeats stay repeats
    # `<12 hex>.<zone>`: a 12-byte label, then one of the zones
    assert all(x[0] == 12 and x[13:].startswith((name("z1.test"), name("z2.test"))) for x in q[4:])
    assert [p.question for p in Plan(c, capture(), 5).queries(None)] == q
    assert [p.question for p in Plan(c, capture(), 6).queries(None)][4:] != q[4:]


def test_offsets_quantiles_stay_small() -> None:
    from soak.load.replay import Offsets, OffsetTotals

    totals, window = OffsetTotals(), Offsets()
    size_kib = memory_kib(totals)
    for us in range(1, 101):
        totals.add(us)
        window.add(us)
    for us in range(1_000_000, 1_100_000):  # far behind: three significant digits kept
        totals.add(us)
        window.add(us)
    assert len(window.counts) < 120 and totals.buckets_used() == len(window.counts)
    assert totals.quantiles() == window.quantiles()
    assert totals.quantiles()["p50"] == 1_040_000 and totals.quantiles()["max"] == 1_090_000
    for us in (5_000_000_000, 9_999_999_999_999, -3):  # past the last bucket; early
        totals.add(us)
    assert totals.quantiles()["max"] == 9_990_000_000_000
    assert memory_kib(totals) == size_kib  # allocated once, whatever was added


def memory_kib(totals: object) -> int:
    return sum(sys.getsizeof(v) for v in vars(totals).values() if not isinstance(v, int)) // 1024


def test_a_question_asked_again_is_one_object() -> None:
    plan = Plan(cfg(), capture(), 1)
    sent = [p.question for p in plan.queries(None)]
    assert sent[0] == sent[3] == name("a.test") + b"\x00\x01\x00\x01"
    assert sent[0] is sent[3]  # the capture's a.test A, twice: one bytes object
    assert len({id(q) for q in sent}) == 3


def test_a_start_continues_the_loops_and_names_of_a_replay_from_the_origin() -> None:
    """A replay started (or restarted) at an offset plays what one from the origin would
    have played from there: the same times, loop numbers and rewritten names."""
    c = cfg(speed="2x", rewrite={"zones": ["z.test"], "from_loop": 1})
    whole = list(Plan(c, capture(), 5).queries(2_000_000_000))  # a loop lasts 200 ms
    start_ns = 1_010_000_000  # loop 5, after its first query (due at 1,000 ms)
    later = list(Plan(c, capture(), 5).queries(2_000_000_000, start_ns))
    assert later == [p for p in whole if p.due_ns >= start_ns]
    assert (later[0].loop, later[0].index, later[0].due_ns) == (5, 1, 1_050_000_000)
    assert later[0].question == whole[21].question != whole[1].question  # loop 5's name
    # at a loop's very end: the next loop's first query
    assert Plan(c, capture(), 5).position(1_190_000_000) == (6, 0)
    # what a stopped replay left unsent, by time and class, with no names made
    dues = list(Plan(c, capture(), 5).dues(5, 1, 1_300_000_000))
    assert dues == [(p.due_ns, p.cls) for p in whole if 1_050_000_000 <= p.due_ns < 1_300_000_000]
