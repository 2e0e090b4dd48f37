import threading
import time

from prometheus_client import CollectorRegistry

from soak.clock import NS_PER_S
from soak.points import Point
from soak.samplers import build_samplers
from soak.samplers.selection import SamplersConfig
from soak.samplers.tick import TickRunner
from soak.sinks.metrics import ServiceMetrics

S = NS_PER_S
RUN = {"soak": "r1", "scenario": "s", "target": "t", "version": "v"}


class Fixed:
    def __init__(self, name: str, measurement: str = "x") -> None:
        self.name, self.measurement = name, measurement

    def sample(self, tick_time_ns: int) -> list[Point]:
        return [Point(self.measurement, {"v": 1.0}, tick_time_ns)]


class Failing:
    name = "broken"

    def sample(self, tick_time_ns: int) -> list[Point]:
        raise OSError("no such process")


class Rendezvous:
    """Finishes only when its partner runs at the same time: proves concurrency."""

    def __init__(self, name: str, barrier: threading.Barrier) -> None:
        self.name, self.barrier = name, barrier

    def sample(self, tick_time_ns: int) -> list[Point]:
        self.barrier.wait(timeout=10)
        return [Point("y", {"v": 2.0}, tick_time_ns, {"who": self.name})]


class Stuck:
    name = "stuck"

    def __init__(self) -> None:
        self.release = threading.Event()

    def sample(self, tick_time_ns: int) -> list[Point]:
        self.release.wait(timeout=30)
        return []


def test_points_carry_the_scheduled_time_and_the_run_tags() -> None:
    runner = TickRunner([Fixed("a"), Fixed("b", "z")], run_tags=RUN)
    points = runner.run_tick(42 * S)
    runner.close()
    assert [p.measurement for p in points] == ["x", "z"]
    assert all(p.time_ns == 42 * S and p.tags == RUN for p in points)


def test_samplers_of_one_tick_run_concurrently() -> None:
    barrier = threading.Barrier(2)
    runner = TickRunner([Rendezvous("a", barrier), Rendezvous("b", barrier)], run_tags=RUN)
    points = runner.run_tick(S)
    runner.close()
    assert sorted(p.tags["who"] for p in points) == ["a", "b"]


def test_a_failing_sampler_is_counted_and_recorded_and_the_others_go_on() -> None:
    registry = CollectorRegistry()
    runner = TickRunner(
        [Fixed("a"), Failing(), Fixed("b")], run_tags=RUN, metrics=ServiceMetrics(registry)
    )
    runner.run_tick(S)
    points = runner.run_tick(2 * S)
    runner.close()
    events = [p for p in points if p.measurement == "event"]
    assert [p.measurement for p in points if p.measurement != "event"] == ["x", "x"]
    (event,) = events
    assert event.tags["kind"] == "sampler_error" and event.tags["sampler"] == "broken"
    assert "no such process" in str(event.fields["message"])
    assert event.time_ns == 2 * S and event.tags["soak"] == "r1"
    assert runner.errors["broken"] == 2
    value = registry.get_sample_value(
        "soak_sampler_errors_total", {"soak": "r1", "sampler": "broken"}
    )
    assert value == 2.0
    count = registry.get_sample_value(
        "soak_sampler_duration_seconds_count", {"soak": "r1", "sampler": "a"}
    )
    assert count == 2.0


def test_a_stuck_sampler_times_out_and_is_not_started_twice() -> None:
    stuck = Stuck()
    runner = TickRunner([stuck, Fixed("a")], run_tags=RUN, timeout_s=0.2)
    first = runner.run_tick(S)
    second = runner.run_tick(2 * S)
    stuck.release.set()
    runner.close()
    assert [p.tags.get("kind") for p in first if p.measurement == "event"] == ["sampler_timeout"]
    assert [p.tags.get("kind") for p in second if p.measurement == "event"] == ["sampler_overrun"]
    assert [p.measurement for p in second if p.measurement != "event"] == ["x"]
    assert runner.errors["stuck"] == 2


class SlowLedger(Stuck):
    """The load's sampler: its points (the ledger's windows) must never be lost."""

    name = "load"
    keep_late = True

    def sample(self, tick_time_ns: int) -> list[Point]:
        self.release.wait(timeout=30)
        return [Point("load", {"due": 1000.0}, tick_time_ns - S, {"class": "all"})]


def test_a_late_sampler_that_keeps_its_points_has_them_written_with_the_next_tick() -> None:
    """The load's points are the run's ledger: a result after the deadline is not lost."""
    slow = SlowLedger()
    runner = TickRunner([slow, Fixed("a")], run_tags=RUN, timeout_s=0.2)
    first = runner.run_tick(S)
    (event,) = [p for p in first if p.measurement == "event"]
    assert event.tags["kind"] == "sampler_timeout"
    assert "its points follow with the next tick" in str(event.fields["message"])
    slow.release.set()
    wait_until = time.monotonic() + 10
    while not runner._late_points and time.monotonic() < wait_until:  # the late result
        time.sleep(0.01)
    second = runner.run_tick(2 * S)
    runner.close()
    late = [p for p in second if p.measurement == "load" and p.time_ns == 0]
    assert len(late) == 1 and late[0].fields["due"] == 1000.0 and late[0].tags["soak"] == "r1"


def test_a_late_ledger_sample_at_the_runs_end_is_handed_over_by_close() -> None:
    """The last tick's load sample still running when the run ends: close() waits for it
    (a run's end has no next tick) and returns its points, tagged, once."""
    slow = SlowLedger()
    runner = TickRunner([slow, Fixed("a")], run_tags=RUN, timeout_s=0.2)
    runner.run_tick(S)  # the load's sample misses its deadline
    threading.Timer(0.05, slow.release.set).start()  # and ends while close() waits
    handed = runner.close()
    assert [(p.fields["due"], p.tags["soak"]) for p in handed] == [(1000.0, "r1")]


def test_a_late_ledger_sample_that_ended_after_the_last_tick_is_handed_over_by_close() -> None:
    """Its points waiting for a next tick that never comes: close() hands them over."""
    slow = SlowLedger()
    runner = TickRunner([slow], run_tags=RUN, timeout_s=0.2)
    runner.run_tick(S)
    slow.release.set()
    wait_until = time.monotonic() + 10
    while not runner._late_points and time.monotonic() < wait_until:  # the late result
        time.sleep(0.01)
    assert len(runner.close()) == 1


def test_load_rates_reach_the_service_metrics() -> None:
    class Load:
        name = "load"

        def sample(self, tick_time_ns: int) -> list[Point]:
            fields = {"rate_target": 2000.0, "rate_achieved": 1990.0}
            return [Point("load", dict(fields), tick_time_ns, {"class": "all"})]

    registry = CollectorRegistry()
    runner = TickRunner([Load()], run_tags=RUN, metrics=ServiceMetrics(registry))
    runner.run_tick(S)
    runner.close()
    labels = {"soak": "r1", "class": "all"}
    assert registry.get_sample_value("soak_load_rate_achieved_qps", labels) == 1990.0
    assert registry.get_sample_value("soak_load_rate_target_qps", labels) == 2000.0


def test_load_counts_add_up_across_ticks_in_the_service_metrics() -> None:
    class Load:
        name = "load"

        def sample(self, tick_time_ns: int) -> list[Point]:
            fields = {"sent": 1000.0, "lost": 3.0, "rate_target": 1000.0, "rate_achieved": 997.0}
            return [Point("load", dict(fields), tick_time_ns, {"class": "miss"})]

    registry = CollectorRegistry()
    runner = TickRunner([Load()], run_tags=RUN, metrics=ServiceMetrics(registry))
    runner.run_tick(S)
    runner.run_tick(2 * S)
    runner.close()
    labels = {"soak": "r1", "class": "miss"}
    assert registry.get_sample_value("soak_load_sent_total", labels) == 2000.0
    assert registry.get_sample_value("soak_load_lost_total", labels) == 6.0


class Slow:
    """Answers only when released, long after any deadline a test gives it."""

    def __init__(self, name: str = "slow") -> None:
        self.name = name
        self.release = threading.Event()

    def sample(self, tick_time_ns: int) -> list[Point]:
        self.release.wait(timeout=30)
        return [Point("late", {"v": 1.0}, tick_time_ns)]


def test_a_slow_sampler_loses_its_own_sample_never_the_others_nor_the_next_tick() -> None:
    slow = Slow()
    registry = CollectorRegistry()
    # The tick's time is "now" for the runner; the samplers get 30% of a 1-s interval.
    runner = TickRunner(
        [Fixed("a"), slow, Fixed("b", "z")],
        run_tags=RUN,
        metrics=ServiceMetrics(registry),
        interval_s=1.0,
        deadline_fraction=0.3,
    )
    ticks = [time.time_ns(), time.time_ns() + S]
    runner.wall_clock_ns = lambda: ticks[0]
    first = runner.run_tick(ticks[0])
    runner.wall_clock_ns = lambda: ticks[1]
    second = runner.run_tick(ticks[1])
    slow.release.set()
    runner.close()
    for points, kind in ((first, "sampler_timeout"), (second, "sampler_overrun")):
        # every sampler of the tick: its points, or an event that says why not
        assert [p.measurement for p in points if p.measurement != "event"] == ["x", "z"]
        (event,) = [p for p in points if p.measurement == "event"]
        assert event.tags["kind"] == kind and event.tags["sampler"] == "slow"
        assert "slow:" in str(event.fields["message"])
    assert [p.measurement for p in first] == ["x", "event", "z"]  # in sampler order
    lost, busy = str(first[1].fields["message"]), str(second[1].fields["message"])
    assert "0.30 s after the tick's time" in lost and "lost" in lost
    assert "from the tick 1 s earlier" in busy
    assert runner.errors == {"a": 0, "slow": 2, "b": 0}
    assert (
        registry.get_sample_value("soak_sampler_errors_total", {"soak": "r1", "sampler": "slow"})
        == 2.0
    )


def test_each_sampler_has_its_own_deadline() -> None:
    class Quick:
        name, deadline_s = "quick", 0.05

        def __init__(self) -> None:
            self.release = threading.Event()

        def sample(self, tick_time_ns: int) -> list[Point]:
            self.release.wait(timeout=30)
            return []

    class Patient:
        name = "patient"

        def sample(self, tick_time_ns: int) -> list[Point]:
            time.sleep(0.2)
            return [Point("p", {"v": 1.0}, tick_time_ns)]

    quick = Quick()
    runner = TickRunner([quick, Patient()], run_tags=RUN, interval_s=10.0)
    now = time.time_ns()
    runner.wall_clock_ns = lambda: now
    points = runner.run_tick(now)
    quick.release.set()
    runner.close()
    assert [p.measurement for p in points] == ["event", "p"]
    assert points[0].tags["sampler"] == "quick" and "0.05 s after" in str(
        points[0].fields["message"]
    )


def test_a_tick_that_ends_after_the_next_ticks_time_is_an_event_with_its_duration() -> None:
    runner = TickRunner([Fixed("a")], run_tags=RUN, interval_s=1.0)
    tick_ns = 100 * S
    runner.wall_clock_ns = lambda: tick_ns + 3 * S // 2  # the tick starts 1.5 s late
    points = runner.run_tick(tick_ns)
    runner.close()
    assert [p.measurement for p in points] == ["x", "event"]
    overrun = points[1]
    assert overrun.tags["kind"] == "tick_overrun" and overrun.time_ns == tick_ns
    assert isinstance(overrun.fields["value"], float) and overrun.fields["value"] >= 1.5
    assert "1.50 s late to start" in str(overrun.fields["message"])
    assert "overran" in runner.gap_cause(tick_ns + 3 * S)


def test_the_cause_of_a_gap_names_the_tick_before_it() -> None:
    runner = TickRunner([Fixed("a")], run_tags=RUN, interval_s=1.0)
    assert runner.gap_cause(5 * S) == "no earlier tick ran here"
    runner.wall_clock_ns = lambda: 5 * S
    runner.run_tick(5 * S)
    runner.close()
    cause = runner.gap_cause(8 * S)
    assert cause.startswith("the tick 3 s earlier had its samples") and "did not start" in cause


def test_every_api_call_and_probe_is_a_sampler_of_its_own() -> None:
    cfg = SamplersConfig.model_validate(
        {
            "proc": {"enabled": False},
            "http": [{"path": "/a"}, {"path": "/b", "endpoint": "bee"}],
            "dig": [{"name": "x.test"}, {"name": "y.test", "type": "AAAA"}],
        }
    )
    names = [s.name for s in build_samplers(cfg, lambda: None)]
    assert names == [
        "target",
        "http GET /a",
        "http bee",
        "dig x.test/A",
        "dig y.test/AAAA",
        "host",
    ]
