import threading

import pytest
from prometheus_client import CollectorRegistry

from soak.points import Point
from soak.samplers.tick import TickRunner, next_tick_ns
from soak.sinks.metrics import ServiceMetrics

S = 1_000_000_000
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


def test_next_tick_is_on_the_absolute_grid() -> None:
    origin = 1_000 * S
    assert next_tick_ns(origin - 5, 60, origin) == origin
    assert next_tick_ns(origin, 60, origin) == origin
    assert next_tick_ns(origin + 1, 60, origin) == origin + 60 * S
    assert next_tick_ns(origin + 60 * S, 60, origin) == origin + 60 * S
    # a tick that ran 150 s late: the next is on the grid, the missed ones are skipped
    assert next_tick_ns(origin + 150 * S, 60, origin) == origin + 180 * S
    assert next_tick_ns(origin + 1, 1.5, origin) == origin + 1_500_000_000
    with pytest.raises(ValueError):
        next_tick_ns(origin, 0, origin)


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
    value = registry.get_sample_value("soak_sampler_errors_total", {"sampler": "broken"})
    assert value == 2.0
    count = registry.get_sample_value("soak_sampler_duration_seconds_count", {"sampler": "a"})
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
    runner.run_tick(S + 1_000_000_000)
    runner.close()
    labels = {"soak": "r1", "class": "miss"}
    assert registry.get_sample_value("soak_load_sent_total", labels) == 2000.0
    assert registry.get_sample_value("soak_load_lost_total", labels) == 6.0
