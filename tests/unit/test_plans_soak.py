"""The soak plan: what happens when (its steps), from a run's timeline."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from soak.clock import NS_PER_S
from soak.config import Scenario
from soak.plans.soak import At, Every, SoakPlan, phases_after, rate_change
from soak.runs.context import RunContext
from soak.runs.ending import Outcome, RunEnd
from soak.runs.layout import DataDir
from soak.runs.run import Run
from soak.runs.state import RunStatus, StateStore
from soak.runs.timeline import RateChange, Timeline
from soak.sinks.metrics import ServiceMetrics

S = NS_PER_S


def scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "t",
            "target": {"runtime": "external", "pid": 1},
            "load": {"rate_qps": 100, "mix": [{"name": "a", "queries": ["a.test A"]}]},
            "samplers": {"interval_s": 5},
            "leaks": {"interval_s": 60},
            "phases": [
                {"name": "warmup", "duration_s": "10m", "warmup": True, "rate_qps": 50},
                {"name": "steady", "duration_s": "50m"},
                {"name": "peak", "duration_s": "10m", "rate_qps": 300},
            ],
        }
    )


def never_judged(end: RunEnd) -> Outcome:
    raise AssertionError("the run never ends here")


def run_at(tmp_path: Path, origin_ns: int) -> Run:
    data_dir = DataDir(tmp_path).create()
    state = StateStore(data_dir.state_db)
    metrics = ServiceMetrics(CollectorRegistry())
    record = state.create_run("t-1", scenario(), data_dir.run_dir("t-1"))
    run = Run(record, RunContext(state, data_dir, metrics, on_end=never_judged))
    run.timeline = Timeline.of(run.scenario, origin_ns)  # as Run.start sets it
    return run


def test_the_plan_says_when_each_rate_starts() -> None:
    tl = Timeline.of(scenario(), 1000 * S)
    assert rate_change(tl, 0) is None  # the load starts with the first phase's rate
    assert rate_change(tl, 1) == RateChange(100, 1600 * S)  # the load's rate_qps
    assert rate_change(tl, 2) == RateChange(300, 4600 * S)
    assert [s.name for s in phases_after(tl, 1000 * S)] == ["steady", "peak"]
    assert [s.name for s in phases_after(tl, 1600 * S)] == ["peak"]  # entered already


def test_the_steps_from_the_start(tmp_path: Path) -> None:
    run = run_at(tmp_path, 1000 * S)
    steps = SoakPlan(run).steps(1000 * S)
    assert [s.job for s in steps] == ["tick", "leaks", "phase:1", "phase:2", "end"]
    tick, leaks = steps[0], steps[1]
    assert isinstance(tick, Every) and isinstance(leaks, Every)
    assert (tick.interval_s, tick.start_ns, tick.end_ns) == (5, 1000 * S, 5200 * S)
    # Leak passes only after the warm-up, every leaks.interval_s, to the end.
    assert (leaks.interval_s, leaks.start_ns, leaks.end_ns) == (60, 1600 * S, 5200 * S)
    end = steps[-1]
    assert isinstance(end, At) and end.at_ns == 5200 * S
    assert [s.name for s in steps] == ["tick", "analyse", "phase", "phase", "end"]


def test_a_resumed_plan_enters_only_the_phases_to_come(tmp_path: Path) -> None:
    run = run_at(tmp_path, 1000 * S)
    steps = SoakPlan(run).steps(2000 * S)  # in the steady phase
    assert [s.job for s in steps] == ["tick", "leaks", "phase:2", "end"]
    peak = steps[2]
    assert isinstance(peak, At) and peak.at_ns == 4600 * S


def test_a_phase_step_applies_its_rate_through_the_run(tmp_path: Path) -> None:
    run = run_at(tmp_path, 1000 * S)
    peak = next(s for s in SoakPlan(run).steps(1000 * S) if s.job == "phase:2")
    peak.step()  # no load in this run: the phase is entered and recorded
    assert run.phase_index == 2
    record = run.ctx.state.get_run("t-1")
    assert record is not None and record.phase == "peak"
    assert record.status is RunStatus.PENDING
