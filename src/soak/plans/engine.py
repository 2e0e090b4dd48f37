"""The one engine that runs a plan, and the registry of plans by name.

Every command that runs something (`soak start --foreground`, `soak load`, `soak load
--replay`, `soak bench`, `soak upgrade`) builds one plan of the same shape and hands it
to `run_plan`, as k6's executors register with one scheduler:

- `check()`: what it needs, validated before anything starts (InputError: exit 2, one
  line, nothing left running);
- `run(started)`: its steps from its start; whatever it starts it pushes on `started`
  (the teardown) the moment it is started;
- its teardown: `started` unwound in reverse order by the engine, after the steps
  whatever ended them (their end, an exception, SIGINT or SIGTERM); each stop is tried
  whatever the one before did;
- `outcome()`: the error the command exits with (None: exit 0), per the exit-code
  contract (DESIGN.md: 1 a check failed, 2 bad input, 3 internal error).

A signal (soak.interrupt.trap_signals, the one handler) raises Interrupted where the
steps are; the teardown runs and the command exits 128 + the signal: 130 (SIGINT), 143
(SIGTERM). A plan that reports an interruption itself (the upgrade's JUnit and JSON)
catches Interrupted in its steps and says so in its outcome.

The registry names where each plan lives; a plan's module is imported only when it is
run (a command's start-up stays small, and the foreground soak's plan, which runs the
service's machinery, lives with its command: nothing above this package is imported
from here).
"""

from __future__ import annotations

import importlib
import signal
from collections.abc import Callable
from typing import Protocol

from soak.errors import EXIT_INTERNAL, SoakError
from soak.interrupt import Interrupted, trap_signals


class Plan(Protocol):
    """One run of a command, in the shape every plan has (the module docstring)."""

    # What the one line after a SIGTERM adds (what the teardown removed); "" for nothing.
    stopped_note: str

    def check(self) -> None: ...

    def run(self, started: Teardown) -> None: ...

    def outcome(self) -> SoakError | None: ...


class Teardown:
    """What a plan started, stopped in reverse order: the one teardown path."""

    def __init__(self) -> None:
        self._stops: list[tuple[str, Callable[[], object]]] = []
        self.errors: list[str] = []  # `what: why` for each stop that raised

    def push(self, what: str, stop: Callable[[], object]) -> None:
        self._stops.append((what, stop))

    def stop(self, what: str) -> None:
        """The stop pushed last as `what`, now (a plan's steps end what they started in
        their own order; it raises as the stop raises), and no longer in the teardown."""
        for i in range(len(self._stops) - 1, -1, -1):
            if self._stops[i][0] == what:
                _, stop = self._stops.pop(i)
                stop()
                return

    def __len__(self) -> int:
        return len(self._stops)

    def unwind(self) -> None:
        """Every stop, last pushed first; one that raises does not keep the others from
        running (its error is kept in `errors`). Safe to call twice."""
        while self._stops:
            what, stop = self._stops.pop()
            try:
                stop()
            except Exception as exc:  # the next stop must still run
                self.errors.append(f"{what}: {type(exc).__name__}: {exc}")


class UnknownPlan(SoakError):
    """A plan name the registry does not hold: a fault of soak, not of its input."""

    exit_code = EXIT_INTERNAL


class Stopped(SoakError):
    """SIGINT or SIGTERM ended a plan's steps; its teardown has run."""

    def __init__(self, exc: Interrupted, note: str) -> None:
        self.exit_code = exc.exit_code
        if exc.signum == signal.SIGINT:
            super().__init__("interrupted")  # what a Ctrl-C has always said
        else:
            super().__init__(f"stopped by {exc.signal_name}" + (f"; {note}" if note else ""))


class TeardownFailed(SoakError):
    """Something a plan started could not be stopped (exit 3: a fault of soak or of the
    engine under it; the other parts were stopped)."""

    exit_code = EXIT_INTERNAL


# name -> "module:attribute" of the plan's class (or factory), imported when used.
REGISTRY: dict[str, str] = {
    "soak": "soak.commands.start:ForegroundSoak",
    "bench": "soak.plans.bench:BenchPlan",
    "load": "soak.plans.load:LoadPlan",
    "replay": "soak.plans.replay:ReplayPlan",
    "upgrade": "soak.plans.upgrade_gate:UpgradeGatePlan",
}


def plan_class(name: str) -> Callable[..., Plan]:
    """The registered plan `name`'s class; UnknownPlan (exit 3) for a name not there."""
    where = REGISTRY.get(name)
    if where is None:
        known = ", ".join(sorted(REGISTRY))
        raise UnknownPlan(f"internal error: no plan named {name!r} (known: {known})")
    module, attribute = where.split(":")
    factory: Callable[..., Plan] = getattr(importlib.import_module(module), attribute)
    return factory


def make_plan(name: str, *args: object, **kwargs: object) -> Plan:
    return plan_class(name)(*args, **kwargs)


def run_plan(plan: Plan) -> None:
    """The plan checked, run, torn down; raises its outcome (a SoakError with the exit
    code), Stopped on a signal."""
    started = Teardown()
    with trap_signals():
        try:
            plan.check()
            plan.run(started)
        except Interrupted as exc:
            _unwind(started)
            raise Stopped(exc, plan.stopped_note) from None
        finally:
            _unwind(started)
    if started.errors:
        raise TeardownFailed("could not stop " + "; ".join(started.errors))
    error = plan.outcome()
    if error is not None:
        raise error


def _unwind(started: Teardown) -> None:
    """The teardown to its end: a second signal during it only says it is under way
    (soak.interrupt.SignalTrap), and one raised before the trap saw it restarts it."""
    try:
        started.unwind()
    except Interrupted:
        started.unwind()
