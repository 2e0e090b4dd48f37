"""Quantiles as a witness: a whole's p99 lies within its parts' (a mixture's quantile
lies between its components'), the run against its phases, `all` against its classes."""

from __future__ import annotations

from typing import Any

from soak.report.witnesses import quantile_disagreements


def report(phase_p99s: list[float], class_p99s: dict[str, float]) -> dict[str, Any]:
    return {
        "phases": [
            {"name": f"p{i}", "metrics": {"lat_p99_ms": {"p99": v}, "lat_avg_ms": 1.0}}
            for i, v in enumerate(phase_p99s)
        ],
        "classes": [{"class": name, "p99_ms": v} for name, v in class_p99s.items()],
    }


def test_a_whole_within_its_parts_agrees() -> None:
    doc = report([22.527, 36.351], {"all": 3.1, "hit": 2.0, "miss": 9.9})
    assert quantile_disagreements(doc, {"latency_ms": {"p99": 24.703, "avg": 1.0}}) == []


def test_a_whole_outside_its_parts_is_named() -> None:
    doc = report([22.527, 36.351], {"all": 12.0, "hit": 2.0, "miss": 9.9})
    found = quantile_disagreements(doc, {"latency_ms": {"p99": 1.535, "avg": 1.0}})
    assert found == [
        "result.json p99 1.535 ms lies outside its parts' 22.527 .. 36.351 ms",
        "classes `all` p99 12 ms lies outside its parts' 2 .. 9.9 ms",
    ]


def test_parts_without_answers_say_nothing() -> None:
    doc = report([], {"all": 3.0})
    assert quantile_disagreements(doc, {"latency_ms": {"p99": None}}) == []


def test_a_phase_without_its_p99_bounds_nothing() -> None:
    # a phase with no answers may not bound the whole: no claim is made
    doc = report([3.0, None], {})  # type: ignore[list-item]
    assert quantile_disagreements(doc, {"latency_ms": {"p99": 5.0}}) == []
    doc = report([3.0, 4.0], {})
    assert quantile_disagreements(doc, {"latency_ms": {"p99": 5.0}}) == [
        "result.json p99 5 ms lies outside its parts' 3 .. 4 ms"
    ]
