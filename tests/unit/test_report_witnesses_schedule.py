"""The schedule as a witness of the ledger: each phase's due against the rate over the
seconds whose windows it holds, phase boundaries mid-second included."""

from __future__ import annotations

from typing import Any

from soak.report.witnesses import ScheduledPhase, schedule_disagreements, scheduled_due

# A scaled scenario: a warm-up of 1.5 s at 100 q/s, then 5 s at 200 q/s. The warm-up
# holds the window of second 0 only; the window of second 1 (0.5 s of each rate: 150)
# is the steady phase's, with the 5 after it (the last one cut by the run's end at 6.5 s).
SCHEDULE = [ScheduledPhase("warm", 100.0, 1.5), ScheduledPhase("steady", 200.0, 5.0)]


def report(warm_due: float, steady_due: float) -> dict[str, Any]:
    return {
        "phases": [
            {"name": "warm", "duration_s": 1.5, "metrics": {"due": warm_due}},
            {"name": "steady", "duration_s": 5.0, "metrics": {"due": steady_due}},
        ]
    }


def test_phases_that_start_and_end_mid_second_are_held_to_their_seconds() -> None:
    assert scheduled_due(SCHEDULE, 1, 6.5) == 150 + 4 * 200 + 100
    assert schedule_disagreements(report(100, 1050), SCHEDULE) == []


def test_a_window_missing_or_doubled_is_named() -> None:
    assert schedule_disagreements(report(100, 850), SCHEDULE) == [
        "phase steady: due 850 != its schedule 1,050 (200 q/s over 5.5 s)"
    ]
    assert schedule_disagreements(report(200, 1050), SCHEDULE) == [
        "phase warm: due 200 != its schedule 100 (100 q/s over 1 s)"
    ]


def test_a_flat_out_phase_schedules_nothing_to_hold_it_to() -> None:
    flat = [ScheduledPhase("warm", 100.0, 1.5), ScheduledPhase("max", None, 5.0)]
    assert schedule_disagreements(report(100, 123_456), flat) == []
    assert scheduled_due(flat, 1, 2) is None
