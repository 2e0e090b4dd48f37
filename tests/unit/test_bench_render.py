"""Bench criteria and renderings, from a hand-made result."""

from __future__ import annotations

from typing import Any

from soak.bench.criteria import evaluate
from soak.bench.render_result import render_html, render_markdown, render_text
from soak.config.bench import BenchCriteria


def run(rate: float, p99: float, lost_ratio: float = 0.0) -> dict[str, Any]:
    return {
        "offered_qps": rate,
        "answered_qps": rate,
        "latency_ms": {"avg": 0.1, "stddev": 0.05, "p50": 0.08, "p99": p99, "p999": 2 * p99},
        "target_cores": 0.5,
        "generator_cores": 0.3,
        "cpu_us_per_query": 50.0,
        "counters": {"querylog_dropped_total": 12.0},
        "limit": {"kind": "", "reason": ""},
        "lost_ratio": lost_ratio,
    }


def result(classes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "bench-x",
        "target": {"name": "pdns-recursor", "version": "4.8"},
        "engine": "builtin",
        "environment": {"kernel": "6.1", "machine_cpus": 2},
        "classes": classes,
        "criteria": evaluate(classes, BenchCriteria(capacity_qps_min={"all": 5000})),
        "passed": True,
    }


CACHED = {
    "name": "cached",
    "notes": [],
    "saturation": {
        "qps": {
            "median": 40000.0,
            "best": 41000.0,
            "low": 39000.0,
            "high": 41000.0,
            "spread_pct": 5.0,
            "n": 3,
        },
        "avg_ms": 1.2,
        "target_cores": 1.0,
        "generator_cores": 1.0,
        "cpu_us_per_query": 25.0,
        "lost": 0,
        "limit": {"kind": "machine", "reason": "share 2 CPUs"},
    },
    "knee": {
        "floor_p50_ms": 0.1,
        "slo_p50_ms": 1.1,
        "capacity_qps": 39000.0,
        "within_slo_qps": 36000.0,
        "knee_low_qps": 36000.0,
        "knee_high_qps": 38000.0,
        "knee_qps": 37000.0,
        "width_pct": 5.5,
        "generator_bound": False,
        "steps": [{"offered_qps": 1000.0, "p50_ms": 0.1}, {"offered_qps": 38000.0, "p50_ms": 9.0}],
    },
    "fixed": [run(1000, 0.5), run(10000, 3.0, 0.01)],
}


def test_criteria_per_class_and_all() -> None:
    crit = BenchCriteria(
        capacity_qps_min={"all": 50000, "cached": 30000},
        knee_qps_min={"cached": 40000},
        fixed_p99_ms_max={"all": 2.0},
        lost_ratio_max=0.001,
    )
    got = {c["name"]: c["ok"] for c in evaluate([CACHED], crit)}
    assert got == {
        "capacity cached": True,  # the class's own floor wins over `all`
        "knee cached": False,
        "p99 cached @ 1000 q/s": True,
        "lost cached @ 1000 q/s": True,
        "p99 cached @ 10000 q/s": False,
        "lost cached @ 10000 q/s": False,
    }


def test_renderings_carry_the_seed_tables() -> None:
    r = result([CACHED])
    text = render_text(r)
    for title in ("Throughput at saturation", "Saturation knee", "Latency at fixed rates"):
        assert title in text
    assert "40,000" in text and "25.0 µs" in text and "machine-bound" in text
    assert "[36,000 ; 38,000] q/s" in text and "querylog_dropped_total" in text
    md = render_markdown(r)
    assert "| cached | 40,000 | 41,000 |" in md
    html = render_html(r)
    assert 'data-series="cached p50" data-points="4"' in html
