"""Agents' results merged from their histograms, never from averaged percentiles."""

from __future__ import annotations

import json
import random

from soak.histogram import LatencyHistogram
from soak.load.fleet.merge import AgentTotals, merge_agents, tag_agent
from soak.points import Point


def _agent(index: int, latencies_us: list[int], lost: int = 0) -> AgentTotals:
    hist = LatencyHistogram()
    for us in latencies_us:
        hist.record(us)
    n = len(latencies_us)
    return AgentTotals(
        agent=index,
        sent=n + lost,
        completed=n,
        lost=lost,
        abandoned=0,
        late=0,
        rate_target_qps=200.0,
        duration_s=8.0,
        hist=hist,
        rcodes={"NOERROR": n},
    )


def _latencies(seed: int, n: int, scale_us: float) -> list[int]:
    rng = random.Random(seed)
    return [max(1, int(rng.expovariate(1 / scale_us))) for _ in range(n)]


def test_merged_p99_is_the_p99_of_the_combined_histograms() -> None:
    # Three agents with very different latencies: averaging their p99s would be wrong.
    lats = [_latencies(1, 5000, 150), _latencies(2, 3000, 900), _latencies(3, 200, 20_000)]
    agents = [_agent(i, lat, lost=i) for i, lat in enumerate(lats)]
    merged = merge_agents(agents)
    combined = LatencyHistogram()
    for lat in lats:
        for us in lat:
            combined.record(us)
    for pct in (50.0, 95.0, 99.0, 99.9):
        assert merged.hist.value_at_percentile_us(pct) == combined.value_at_percentile_us(pct)
    assert merged.latency_ms["p99"] == combined.quantile_ms(0.99)
    averaged = sum(a.hist.value_at_percentile_us(99.0) or 0 for a in agents) / 3
    assert merged.hist.value_at_percentile_us(99.0) != averaged
    assert merged.hist.total == 8200
    assert merged.sent == 8200 + 0 + 1 + 2 and merged.lost == 3
    assert merged.rcodes == {"NOERROR": 8200}
    assert merged.rate_target_qps == 600.0
    assert merged.accounting_errors == []


def test_accounting_checked_per_agent_and_in_the_sum() -> None:
    good = _agent(0, [100, 200])
    bad = _agent(1, [100])
    bad.sent += 1  # one query neither completed nor lost nor abandoned
    merged = merge_agents([good, bad])
    assert merged.accounting_errors == [
        "agent 1: sent 2 != completed 1 + lost 0 + abandoned 0",
        "all agents: sent 4 != completed 3 + lost 0 + abandoned 0",
    ]


def test_totals_travel_as_json_and_merge_the_same() -> None:
    agents = [_agent(i, _latencies(i, 500, 300 * (i + 1))) for i in range(3)]
    wire = [json.loads(json.dumps(a.to_json_dict())) for a in agents]
    back = [AgentTotals.from_json_dict(d) for d in wire]
    a, b = merge_agents(agents), merge_agents(back)
    assert a.latency_ms == b.latency_ms
    assert a.to_json_dict() == b.to_json_dict()


def test_points_carry_the_agent_tag() -> None:
    p = Point("load", {"sent": 10}, 1_000_000_000, {"class": "all"})
    (tagged,) = tag_agent([p], 2)
    assert tagged.tags == {"class": "all", "agent": "2"}
    assert tagged.fields == p.fields and tagged.time_ns == p.time_ns
