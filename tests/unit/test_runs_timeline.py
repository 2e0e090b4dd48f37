"""The run's timeline: scaling, spans on absolute times (the tick grid: test_clock)."""

from __future__ import annotations

import pytest

from soak.clock import NS_PER_S
from soak.config import Phase, Scenario
from soak.errors import InputError
from soak.runs import timeline

S = NS_PER_S


def scenario(**extra: object) -> Scenario:
    data = {
        "name": "t",
        "target": {"runtime": "external", "pid": 1},
        "load": {"rate_qps": 100, "mix": [{"name": "a", "queries": ["a.test A"]}]},
        "phases": [
            {"name": "warmup", "duration_s": "10m", "warmup": True, "rate_qps": 50},
            {"name": "steady", "duration_s": "50m"},
        ],
    }
    data.update(extra)
    return Scenario.model_validate(data)


def test_scale_keeps_proportions() -> None:
    scaled = timeline.scale_phases(scenario().phases, 120)
    assert [p.duration_s for p in scaled] == pytest.approx([20.0, 100.0])
    assert [p.name for p in scaled] == ["warmup", "steady"]
    assert scaled[0].warmup and scaled[0].rate_qps == 50


def test_scaled_phase_boundaries_fall_on_whole_seconds() -> None:
    """`--duration 90s` of a 10m/50m/7m scenario: 13.4/67.2/9.4 s would put the warm-up's
    end mid-window; each boundary (13.4, 80.6, 90) is rounded, the total kept."""
    phases = [*scenario().phases, Phase(name="tail", duration_s=420)]
    scaled = timeline.scale_phases(phases, 90)
    assert [p.duration_s for p in scaled] == [13.0, 68.0, 9.0]
    assert sum(p.duration_s for p in scaled) == 90
    # A phase never shrinks to nothing: 1 s at least.
    tiny = timeline.scale_phases([Phase(name="a", duration_s=1), *phases], 3)
    assert [p.duration_s for p in tiny] == [1.0, 1.0, 1.0, 1.0]


def test_scale_rejects_zero() -> None:
    with pytest.raises(InputError):
        timeline.scale_phases([Phase(name="a", duration_s=1)], 0)


def test_scaled_scenario_keeps_base_dir(tmp_path: object) -> None:
    sc = scenario()
    sc._base_dir = tmp_path  # type: ignore[assignment]
    copy = timeline.scaled_scenario(sc, 60)
    assert copy.base_dir == tmp_path
    assert copy.duration_s == pytest.approx(60)
    assert timeline.scaled_scenario(sc, None) is sc


def test_timeline_rates_and_bounds() -> None:
    spans = timeline.timeline(scenario(), 1000 * S)
    assert [(s.start_ns, s.end_ns) for s in spans] == [
        (1000 * S, 1600 * S),
        (1600 * S, 4600 * S),
    ]
    assert [s.rate_qps for s in spans] == [50, 100]  # phase rate, else load.rate_qps
    assert timeline.warmup_end_ns(spans) == 1600 * S
    assert timeline.end_ns(spans) == 4600 * S
    assert timeline.span_at(spans, 1599 * S).name == "warmup"  # type: ignore[union-attr]
    assert timeline.span_at(spans, 1600 * S).name == "steady"  # type: ignore[union-attr]
    assert timeline.span_at(spans, 4600 * S) is None
    assert timeline.span_at(spans, 999 * S) is None


def test_no_warmup_means_verdicts_from_origin() -> None:
    sc = scenario(phases=[{"name": "steady", "duration_s": 60}])
    spans = timeline.timeline(sc, 7 * S)
    assert timeline.warmup_end_ns(spans) == 7 * S


def test_the_timeline_places_the_loads_rate() -> None:
    tl = timeline.Timeline.of(scenario(), 1000 * S)
    assert tl.rate_at(999 * S) == 0.0  # before the origin: none yet
    assert tl.rate_at(1000 * S) == 50
    assert tl.rate_at(1600 * S) == 100
    assert tl.rate_at(4600 * S) == 0.0  # after the end: none
