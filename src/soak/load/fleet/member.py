"""A load agent under a coordinator: register, start at the run's start_at, send its
windows with every heartbeat, follow its share of the asked rate (the coordinator's
reply carries it: the agent divides nothing), and stop when told to or when its lease
runs out (soak.agents.protocol).

The seconds are on the run's grid: each closed window is sent stamped with the end
of the second its queries were due in (start_at + (k + 1) s, the same on every
agent), so the coordinator adds the agents' windows of the same second. A window
that could not be delivered is kept and sent with the next heartbeat (a lease's
worth at most: beyond that the agent stops, and its totals say what it sent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from soak.agents.protocol import (
    Clocks,
    CoordinatorClient,
    CoordinatorRefused,
    CoordinatorUnreachable,
    Lease,
    Reply,
    wait_for_start,
)
from soak.clock import ns_to_s, second_end_ns
from soak.errors import SoakError
from soak.load.fleet.merge import AgentTotals, AgentWindow
from soak.load.generator import LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.segments import Segment, agent_phase, segment_config

WAIT_POLL_S = 0.2  # how often an agent asks for start_at while the others register


def _register_then_heartbeat(client: CoordinatorClient) -> Callable[[], Reply]:
    """The calls while the agent waits for start_at: register until it got through, then
    heartbeats without windows."""
    registered = False

    def call() -> Reply:
        nonlocal registered
        reply = client.heartbeat([]) if registered else client.register()
        registered = True
        return reply

    return call


def run_member(
    cfg: LoadConfig,
    segment: Segment,
    server: tuple[str, int],
    max_duration_s: float,
    client: CoordinatorClient,
    *,
    base_dir: Path,
    allow_targets: Sequence[str] = (),
    lease_s: float = 5.0,
    clocks: Clocks | None = None,
) -> AgentTotals:
    """The agent's whole life under the coordinator; its totals (also sent with /done)."""
    clocks = clocks or Clocks()
    if cfg.seed is None:
        raise SoakError("the load config has no seed: the coordinator fixes one for all agents")
    mine = segment_config(cfg, segment, cfg.seed)
    call = _register_then_heartbeat(client)
    reply = wait_for_start(call, lease_s, clocks, max_duration_s, WAIT_POLL_S)
    if reply.stop or reply.start_at_ns is None or (reply.duration_s or 1.0) <= 0:
        raise SoakError("the coordinator stopped the run before it started")
    start_at_ns = reply.start_at_ns
    if reply.duration_s is not None:  # the run's end: the workers stop there by themselves
        max_duration_s = min(max_duration_s, reply.duration_s)
    # The grid's origin on the monotonic clock: start_at as of now (wall may step). The
    # workers start now and send from then on.
    origin_s = clocks.monotonic() + ns_to_s(start_at_ns - clocks.wall_ns())
    runner = LoadRunner(
        mine,
        server,
        base_dir=base_dir,
        allow_targets=allow_targets,
        phase=agent_phase(segment),
    )
    runner.keep_ledger = True  # its closed windows go to the coordinator by grid second
    share_qps = reply.share_qps  # the coordinator divided the run's rate
    runner.start(share_qps, max_duration_s, begin_at_s=origin_s)
    lease = Lease(reply.lease_s, clocks.monotonic)
    unsent: list[AgentWindow] = []
    second = 1
    try:
        while True:
            finished = runner.wait(max(0.0, origin_s + second - clocks.monotonic()))
            unsent += closed_windows(runner, segment, start_at_ns)
            try:
                reply = lease.renew(client.heartbeat([w.to_json_dict() for w in unsent]))
                unsent = []
            except CoordinatorUnreachable as exc:
                lease.check(exc)
            if reply.stop or finished or second >= max_duration_s:
                break
            if reply.share_qps != share_qps:
                share_qps = reply.share_qps
                runner.set_rate(share_qps)
            second += 1
    finally:
        result = runner.stop()
    unsent += closed_windows(runner, segment, start_at_ns)  # the drain's: all of them now
    totals = AgentTotals.from_result(
        segment.index,
        result,
        runner.latency_histogram(),
        rate_target_qps=share_qps,
        duration_s=result.duration_s,
    )
    _deliver(client, unsent, totals)
    return totals


def closed_windows(runner: LoadRunner, segment: Segment, start_at_ns: int) -> list[AgentWindow]:
    """The runner's windows closed since the last call, each stamped with the end of its
    own second of the run's grid (start_at + (k + 1) s): the coordinator adds the
    agents' windows of the same second."""
    out = []
    for window in runner.take_ledger():
        fields, hists = runner.window_parts(window)
        stamp_ns = second_end_ns(start_at_ns, window.second)
        out.append(AgentWindow(segment.index, stamp_ns, 1.0, fields, hists))
    return out


def _deliver(client: CoordinatorClient, unsent: list[AgentWindow], totals: AgentTotals) -> None:
    """The last windows and the totals; a coordinator that is gone is no reason to fail."""
    try:
        client.heartbeat([w.to_json_dict() for w in unsent])
        client.done(totals.to_json_dict())
    except (CoordinatorUnreachable, CoordinatorRefused):
        pass  # the totals line on stdout still has them
