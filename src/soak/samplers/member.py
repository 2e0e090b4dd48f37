"""A sampler agent: the node-local samplers (proc, smaps) of a target that runs on
another node than the soak, run on that node by one agent (docs/scale.md).

The agent finds the process as `samplers.agent` says (a pid, a pidfile on that node,
or a container's main process) under `proc_root`: /proc for a local agent or one in
the node's PID namespace, the node's /proc where a container has it mounted
(/host/proc for a swarm agent); a pidfile is read under `node_fs`, where the agent
sees the node's files (/ for a local agent, PROC/1/root in a container). It
samples on the run's tick grid (origin + k * interval, the timestamps the service's
own samplers use), so its points line up with the rest of the run, and sends each
tick's points to the run's coordinator (soak.agents.protocol, /v1/samples). Points
that could not be sent go with the next call; after a lease without an answer the
agent stops by itself. A target that restarts is found again (a pidfile or a
container give the new process).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.agents.protocol import (
    Clocks,
    CoordinatorClient,
    CoordinatorUnreachable,
    Lease,
    SamplesReply,
    wait_for_start,
)
from soak.clock import TickGrid, ns_to_s
from soak.errors import TargetStartError
from soak.points import Point, point_from_json, point_to_json
from soak.samplers.base import Sampler
from soak.samplers.selection import SamplerAgentConfig, SamplersConfig
from soak.samplers.tick import fault_text, sample_once, sampler_event
from soak.targets.base import Running

log = logging.getLogger(__name__)

SAMPLERS_ENV = "SOAK_SAMPLERS"  # the run's `samplers` section as JSON (`agent` included)
TARGET_ENV = "SOAK_SAMPLER_TARGET"  # the target's name, for its points and messages
REGISTER_POLL_S = 0.5  # how often the agent asks for the grid before the run starts
MAX_UNSENT_POINTS = 10_000  # a lease's worth of ticks is far less; beyond, the oldest go


def node_path(path: str, node_fs: Path) -> Path:
    """A path on the target's node, as this agent sees it."""
    return node_fs / path.lstrip("/")


class NodeTarget:
    """The target's process on this node, found again when it is gone."""

    def __init__(
        self, cfg: SamplerAgentConfig, name: str, proc_root: Path, node_fs: Path = Path("/")
    ) -> None:
        self.cfg, self.name, self.proc_root, self.node_fs = cfg, name, proc_root, node_fs
        self._running: Running | None = None

    def __call__(self) -> Running | None:
        running = self._running
        if running is not None and running.pid is not None and self._alive(running.pid):
            return running
        pid = self._find_pid()
        self._running = None if pid is None else Running(self.name, "", {}, pid, None)
        return self._running

    def _alive(self, pid: int) -> bool:
        return (self.proc_root / str(pid) / "stat").exists()

    def _find_pid(self) -> int | None:
        if self.cfg.pid is not None:
            return self.cfg.pid if self._alive(self.cfg.pid) else None
        if self.cfg.pidfile is not None:
            try:
                pid = int(node_path(self.cfg.pidfile, self.node_fs).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                return None  # not written yet, or between a stop and a start
            return pid if self._alive(pid) else None
        assert self.cfg.container is not None
        from soak.targets.external import container_pid

        try:
            return container_pid(self.name, self.cfg.container)
        except TargetStartError:
            return None


def node_samplers(
    cfg: SamplersConfig, target: Callable[[], Running | None], proc_root: Path
) -> list[Sampler]:
    """The samplers that must run on the target's node: proc and smaps, as configured."""
    from soak.samplers.proc import ProcSampler
    from soak.samplers.smaps import SmapsSampler

    out: list[Sampler] = []
    if cfg.proc.enabled:
        out.append(ProcSampler(target, tree=cfg.proc.tree, proc_root=proc_root))
    if cfg.smaps is not None:
        out.append(SmapsSampler(cfg.smaps, target, proc_root=proc_root))
    return out


def sample_tick(samplers: list[Sampler], tick_ns: int) -> list[Point]:
    """Every sampler's points of one tick, one after the other (two samplers of one
    process need no deadline); one that fails is a `sampler_error` event, as in a
    TickRunner."""
    points: list[Point] = []
    for sampler in samplers:
        got, _, error = sample_once(sampler, tick_ns)
        if error is not None:  # the process gone mid-read, a permission: said, not fatal
            message = f"{fault_text(error)} (on the target's node)"
            points.append(sampler_event(sampler.name, message, tick_ns))
        points += got
    return points


def next_tick(reply: SamplesReply, now_ns: int, last_tick_ns: int | None) -> int:
    """The grid's next tick from now on (now itself if it is one), after the last one."""
    assert reply.origin_ns is not None
    grid = TickGrid.every(reply.interval_s, reply.origin_ns)
    tick_ns = grid.at_or_after(now_ns)
    return tick_ns if last_tick_ns is None else max(tick_ns, grid.after(last_tick_ns))


def run_sampler_agent(
    samplers: list[Sampler],
    client: CoordinatorClient,
    *,
    lease_s: float = 5.0,
    max_duration_s: float = 366 * 86400.0,
    clocks: Clocks | None = None,
) -> int:
    """Sample on the run's grid until told to stop; the number of ticks sampled. Between
    ticks longer than a third of the lease it calls anyway (with any points not yet
    delivered), so that the lease holds both ways whatever the tick interval."""
    clocks = clocks or Clocks()
    reply = wait_for_start(
        lambda: client.samples([]), lease_s, clocks, max_duration_s, REGISTER_POLL_S
    )
    lease = Lease(reply.lease_s, clocks.monotonic)
    unsent: list[dict[str, Any]] = []

    def call() -> SamplesReply:
        nonlocal unsent
        try:
            answer = client.samples(unsent)
        except CoordinatorUnreachable as exc:
            lease.check(exc)  # LeaseLost once the coordinator has been silent a lease
            return reply
        lease.renew_s(answer.lease_s)
        unsent = []
        return answer

    ticks = 0
    last_tick_ns: int | None = None
    end_s = clocks.monotonic() + max_duration_s
    while not reply.stop and clocks.monotonic() < end_s:
        tick_ns = last_tick_ns = next_tick(reply, clocks.wall_ns(), last_tick_ns)
        while (wait_s := ns_to_s(tick_ns - clocks.wall_ns())) > 0:
            clocks.sleep(min(wait_s, reply.lease_s / 3))
            if clocks.wall_ns() < tick_ns:
                reply = call()
                if reply.stop:
                    return ticks
        unsent += [point_to_json(p) for p in sample_tick(samplers, tick_ns)]
        del unsent[:-MAX_UNSENT_POINTS]
        ticks += 1
        reply = call()
    return ticks


def points_of(body: list[dict[str, Any]]) -> list[Point]:
    return [point_from_json(p) for p in body]
