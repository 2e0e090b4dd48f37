"""Rates take units as durations and sizes do: in a scenario, in `--set`, on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from soak.config import load_scenario
from soak.units import parse_rate_qps


@pytest.mark.parametrize(
    ("text", "qps"),
    [("1k", 1000.0), ("2000 q/s", 2000.0), ("2.5k qps", 2500.0), ("1M", 1e6), (" 300 ", 300.0),
     (750, 750.0), ("50kq/s", 50_000.0)],
)  # fmt: skip
def test_a_rate_with_a_unit(text: object, qps: float) -> None:
    assert parse_rate_qps(text) == qps


@pytest.mark.parametrize(
    ("text", "said"),
    [("1m", "not a rate: '1m' (use e.g. 2000, 1k"), ("fast", "not a rate: 'fast'"),
     ("-5", "rate must not be negative"), ("1e99", "not a rate")],
)  # fmt: skip
def test_a_rate_that_is_not_one(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said.replace("(", r"\(")):
        parse_rate_qps(text)


def test_a_scenario_writes_rates_as_users_do(tmp_path: Path) -> None:
    scenario = {
        "name": "rates",
        "target": {"runtime": "external", "pid": 1, "ports": {"dns": {"host": 53}}},
        "load": {"rate_qps": "1k", "mix": [{"name": "q", "queries": ["a.test A"]}]},
        "phases": [{"name": "a", "duration_s": "10s"}, {"name": "b", "duration_s": "10s",
                                                         "rate_qps": "2000 q/s"}],
        "bench": {"rates_qps": ["5k", 7500], "max_rate_qps": "20k"},
    }  # fmt: skip
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    loaded = load_scenario(path, ["phases.0.rate_qps=1.5k"])
    assert loaded.load is not None and loaded.load.rate_qps == 1000.0
    assert [p.rate_qps for p in loaded.phases] == [1500.0, 2000.0]
    assert loaded.bench is not None
    assert loaded.bench.rates_qps == [5000.0, 7500.0] and loaded.bench.max_rate_qps == 20_000.0
