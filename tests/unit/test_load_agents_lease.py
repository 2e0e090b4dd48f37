"""The coordinator's bookkeeping (Fleet), agents' windows merged by time, and the HTTP
calls between an agent and its coordinator on loopback."""

from __future__ import annotations

import pytest

from soak.agents.coordinator import Coordinator
from soak.agents.protocol import (
    CoordinatorClient,
    CoordinatorRefused,
    CoordinatorUnreachable,
    Lease,
    LeaseLost,
)
from soak.clock import NS_PER_S
from soak.histogram import LatencyHistogram
from soak.load.fleet.lease import START_MARGIN_S, Fleet, fleet_calls
from soak.load.fleet.merge import AgentTotals, AgentWindow, sum_windows

S = NS_PER_S
T0 = 1_000 * S


class Clock:
    def __init__(self) -> None:
        self.mono = 0.0
        self.wall_ns = T0

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall_ns += int(seconds * S)


def hist_of(latencies_us: list[int]) -> LatencyHistogram:
    h = LatencyHistogram()
    for us in latencies_us:
        h.record(us)
    return h


def window(agent: int, stamp_ns: int, sent: int, latencies_us: list[int]) -> AgentWindow:
    h = hist_of(latencies_us)
    lat = {
        "lat_min_ms": min(latencies_us) / 1000,
        "lat_max_ms": max(latencies_us) / 1000,
        "lat_avg_ms": sum(latencies_us) / len(latencies_us) / 1000,
    }
    fields = {"sent": float(sent), "completed": float(len(latencies_us)), "lost": 0.0, **lat}
    fields |= {"rate_target": 100.0, "rcode_noerror": float(len(latencies_us))}
    return AgentWindow(agent, stamp_ns, 1.0, {"all": fields}, {"all": h.encode()})


def fleet_of(count: int, clock: Clock, lease_s: float = 5.0) -> Fleet:
    f = Fleet(count, {"all": 1.0}, lease_s, clock=lambda: clock.mono, wall_ns=lambda: clock.wall_ns)
    for i in range(count):
        f.register(i)
    return f


def test_start_at_is_released_once_all_registered_and_never_too_soon() -> None:
    clock = Clock()
    f = Fleet(2, {"all": 1.0}, 5.0, clock=lambda: clock.mono, wall_ns=lambda: clock.wall_ns)
    assert f.register(0).start_at_ns is None and not f.all_registered
    f.register(1)
    assert f.all_registered
    assert f.release(T0 - S) == T0 + int(START_MARGIN_S * S)  # an origin already past
    assert f.reply(0).start_at_ns == f.reply(1).start_at_ns == T0 + int(START_MARGIN_S * S)
    assert f.release(T0 + 3 * S) == T0 + 3 * S
    assert f.reply(0).duration_s is None  # no end known: until told to stop


def test_every_agent_is_told_how_long_from_start_at_to_the_run_end() -> None:
    """A start_at pushed later than the origin shortens the agents' run: the end stays."""
    clock = Clock()
    f = fleet_of(2, clock)
    f.release(T0 - 2 * S, end_ns=T0 + 10 * S)  # a resumed run whose origin is past
    reply = f.reply(1)
    assert reply.start_at_ns == T0 + int(START_MARGIN_S * S)
    assert reply.duration_s == pytest.approx(10 - START_MARGIN_S)


def test_a_second_is_handed_out_when_every_active_agent_reported_it() -> None:
    clock = Clock()
    f = fleet_of(2, clock)
    f.set_rate(200.0)
    f.heartbeat(0, [window(0, T0 + S, 100, [100, 200, 300])])
    assert f.take().merged == {}  # agent 1 has not reported that second yet
    f.heartbeat(1, [window(1, T0 + S, 100, [400, 500])])
    taken = f.take()
    merged = taken.merged["all"]
    assert merged["sent"] == 200 and merged["completed"] == 5 and merged["rcode_noerror"] == 5
    assert merged["rate_target"] == 200.0 and merged["rate_achieved"] == 200.0
    assert merged["lat_min_ms"] == 0.1 and merged["lat_max_ms"] == 0.5
    assert merged["lat_avg_ms"] == pytest.approx(0.3)
    assert taken.per_agent[0]["all"]["sent"] == 100 and taken.per_agent[1]["all"]["completed"] == 2
    assert f.take().merged == {}  # handed out once


def test_merged_percentiles_are_those_of_the_added_histograms() -> None:
    fast = [100] * 990 + [200] * 10
    slow = [5_000] * 100
    merged = sum_windows([window(0, T0, 1000, fast), window(1, T0, 100, slow)], 1.0)["all"]
    together = hist_of(fast + slow)
    assert merged["lat_p99_ms"] == together.quantile_ms(0.99)
    assert merged["lat_p50_ms"] == together.quantile_ms(0.5)
    # the mean of the two agents' p99s would be far off the merged one
    assert merged["lat_p99_ms"] > 4.9


def test_a_silent_agent_is_lost_after_its_lease_and_the_others_go_on() -> None:
    clock = Clock()
    f = fleet_of(3, clock, lease_s=5.0)
    f.set_rate(300.0)
    for second in (1, 2):
        clock.advance(1.0)
        for agent in (0, 2):  # agent 1 never reports
            f.heartbeat(agent, [window(agent, T0 + second * S, 100, [100])])
    assert f.take().merged == {} and f.expire() == []
    clock.advance(4.5)
    for agent in (0, 2):
        f.heartbeat(agent, [])
    (lost,) = f.expire()
    assert lost.index == 1 and lost.lost_why == "no heartbeat for 5 s"
    assert f.reply(1).stop and not f.reply(0).stop
    merged = f.take().merged["all"]
    assert merged["sent"] == 400 and merged["rate_achieved"] == 200.0  # two seconds, two agents
    assert merged["rate_target"] == 300.0  # the asked rate: a lost agent does not lower it
    assert not f.mark_lost(1, "again")  # lost once


def test_the_asked_rate_is_the_one_in_force_at_each_second() -> None:
    clock = Clock()
    f = fleet_of(1, clock)
    f.set_rate(100.0)
    clock.advance(1.5)
    f.set_rate(300.0)
    f.heartbeat(0, [window(0, T0 + S, 100, [100]), window(0, T0 + 2 * S, 300, [100])])
    assert f.take().merged["all"]["rate_target"] == 200.0  # 100 then 300 q/s


def test_windows_after_their_second_was_handed_out_still_count() -> None:
    clock = Clock()
    f = fleet_of(2, clock, lease_s=1.0)
    f.heartbeat(0, [window(0, T0 + S, 10, [100])])
    clock.advance(3.0)  # the second is older than the lease: handed out without agent 1
    assert f.take().merged["all"]["sent"] == 10
    f.heartbeat(1, [window(1, T0 + S, 7, [100])])
    assert f.take().merged == {}  # held: a second already stored is not written again
    f.heartbeat(0, [window(0, T0 + 2 * S, 5, [100])])
    f.heartbeat(1, [window(1, T0 + 2 * S, 5, [100])])
    assert f.take().merged["all"]["sent"] == 17  # with the next second handed out


def test_an_agent_keeps_its_lease_while_calls_get_through() -> None:
    clock = Clock()
    lease = Lease(5.0, lambda: clock.mono)
    clock.advance(4.0)
    lease.check(CoordinatorUnreachable("refused"))
    clock.advance(1.5)
    with pytest.raises(LeaseLost, match=r"no answer from the coordinator for 5\.5 s"):
        lease.check(CoordinatorUnreachable("refused"))


def test_each_agent_is_handed_its_share_of_the_asked_rate() -> None:
    f = Fleet(4, {"all": 1.0}, 5.0)
    f.set_rate(1000.0)
    assert [f.reply(i).share_qps for i in range(4)] == [250.0] * 4
    f.set_rate(600.0)  # a phase's new rate: every agent's share follows
    assert f.reply(3).share_qps == 150.0
    assert f.rate_qps == 600.0  # the fleet keeps the total (what a lost agent was due)


def test_an_agent_and_its_coordinator_over_http() -> None:
    f = Fleet(1, {"all": 1.0}, 5.0)
    coordinator = Coordinator(fleet_calls(f), "sekrit", ("127.0.0.1", 0))
    coordinator.start()
    url = f"http://127.0.0.1:{coordinator.address[1]}"
    client = CoordinatorClient(url, "sekrit", 0)
    try:
        assert client.register().start_at_ns is None
        with coordinator.lock:
            f.set_rate(50.0)
            start_at = f.release(0)
        reply = client.heartbeat([window(0, start_at + S, 50, [250]).to_json_dict()])
        assert reply.start_at_ns == start_at and reply.share_qps == 50.0 and not reply.stop
        totals = AgentTotals(
            agent=0,
            sent=50,
            completed=50,
            lost=0,
            abandoned=0,
            late=0,
            rate_target_qps=50.0,
            duration_s=1.0,
            hist=hist_of([250]),
        )
        client.done(totals.to_json_dict())
        assert f.slots[0].done and f.slots[0].totals is not None
        with pytest.raises(CoordinatorRefused, match="401"):
            CoordinatorClient(url, "wrong", 0).register()
        with pytest.raises(CoordinatorRefused, match="404"):
            CoordinatorClient(url, "sekrit", 3).register()
    finally:
        client.close()
        coordinator.close()
    with pytest.raises(CoordinatorUnreachable):
        CoordinatorClient(url, "sekrit", 0).register()


def due_window(agent: int, stamp_ns: int, sent: int) -> AgentWindow:
    w = window(agent, stamp_ns, sent, [100] * sent)
    w.fields["all"] |= {"due": float(sent), "skipped": 0.0}
    return w


def test_each_second_is_merged_by_itself_and_a_lost_agent_is_due_its_share() -> None:
    clock = Clock()
    f = fleet_of(2, clock)
    f.set_rate(200.0)
    f.heartbeat(0, [due_window(0, T0 + S, 100), due_window(0, T0 + 2 * S, 100)])
    f.heartbeat(1, [due_window(1, T0 + S, 100)])
    f.mark_lost(1, "exit -9")  # its second 2 never comes
    seconds = f.take_merged()
    assert [t.stamp_ns for t in seconds] == [T0 + S, T0 + 2 * S]  # one window a second
    first, second = (t.merged["all"] for t in seconds)
    assert (first["due"], first["sent"], first["skipped"]) == (200, 200, 0)
    assert (second["due"], second["sent"], second["skipped"]) == (200, 100, 100)
    assert seconds[1].per_agent.keys() == {0}


def test_seconds_after_the_run_end_are_stored_as_one_at_the_end() -> None:
    """A run stopped early: the drain's seconds go to its end, one point, none lost."""
    clock = Clock()
    f = fleet_of(1, clock)
    f.set_rate(100.0)
    f.heartbeat(0, [due_window(0, T0 + k * S, 100) for k in (1, 2, 3)])
    seconds = f.take_merged(end_ns=T0 + S + S // 2)
    assert [t.stamp_ns for t in seconds] == [T0 + S, T0 + S + S // 2]
    assert [t.merged["all"]["due"] for t in seconds] == [100, 200]


def test_an_agent_that_starts_late_has_its_first_seconds_due_and_skipped() -> None:
    """Two agents at 300 q/s from the run's origin; agent 1's first window is its 4th
    second: its share of the 3 seconds before is due and skipped (`agent_late`), so the
    run's due is the schedule's, and the classes add up to `all`."""
    clock = Clock()
    f = Fleet(2, {"hit": 0.75, "miss": 0.25}, 5.0, clock=lambda: clock.mono,
              wall_ns=lambda: clock.wall_ns)  # fmt: skip
    for i in range(2):
        f.register(i)
    f.set_rate(300.0)
    origin = T0 + 2 * S
    assert f.release(origin, counted_from_ns=origin) == origin
    clock.advance(10)

    def sent_all(agent: int, stamp_ns: int) -> AgentWindow:
        w = window(agent, stamp_ns, 150, [250] * 150)
        w.fields["all"] |= {"due": 150.0, "skipped": 0.0}
        w.fields["hit"] = {"due": 112.0, "sent": 112.0, "skipped": 0.0}
        w.fields["miss"] = {"due": 38.0, "sent": 38.0, "skipped": 0.0}
        return w

    for k in range(1, 7):
        f.heartbeat(0, [sent_all(0, origin + k * S)])
        if k >= 4:
            f.heartbeat(1, [sent_all(1, origin + k * S)])
    clock.advance(20)  # every second complete
    seconds = f.take_merged()
    assert [t.stamp_ns for t in seconds] == [origin + k * S for k in range(1, 7)]
    due = sum(t.merged["all"]["due"] for t in seconds)
    sent = sum(t.merged["all"]["sent"] for t in seconds)
    assert (sent, due) == (6 * 150 + 3 * 150, 6 * 300)
    assert seconds[0].per_agent[1]["all"]["skipped"] == 150
    assert all(t.merged["hit"]["due"] + t.merged["miss"]["due"] == 300 for t in seconds)
    (late,) = f.late_starts
    assert (late.agent, late.seconds, late.due) == (1, 3, 450.0)


def test_a_start_at_pushed_past_the_origin_stays_on_the_run_grid() -> None:
    clock = Clock()
    f = fleet_of(2, clock)
    assert f.release(T0 - S // 2) == T0 + 3 * S // 2  # whole seconds after the origin


def test_a_load_of_its_own_keeps_its_length_when_its_start_is_pushed() -> None:
    # `soak load`: no run's timeline to keep, so the end moves with start_at
    clock = Clock()
    f = fleet_of(2, clock)
    assert f.release(T0 - S // 2, end_ns=T0 + 3 * S, keep_length=True) == T0 + 3 * S // 2
    assert f.end_ns == T0 + 5 * S and f.counted_from_ns == T0 + 3 * S // 2  # pushed 2 s


def test_every_due_second_of_every_agent_counts_whatever_came_late_or_never() -> None:
    """Two agents at 300 q/s for 8 s on a busy machine: agent 1's windows of seconds 4-6
    land only while the engine removes it (after the stop's wait), its last two never.
    The run's last second waits for the final take, the late windows are stored with it
    once, and the seconds agent 1 never reported are its share due and skipped
    (`agent_short`): 2,400 due, the schedule's. Before, a stop's take before the agents
    were removed left their last words in the fleet, and unreported seconds were nobody's."""
    clock = Clock()
    f = fleet_of(2, clock, lease_s=3.0)
    f.set_rate(300.0)
    origin = T0 + 2 * S
    end = origin + 8 * S
    assert f.release(origin, end, counted_from_ns=origin) == origin
    clock.advance(3)
    for k in range(1, 9):
        f.heartbeat(0, [due_window(0, origin + k * S, 150)])
    f.heartbeat(1, [due_window(1, origin + k * S, 150) for k in (1, 2, 3)])
    clock.advance(20)  # every second older than a lease: handed out without agent 1
    taken = f.take_merged(end)
    assert taken[-1].stamp_ns < end  # the run's last second waits for the final take
    f.heartbeat(1, [due_window(1, origin + k * S, 150) for k in (4, 5, 6)])  # late
    counts = {"sent": 1200, "completed": 1200, "lost": 0, "abandoned": 0, "late": 0}
    totals = AgentTotals(agent=0, **counts, rate_target_qps=150, duration_s=8, hist=hist_of([1]))
    f.finish(0, totals)
    taken += f.merged(f.take_final(end), end)
    stamps = [t.stamp_ns for t in taken]
    assert stamps == sorted(set(stamps)) and stamps[-1] == end  # none stored twice
    assert sum(t.merged["all"]["due"] for t in taken) == 2400
    assert sum(t.merged["all"]["sent"] for t in taken) == 1200 + 6 * 150
    (short,) = f.late_starts
    assert (short.agent, short.seconds, short.due, short.short) == (1, 2, 300.0, True)
