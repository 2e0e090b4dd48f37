"""Execution segments: the agents' shares of a load config."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.errors import InputError
from soak.load.load_config import LoadConfig
from soak.load.queries import build_classes
from soak.load.segments import Segment, all_segments, segment_config


def _cfg(**kw: object) -> LoadConfig:
    data: dict[str, object] = {
        "rate_qps": 1000,
        "flows": 128,
        "workers": 2,
        "mix": [
            {"name": "local", "weight": 3, "queries": ["www.example.test A"]},
            {"name": "miss", "weight": 1, "random": {"zone": "miss.example", "label_length": 12}},
        ],
    }
    data.update(kw)
    return LoadConfig.model_validate(data)


@pytest.mark.parametrize("rate", [600, 1000, 1, 7, 999.999, 12345.678, 0.5])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_rate_shares_are_equal_parts(rate: float, count: int) -> None:
    """Equal parts interleave exactly (test_load_ledger: due exactly rate x seconds)."""
    cfg = _cfg(rate_qps=rate)
    parts = [segment_config(cfg, s, seed=1) for s in all_segments(count)]
    assert {p.rate_qps for p in parts} == {rate / count}
    assert sum(p.rate_qps for p in parts) == pytest.approx(rate)


def test_flows_and_workers_split_and_config_valid() -> None:
    cfg = _cfg(rate_qps=1000, flows=128, workers=2, max_outstanding=100)
    parts = [segment_config(cfg, s, seed=42) for s in all_segments(3)]
    assert [p.flows for p in parts] == [42, 43, 43]
    assert sum(p.flows for p in parts) == 128
    assert [p.workers for p in parts] == [1, 1, 1]  # at least one each
    assert sum(p.max_outstanding for p in parts) == 100
    for p in parts:
        again = LoadConfig.model_validate(p.model_dump())
        assert again == p
        assert p.mix == cfg.mix and p.protocol == cfg.protocol and p.timeout_s == cfg.timeout_s


def test_random_names_differ_per_agent() -> None:
    cfg = _cfg()
    seeds = [segment_config(cfg, s, seed=42).seed for s in all_segments(4)]
    assert len(set(seeds)) == 4
    assert seeds == [segment_config(cfg, s, seed=42).seed for s in all_segments(4)]  # repeatable
    names = []
    for seed in seeds:
        assert seed is not None
        miss = build_classes(cfg.mix, base_dir=Path("."), seed=seed)[1]
        assert miss.random is not None
        names.append({miss.random.next_question() for _ in range(200)})
    for i in range(4):
        for j in range(i + 1, 4):
            assert not names[i] & names[j]


@pytest.mark.parametrize("text", ["3/3", "1", "a/2", "0/0", "-1/2", ""])
def test_bad_segments(text: str) -> None:
    with pytest.raises(InputError):
        Segment.parse(text)


def test_segment_parse_round_trip() -> None:
    assert str(Segment.parse("2/5")) == "2/5"
    assert Segment.parse("0/1").share(10) == 10
