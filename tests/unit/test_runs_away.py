"""The seconds a run's service was away: due by the schedule, all skipped, per class."""

from __future__ import annotations

from soak.clock import NS_PER_S
from soak.runs.away import AWAY_FIELD, away_text, away_windows
from soak.runs.timeline import PhaseSpan

S = NS_PER_S
T0 = 1_000 * S


def test_the_away_seconds_are_due_by_their_phase_and_skipped() -> None:
    spans = [
        PhaseSpan(0, "warmup", T0, T0 + 10 * S, 100.0, True),
        PhaseSpan(1, "steady", T0 + 10 * S, T0 + 60 * S, 2.5, False),
    ]
    shares = {"hit": 0.7, "miss": 0.3}
    away = away_windows(spans, shares, T0 + 8 * S, T0 + 14 * S + S // 2, {"soak": "r"})
    # 2 s at 100 q/s, then 4 whole seconds at 2.5 q/s (2 + 3 + 2 + 3), the half second not
    assert (away.seconds, away.due) == (6, 200 + 10)
    rows = [p for p in away.points if p.tags["class"] == "all"]
    assert [p.time_ns for p in rows] == [T0 + k * S for k in range(9, 15)]
    for p in rows:
        assert p.fields["sent"] == 0 and p.fields["skipped"] == p.fields["due"]
        assert p.fields[AWAY_FIELD] == p.fields["due"] and p.tags["soak"] == "r"
    classes = [p for p in away.points if p.tags["class"] != "all"]
    assert sum(float(p.fields["due"]) for p in classes) == away.due
    assert away_text(away, 6.4).startswith("service away for 6.4 s: 210 queries due in 6 s")
