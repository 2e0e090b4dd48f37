"""A run's sampler agent: where the target runs on another node (`samplers.agent`),
its node-local samplers (proc, smaps) run there, in one agent on the engine, pinned
by `placement`, and their points come back to the run (docs/scale.md).

The run opens a coordinator of its own for it (/v1/samples, the run's token), removes
what an earlier coordinator of the run left, starts the agent and waits until it
has called in. From the run's origin on, every reply gives the tick grid, so the
agent's points carry the same timestamps as the service's own samplers. In the
run, the agent is one more sampler: each tick hands on the points that arrived
since the last one. An agent that has not called for its lease (or whose task
ended) is an `agent_lost` event; the run goes on without those series.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from soak.agents.coordinator import AgentsOnEngine, Coordinator
from soak.agents.engine import AgentEngine, AgentOutput
from soak.agents.engines import make_engine
from soak.agents.protocol import SAMPLES, SamplesReply
from soak.agents.spec import AgentSpec
from soak.points import Fault, Point
from soak.samplers.member import SAMPLERS_ENV, TARGET_ENV, points_of
from soak.samplers.selection import SamplersConfig

ROLE = "sampler"
WAIT_S = 0.2
LAST_TICK_WAIT_S = 2.0  # at the stop, for the points of the run's last tick
POLL_ENGINE_S = 5.0


@dataclass(frozen=True)
class NodeView:
    """How the agent sees its node on an engine: where the node's /proc and files are,
    and what that takes (swarm: bind mounts, root and CAP_SYS_PTRACE to read another
    process's /proc/PID/smaps; kubernetes: the node's PID namespace)."""

    proc_root: str
    node_fs: str
    mounts: tuple[str, ...] = ()
    user: str | None = None
    cap_add: tuple[str, ...] = ()
    host_pid: bool = False


NODE_VIEWS = {
    "local": NodeView("/proc", "/"),
    "swarm": NodeView(
        "/host/proc",
        "/host/proc/1/root",
        ("/proc:/host/proc:ro", "/var/run/docker.sock:/var/run/docker.sock:rw"),
        user="0",
        cap_add=("CAP_SYS_PTRACE",),
    ),
    "kubernetes": NodeView("/proc", "/proc/1/root", host_pid=True),
}


class SamplerInbox:
    """The coordinator's side of /v1/samples: what came in, and when it last called.
    Not thread-safe: the coordinator calls it under its lock."""

    def __init__(
        self, interval_s: float, lease_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s, self.lease_s, self.clock = interval_s, lease_s, clock
        self.origin_ns: int | None = None
        self.stopping = False
        self.calls = 0
        self.last_call_s = 0.0
        self._points: list[Point] = []

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path != SAMPLES or int(body["agent"]) != 0:
            raise LookupError(path)
        points = points_of(body.get("points", []))
        self.calls += 1
        self.last_call_s = self.clock()
        self._points += points
        reply = SamplesReply(self.origin_ns, self.interval_s, self.lease_s, self.stopping)
        return reply.to_json_dict()

    def take(self) -> list[Point]:
        out, self._points = self._points, []
        return out

    def silent_s(self) -> float:
        return self.clock() - self.last_call_s if self.calls else 0.0


def sampler_spec(
    cfg: SamplersConfig, target_name: str, run_id: str, coordinator: str, token: str
) -> AgentSpec:
    """The one agent's spec: `soak sampler-agent`, its node view, the samplers' config."""
    agent = cfg.agent
    assert agent is not None
    view = NODE_VIEWS[agent.engine]
    return AgentSpec(
        run_id=run_id,
        agents=agent.engine_config(),
        duration_s=366 * 86400.0,  # it runs until the run stops it (or its lease ends)
        coordinator=coordinator,
        token=token,
        role=ROLE,
        command=("sampler-agent", "--proc-root", view.proc_root, "--node-fs", view.node_fs),
        extra_env={SAMPLERS_ENV: cfg.model_dump_json(), TARGET_ENV: target_name},
        mounts=view.mounts,
        user=view.user,
        cap_add=view.cap_add,
        host_pid=view.host_pid,
    )


class RemoteSamplers:
    """The sampler agent as one of the run's samplers (name, sample) with a life of its
    own: prepare() before the run's clock starts, release() at its origin, check() every
    tick, stop() at the end."""

    name = "sampler agent"

    def __init__(
        self,
        cfg: SamplersConfig,
        target_name: str,
        run_id: str,
        origin_ns: Callable[[], int],
        *,
        logs_dir: AgentOutput,
        engine: AgentEngine | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`logs_dir`: a local agent's output, named by the run (runs.layout.agents_dir)."""
        assert cfg.agent is not None
        self.cfg, self.agent_cfg = cfg, cfg.agent
        self.target_name, self.run_id, self.origin_ns = target_name, run_id, origin_ns
        self.clock = clock
        self.engine = engine or make_engine(self.agent_cfg.engine_config(), logs_dir)
        self._hosted = AgentsOnEngine(self.engine)
        self.inbox = SamplerInbox(cfg.interval_s, self.agent_cfg.lease_s, clock)
        self._coordinator: Coordinator | None = None
        self._lock = threading.Lock()
        self._lost = False
        self._engine_polled_s = 0.0

    def prepare(self) -> None:
        """The coordinator open, the agent started and called in; raises with nothing left."""

        def spec(url: str, token: str) -> AgentSpec:
            return sampler_spec(self.cfg, self.target_name, self.run_id, url, token)

        def missing() -> list[str]:
            return [] if self.inbox.calls else ["0"]

        self._coordinator = self._hosted.open(
            self.inbox.call, self.agent_cfg, self.run_id, ROLE, spec, missing,
            what="sampler agent", clock=self.clock,
        )  # fmt: skip

    def release(self) -> None:
        """The run's origin is known: the agent samples on its grid from now on."""
        if self._coordinator is None:
            self.prepare()
        assert self._coordinator is not None
        with self._coordinator.lock:
            self.inbox.origin_ns = self.origin_ns()

    def sample(self, tick_time_ns: int) -> list[Point]:
        """The points that arrived since the last tick (each with its own tick's time)."""
        if self._coordinator is None:
            return []
        with self._coordinator.lock:
            return self.inbox.take()

    def check(self) -> list[Fault]:
        """The agent lost (once): silent for a lease, or its task ended."""
        if self._coordinator is None or self._lost:
            return []
        why = None
        with self._coordinator.lock:
            silent_s = self.inbox.silent_s()
        if silent_s > self.agent_cfg.lease_s:
            why = f"no call for {silent_s:.0f} s"
        elif self.clock() - self._engine_polled_s >= POLL_ENGINE_S:
            self._engine_polled_s = self.clock()
            failed = [s for s in self.engine.poll() if s.done]
            if failed:
                why = failed[0].message or failed[0].state
        if why is None:
            return []
        self._lost = True
        message = f"sampler agent on the target's node lost: {why}"
        return [Fault("agent_lost", message, 0.0)]

    def stop(self, last_tick_ns: int | None = None) -> list[Point]:
        """The points that came in since the last tick, the last tick's included (waited
        for a moment: the agent sends them just after the tick); then the agent and its
        coordinator are gone (removed from the engine, not waited for)."""
        if self._coordinator is None:
            return []
        coordinator = self._coordinator
        points: list[Point] = []
        end_s = self.clock() + LAST_TICK_WAIT_S
        while True:
            with coordinator.lock:
                self.inbox.stopping = True
                points += self.inbox.take()
            arrived = last_tick_ns is None or any(p.time_ns >= last_tick_ns for p in points)
            if arrived or self._lost or self.clock() >= end_s:
                break
            time.sleep(WAIT_S)
        self._close()
        if last_tick_ns is not None:  # a tick the agent sampled before it heard of the end
            points = [p for p in points if p.time_ns <= last_tick_ns]
        return points

    def _close(self) -> None:
        self._coordinator = None
        self._hosted.close()
