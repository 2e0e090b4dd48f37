"""`soak agent`'s pure parts: its segment, its config, its points and sinks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.errors import InputError
from soak.load.fleet.agent import (
    JsonLinesSink,
    load_config_json,
    open_sink,
    parse_segment,
    window_points,
)
from soak.load.segments import Segment
from soak.points import point_from_json
from soak.sinks.influx import InfluxV1Sink


def test_segment_from_the_environment() -> None:
    assert parse_segment("2/4", {}) == Segment(2, 4)
    assert parse_segment("$JOB_COMPLETION_INDEX/4", {"JOB_COMPLETION_INDEX": "3"}) == Segment(3, 4)
    with pytest.raises(InputError, match="JOB_COMPLETION_INDEX is not set"):
        parse_segment("$JOB_COMPLETION_INDEX/4", {})
    with pytest.raises(InputError):
        parse_segment("$I/4", {"I": "4"})


def test_config_from_json_and_its_errors() -> None:
    text = json.dumps({"rate_qps": 100, "seed": 1, "mix": [{"name": "a", "queries": ["x. A"]}]})
    cfg = load_config_json(text)
    assert cfg.rate_qps == 100
    with pytest.raises(InputError, match="SOAK_AGENT_LOAD: rate_qps"):
        load_config_json(json.dumps({"rate_qps": -1, "mix": [{"name": "a", "queries": ["x"]}]}))
    with pytest.raises(InputError, match="give --scenario"):
        load_config_json(None)


def test_points_round_trip_through_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "points.jsonl"
    sink = open_sink(str(path))
    assert isinstance(sink, JsonLinesSink)
    fields = {"all": {"sent": 10.0, "completed": 9.0}, "a": {"sent": 10.0, "completed": 9.0}}
    points = window_points(fields, 5_000_000_000, {"soak": "r1", "agent": "2"})
    sink.write(points)
    sink.close()
    back = [point_from_json(json.loads(line)) for line in path.read_text().splitlines()]
    assert back == points
    assert {p.tags["class"] for p in back} == {"all", "a"}
    assert all(p.tags["agent"] == "2" and p.measurement == "load" for p in back)


def test_influx_sink_url() -> None:
    sink = open_sink("http://127.0.0.1:8086/?db=soak")
    assert isinstance(sink, InfluxV1Sink)
    sink.close()
    with pytest.raises(InputError, match=r"\?db=NAME"):
        open_sink("http://127.0.0.1:8086/")


def test_agent_needs_a_seed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from soak.cli import main

    monkeypatch.setenv("SOAK_AGENT_LOAD", json.dumps({"mix": [{"name": "a", "queries": ["x"]}]}))
    argv = ["agent", "--segment", "0/2", "--server", "127.0.0.1:5300", "--duration", "1"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "soak: the load config needs a seed (or --seed): every agent derives its own from it"
    )
