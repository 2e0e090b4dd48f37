"""The plan engine: every command's plan registered under its name, an unknown name an
internal error, the teardown unwound in reverse order whatever ends the steps (an
error, a real SIGTERM), and the outcome raised with its exit code."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from soak.errors import CheckFailed, InputError, SoakError
from soak.plans import engine
from soak.plans.engine import REGISTRY, Stopped, Teardown, TeardownFailed, UnknownPlan

# The commands that run something, and the plan each registers.
COMMAND_PLANS = {
    "soak": "soak.commands.start",  # soak start --foreground
    "bench": "soak.plans.bench",
    "load": "soak.plans.load",
    "replay": "soak.plans.replay",  # soak load --replay
    "upgrade": "soak.plans.upgrade_gate",
}


@pytest.mark.parametrize("name", sorted(COMMAND_PLANS))
def test_every_commands_plan_is_registered_with_the_plan_shape(name: str) -> None:
    factory = engine.plan_class(name)
    assert factory.__module__ == COMMAND_PLANS[name]
    for step in ("check", "run", "outcome"):
        assert callable(getattr(factory, step)), (name, step)
    assert isinstance(factory.stopped_note, str)  # type: ignore[attr-defined]


def test_the_registry_holds_exactly_the_command_plans() -> None:
    assert set(REGISTRY) == set(COMMAND_PLANS)


def test_an_unknown_plan_is_an_internal_error() -> None:
    with pytest.raises(UnknownPlan) as err:
        engine.make_plan("soak-upside-down")
    assert err.value.exit_code == 3
    assert "no plan named 'soak-upside-down'" in str(err.value)
    assert "known: bench, load, replay, soak, upgrade" in str(err.value)


class Recorded:
    """A plan that starts three parts and then does `steps`; what happened, in order."""

    stopped_note = "the parts were stopped"

    def __init__(self, steps: object = None, error: SoakError | None = None) -> None:
        self.log: list[str] = []
        self.steps = steps
        self.error = error

    def check(self) -> None:
        self.log.append("check")

    def run(self, started: Teardown) -> None:
        for part in ("target", "sink", "load"):
            self.log.append(f"start {part}")
            started.push(part, lambda part=part: self.log.append(f"stop {part}"))
        if callable(self.steps):
            self.steps()

    def outcome(self) -> SoakError | None:
        self.log.append("outcome")
        return self.error


STOPS = ["stop load", "stop sink", "stop target"]


def test_the_teardown_unwinds_in_reverse_order_then_the_outcome_is_raised() -> None:
    plan = Recorded(error=CheckFailed("a check failed"))
    with pytest.raises(CheckFailed):
        engine.run_plan(plan)
    assert plan.log == ["check", "start target", "start sink", "start load", *STOPS, "outcome"]


def test_an_error_in_the_steps_still_stops_everything_started() -> None:
    def boom() -> None:
        raise RuntimeError("the engine fell over")

    plan = Recorded(boom)
    with pytest.raises(RuntimeError):
        engine.run_plan(plan)
    assert plan.log[-3:] == STOPS  # and no outcome: the error is the command's answer


def test_bad_input_in_check_starts_nothing() -> None:
    class Bad(Recorded):
        def check(self) -> None:
            raise InputError("--duration must be positive")

    plan = Bad()
    with pytest.raises(InputError):
        engine.run_plan(plan)
    assert plan.log == []


def test_a_stop_that_fails_does_not_keep_the_others_from_running() -> None:
    started = Teardown()
    stopped: list[str] = []
    started.push("a", lambda: stopped.append("a"))
    started.push("b", lambda: 1 / 0)
    started.push("c", lambda: stopped.append("c"))
    started.unwind()
    assert stopped == ["c", "a"] and started.errors == ["b: ZeroDivisionError: division by zero"]
    assert len(started) == 0


def test_a_failed_stop_is_an_internal_error_after_the_others() -> None:
    class FailingStop(Recorded):
        def run(self, started: Teardown) -> None:
            super().run(started)
            started.push("stuck", lambda: (_ for _ in ()).throw(OSError("still there")))

    plan = FailingStop()
    with pytest.raises(TeardownFailed) as err:
        engine.run_plan(plan)
    assert err.value.exit_code == 3 and "stuck: OSError: still there" in str(err.value)
    assert plan.log[-3:] == STOPS


def test_a_stop_taken_by_the_steps_is_not_run_again() -> None:
    started = Teardown()
    stopped: list[str] = []
    started.push("load", lambda: stopped.append("load"))
    started.stop("load")
    started.unwind()
    assert stopped == ["load"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_real_signal_during_the_steps_tears_down_and_exits_128_plus_it(
    sig: signal.Signals, code: int
) -> None:
    waited = threading.Event()

    def wait_for_the_signal() -> None:
        os.kill(os.getpid(), sig)
        waited.wait(30)  # the handler raises here, in the main thread

    plan = Recorded(wait_for_the_signal)
    before = signal.getsignal(sig)
    with pytest.raises(Stopped) as err:
        engine.run_plan(plan)
    assert not waited.is_set()
    assert err.value.exit_code == code
    assert plan.log[-3:] == STOPS and "outcome" not in plan.log
    said = "stopped by SIGTERM; the parts were stopped" if code == 143 else "interrupted"
    assert str(err.value) == said
    assert signal.getsignal(sig) == before  # the handler put back
